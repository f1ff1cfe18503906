package bindingtest

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/psbinding"
)

// Reach is what Do promises about the subject's own containers (not those
// Do adds): whether what it adds to one (env vars, envFrom sources, volume
// mounts) it adds to every one. The contract check holds Do to it on
// subjects with several containers, init containers and a native sidecar.
type Reach int

const (
	// ReachUnstated makes no promise: Do may change one container and
	// not another. The default, except for a declarative kind (see
	// ContractOptions.Reach).
	ReachUnstated Reach = iota
	// EveryContainer: what Do adds to one container of spec.containers
	// it adds to every one, sidecars included. Init containers are not
	// held to it.
	EveryContainer
	// EveryContainerAndInitContainer: what Do adds to one container it
	// adds to every container and every init container, native sidecars
	// (init containers with restartPolicy Always) included.
	EveryContainerAndInitContainer
)

func (r Reach) String() string {
	switch r {
	case EveryContainer:
		return "EveryContainer"
	case EveryContainerAndInitContainer:
		return "EveryContainerAndInitContainer"
	}
	return "ReachUnstated"
}

// reachOf is opts' Reach, else for a declarative kind the one its Spec
// promises: the Spec's env, envFrom and mounts go to every container, and
// to every init container with InitContainersToo.
func reachOf(b psbinding.Bindable, stated Reach) Reach {
	if stated != ReachUnstated {
		return stated
	}
	d, ok := b.(declarative.Declarer)
	if !ok {
		return ReachUnstated
	}
	spec := d.Declare()
	switch {
	case len(spec.Env)+len(spec.EnvFrom)+len(spec.VolumeMounts) == 0:
		return ReachUnstated
	case spec.InitContainersToo:
		return EveryContainerAndInitContainer
	}
	return EveryContainer
}

// reachProblem reports, when Do breaks reach's promise from before to
// after, which containers lack what Do added to others; "" when it keeps it.
func reachProblem(reach Reach, before, after *duck.WithPod) string {
	if reach == ReachUnstated {
		return ""
	}
	union, missing := reachGaps(reach, before, after)
	if len(missing) == 0 {
		return ""
	}
	scope := "container of spec.containers"
	fix := "loop over every container of spec.containers"
	if reach == EveryContainerAndInitContainer {
		scope = "container and init container"
		fix = "loop over spec.initContainers and spec.containers, every one"
	}
	if len(missing) > 6 {
		missing = append(missing[:6], fmt.Sprintf("  and %d more", len(missing)-6))
	}
	return fmt.Sprintf("Do breaks its promise to reach every %s (ContractOptions.Reach %s): it adds %s to some of them only:\n%s\nfix: %s, not only the first",
		scope, reach, strings.Join(union, ", "), strings.Join(missing, "\n"), fix)
}

// reachGaps returns what Do added to any of the subject's own containers
// in reach's scope (union), and one line per container that lacks some of
// it.
func reachGaps(reach Reach, before, after *duck.WithPod) (union, missing []string) {
	lists := []struct {
		kind          string
		before, after []corev1.Container
	}{{"container", before.Spec.Template.Spec.Containers, after.Spec.Template.Spec.Containers}}
	if reach == EveryContainerAndInitContainer {
		lists = append(lists, struct {
			kind          string
			before, after []corev1.Container
		}{"init container", before.Spec.Template.Spec.InitContainers, after.Spec.Template.Spec.InitContainers})
	}
	var labels []string
	gained := map[string][]string{} // container label -> what Do added to it
	for _, l := range lists {
		for _, was := range l.before {
			i := slices.IndexFunc(l.after, func(c corev1.Container) bool { return c.Name == was.Name })
			if i < 0 {
				continue // Do removed it: reported as Do not keeping what the subject has
			}
			label := l.kind + " " + was.Name
			labels = append(labels, label)
			gained[label] = addedTo(&was, &l.after[i])
			for _, item := range gained[label] {
				if !slices.Contains(union, item) {
					union = append(union, item)
				}
			}
		}
	}
	for _, label := range labels {
		lacks := slices.DeleteFunc(slices.Clone(union), func(item string) bool { return slices.Contains(gained[label], item) })
		if len(lacks) > 0 {
			missing = append(missing, fmt.Sprintf("  %s lacks %s", label, strings.Join(lacks, ", ")))
		}
	}
	return union, missing
}

// addedTo lists what a container gained from was to now: env vars,
// envFrom sources and volume mounts, each as "env NAME", "envFrom ..." or
// "mount PATH".
func addedTo(was, now *corev1.Container) []string {
	var out []string
	for _, e := range now.Env {
		if !slices.ContainsFunc(was.Env, func(x corev1.EnvVar) bool { return x.Name == e.Name }) {
			out = append(out, "env "+e.Name)
		}
	}
	for _, f := range now.EnvFrom {
		if !slices.ContainsFunc(was.EnvFrom, func(x corev1.EnvFromSource) bool { return jsonEqual(x, f) }) {
			out = append(out, "envFrom "+short(f))
		}
	}
	for _, m := range now.VolumeMounts {
		if !slices.ContainsFunc(was.VolumeMounts, func(x corev1.VolumeMount) bool { return x.MountPath == m.MountPath }) {
			out = append(out, "mount "+m.MountPath)
		}
	}
	return out
}
