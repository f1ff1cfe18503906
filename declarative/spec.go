package declarative

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/bindkit/bindkit/duck"
)

// Spec is what a declarative Binding adds to the pod template of each of
// its subjects. Its zero value adds nothing. Its JSON form is what a
// Binding publishes for the kube-apiserver's MutatingAdmissionPolicy to
// read (package policy).
type Spec struct {
	// Env entries are set, by name, in every container of the workload
	// (and every init container when InitContainersToo), but not in the
	// Containers and InitContainers the Spec adds.
	Env []corev1.EnvVar `json:"env,omitempty"`
	// EnvFrom sources are added, once, to the same containers.
	EnvFrom []corev1.EnvFromSource `json:"envFrom,omitempty"`
	// VolumeMounts are set, by mountPath, in the same containers.
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`
	// Volumes are set, by name, in the pod spec.
	Volumes []corev1.Volume `json:"volumes,omitempty"`
	// InitContainers are set, by name, in the pod spec: replaced where one
	// of the name exists, appended otherwise.
	InitContainers []corev1.Container `json:"initContainers,omitempty"`
	// Containers are set, by name, in the pod spec.
	Containers []corev1.Container `json:"containers,omitempty"`
	// InitContainersToo applies Env, EnvFrom and VolumeMounts to the
	// workload's init containers as well.
	InitContainersToo bool `json:"initContainersToo,omitempty"`
}

// Do adds the Spec to wp's pod template. It is idempotent: Do twice is Do
// once.
func (s Spec) Do(wp *duck.WithPod) {
	ps := &wp.Spec.Template.Spec
	s.eachTarget(ps, func(c *corev1.Container) {
		for _, e := range s.Env {
			c.Env = set(c.Env, *e.DeepCopy(), func(x corev1.EnvVar) bool { return x.Name == e.Name })
		}
		for _, f := range s.EnvFrom {
			if !slices.ContainsFunc(c.EnvFrom, func(x corev1.EnvFromSource) bool { return equality.Semantic.DeepEqual(x, f) }) {
				c.EnvFrom = append(c.EnvFrom, *f.DeepCopy())
			}
		}
		for _, m := range s.VolumeMounts {
			c.VolumeMounts = set(c.VolumeMounts, *m.DeepCopy(), func(x corev1.VolumeMount) bool { return x.MountPath == m.MountPath })
		}
	})
	for _, v := range s.Volumes {
		ps.Volumes = set(ps.Volumes, *v.DeepCopy(), func(x corev1.Volume) bool { return x.Name == v.Name })
	}
	for _, c := range s.InitContainers {
		ps.InitContainers = set(ps.InitContainers, *c.DeepCopy(), func(x corev1.Container) bool { return x.Name == c.Name })
	}
	for _, c := range s.Containers {
		ps.Containers = set(ps.Containers, *c.DeepCopy(), func(x corev1.Container) bool { return x.Name == c.Name })
	}
}

// Undo removes from wp's pod template what the Spec names: its env entries,
// envFrom sources, mounts, volumes and containers. Lists it leaves empty
// become nil, so Undo after Do gives back a workload that had none.
func (s Spec) Undo(wp *duck.WithPod) {
	ps := &wp.Spec.Template.Spec
	for _, c := range s.Containers {
		ps.Containers = remove(ps.Containers, func(x corev1.Container) bool { return x.Name == c.Name })
	}
	for _, c := range s.InitContainers {
		ps.InitContainers = remove(ps.InitContainers, func(x corev1.Container) bool { return x.Name == c.Name })
	}
	for _, v := range s.Volumes {
		ps.Volumes = remove(ps.Volumes, func(x corev1.Volume) bool { return x.Name == v.Name })
	}
	s.eachTarget(ps, func(c *corev1.Container) {
		for _, e := range s.Env {
			c.Env = remove(c.Env, func(x corev1.EnvVar) bool { return x.Name == e.Name })
		}
		for _, f := range s.EnvFrom {
			c.EnvFrom = remove(c.EnvFrom, func(x corev1.EnvFromSource) bool { return equality.Semantic.DeepEqual(x, f) })
		}
		for _, m := range s.VolumeMounts {
			c.VolumeMounts = remove(c.VolumeMounts, func(x corev1.VolumeMount) bool { return x.MountPath == m.MountPath })
		}
	})
}

// eachTarget calls f on every container the Spec's per-container entries
// go to: the workload's own, not the ones the Spec adds.
func (s Spec) eachTarget(ps *corev1.PodSpec, f func(*corev1.Container)) {
	ours := map[string]bool{}
	for _, c := range append(slices.Clone(s.InitContainers), s.Containers...) {
		ours[c.Name] = true
	}
	lists := []([]corev1.Container){ps.Containers}
	if s.InitContainersToo {
		lists = append(lists, ps.InitContainers)
	}
	for _, list := range lists {
		for i := range list {
			if !ours[list[i].Name] {
				f(&list[i])
			}
		}
	}
}

func set[E any](s []E, e E, same func(E) bool) []E {
	if i := slices.IndexFunc(s, same); i >= 0 {
		s[i] = e
		return s
	}
	return append(s, e)
}

func remove[E any](s []E, match func(E) bool) []E {
	s = slices.DeleteFunc(s, match)
	if len(s) == 0 {
		return nil
	}
	return s
}

func keys[E any](s []E, key func(E) string) []string {
	out := make([]string, len(s))
	for i, e := range s {
		out[i] = key(e)
	}
	return out
}
