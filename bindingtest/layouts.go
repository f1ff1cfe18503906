package bindingtest

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/bindkit/bindkit/duck"
)

// A layout is one arrangement of a subject's pod template that the
// contract is checked on besides the subject as given: newcomers' Do and
// Undo tend to work on the one layout they tried.
type layout struct {
	// name says, in a failure, what the layout holds.
	name string
	// make returns the subject in this layout, given what Do adds (own).
	make func(s Subject, own ownNames) *unstructured.Unstructured
}

// layouts are checked in this order, after the subject as given.
var layouts = []layout{{
	name: "a bare pod template (one container; no labels, annotations, env, mounts, volumes or init containers)",
	make: bare,
}, {
	name: "a crowded pod template (user entries named like the Binding's own, a native sidecar, a third container)",
	make: crowded,
}}

// ownNames are the names of what Do adds to a subject.
type ownNames struct {
	env, volumes, containers, mountPaths []string
}

// namesAdded returns what after has that before lacks, by name.
func namesAdded(before, after *duck.WithPod) ownNames {
	var own ownNames
	bs, as := &before.Spec.Template.Spec, &after.Spec.Template.Spec
	had := map[string]bool{}
	eachContainer := func(spec *corev1.PodSpec, f func(c *corev1.Container)) {
		for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
			for i := range list {
				f(&list[i])
			}
		}
	}
	eachContainer(bs, func(c *corev1.Container) {
		had["c/"+c.Name] = true
		for _, e := range c.Env {
			had["e/"+e.Name] = true
		}
		for _, m := range c.VolumeMounts {
			had["m/"+m.MountPath] = true
		}
	})
	for _, v := range bs.Volumes {
		had["v/"+v.Name] = true
	}
	note := func(list *[]string, key, name string) {
		if !had[key+name] && !slices.Contains(*list, name) {
			*list = append(*list, name)
		}
	}
	eachContainer(as, func(c *corev1.Container) {
		note(&own.containers, "c/", c.Name)
		for _, e := range c.Env {
			note(&own.env, "e/", e.Name)
		}
		for _, m := range c.VolumeMounts {
			note(&own.mountPaths, "m/", m.MountPath)
		}
	})
	for _, v := range as.Volumes {
		note(&own.volumes, "v/", v.Name)
	}
	return own
}

// lookalikes returns names that resemble those of own without being one:
// with a suffix, with a prefix, in lower case (env), or below it (mount
// paths). An Undo that matches by prefix, substring or case removes them.
func (own ownNames) lookalikes() ownNames {
	var out ownNames
	all := slices.Concat(own.env, own.volumes, own.containers, own.mountPaths)
	keep := func(list *[]string, names ...string) {
		for _, n := range names {
			if n != "" && !slices.Contains(all, n) && !slices.Contains(*list, n) {
				*list = append(*list, n)
			}
		}
	}
	for _, n := range own.env {
		keep(&out.env, n+"_USER", "USER_"+n, strings.ToLower(n))
	}
	label := func(n string) []string {
		n = strings.Trim(n[:min(len(n), 58)], "-")
		return []string{n + "-user", "user-" + n}
	}
	for _, n := range own.volumes {
		keep(&out.volumes, label(n)...)
	}
	for _, n := range own.containers {
		keep(&out.containers, label(n)...)
	}
	for _, p := range own.mountPaths {
		p = strings.TrimSuffix(p, "/")
		keep(&out.mountPaths, p+"-user", p+"/user")
	}
	return out
}

// bare is s with a pod template holding one container and nothing else,
// and an object without labels or annotations.
func bare(s Subject, _ ownNames) *unstructured.Unstructured {
	obj := s.Object.DeepCopy()
	meta, _ := obj.Object["metadata"].(map[string]any)
	delete(meta, "labels")
	delete(meta, "annotations")
	spec := map[string]any{"containers": []any{map[string]any{"name": "bindingtest-app", "image": "registry.example/web:1"}}}
	if path := s.Shape.Path(); len(path) > 0 {
		_ = unstructured.SetNestedField(obj.Object, map[string]any{"spec": spec}, path...)
	} else {
		obj.Object["spec"] = spec
	}
	return obj
}

// crowded is s with, in its pod spec, a native sidecar (an init container
// that keeps running) first among the init containers, a third container,
// and entries whose names resemble those of own: env vars and mounts in
// every container, volumes, and containers.
func crowded(s Subject, own ownNames) *unstructured.Unstructured {
	obj := s.Object.DeepCopy()
	spec := podSpecOf(s.Shape, obj)
	if spec == nil {
		return obj
	}
	like := own.lookalikes()
	spec["initContainers"] = slices.Concat([]any{container("bindingtest-native-sidecar", "registry.example/mesh:1", "Always")}, list(spec["initContainers"]))
	containers := append(list(spec["containers"]), container("bindingtest-worker", "registry.example/worker:1", ""))
	for _, n := range like.containers {
		containers = append(containers, container(n, "registry.example/user:1", ""))
	}
	spec["containers"] = containers
	volumes := list(spec["volumes"])
	for _, n := range like.volumes {
		volumes = append(volumes, map[string]any{"name": n, "emptyDir": map[string]any{}})
	}
	if len(volumes) > 0 {
		spec["volumes"] = volumes
	}
	eachContainerMap(spec, func(c map[string]any) {
		env := list(c["env"])
		for _, n := range like.env {
			env = append(env, map[string]any{"name": n, "value": "the workload's own"})
		}
		mounts := list(c["volumeMounts"])
		for _, p := range like.mountPaths {
			mounts = append(mounts, map[string]any{"name": "bindingtest-cache", "mountPath": p})
		}
		setList(c, "env", env)
		setList(c, "volumeMounts", mounts)
	})
	if len(like.mountPaths) > 0 && !slices.ContainsFunc(volumes, func(v any) bool { return v.(map[string]any)["name"] == "bindingtest-cache" }) {
		spec["volumes"] = append(volumes, map[string]any{"name": "bindingtest-cache", "emptyDir": map[string]any{}})
	}
	return obj
}

// edited is what a workload's owner makes of obj: an env var first and
// one last in every container, a volume, a container and an init
// container first and last.
func edited(shape duck.Shape, obj *unstructured.Unstructured) *unstructured.Unstructured {
	obj = obj.DeepCopy()
	spec := podSpecOf(shape, obj)
	if spec == nil {
		return obj
	}
	eachContainerMap(spec, func(c map[string]any) {
		setList(c, "env", slices.Concat([]any{map[string]any{"name": "USER_FIRST", "value": "1"}}, list(c["env"]),
			[]any{map[string]any{"name": "USER_LAST", "value": "2"}}))
	})
	around := func(field string, first, last any) {
		spec[field] = slices.Concat([]any{first}, list(spec[field]), []any{last})
	}
	around("volumes", map[string]any{"name": "bindingtest-user-first", "emptyDir": map[string]any{}},
		map[string]any{"name": "bindingtest-user-last", "emptyDir": map[string]any{}})
	around("containers", container("bindingtest-user-first", "registry.example/user:1", ""),
		container("bindingtest-user-last", "registry.example/user:1", ""))
	around("initContainers", container("bindingtest-user-init-first", "registry.example/user:1", ""),
		container("bindingtest-user-init-last", "registry.example/user:1", ""))
	return obj
}

// podSpecOf returns the pod spec of obj, a subject of shape, as its JSON
// map, or nil.
func podSpecOf(shape duck.Shape, obj *unstructured.Unstructured) map[string]any {
	path := append(slices.Clone(shape.Path()), "spec")
	spec, _, _ := unstructured.NestedFieldNoCopy(obj.Object, path...)
	m, _ := spec.(map[string]any)
	return m
}

func eachContainerMap(spec map[string]any, f func(map[string]any)) {
	for _, field := range []string{"initContainers", "containers"} {
		for _, c := range list(spec[field]) {
			if m, ok := c.(map[string]any); ok {
				f(m)
			}
		}
	}
}

func container(name, image, restartPolicy string) map[string]any {
	c := map[string]any{"name": name, "image": image}
	if restartPolicy != "" {
		c["restartPolicy"] = restartPolicy
	}
	return c
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func setList(m map[string]any, field string, l []any) {
	if len(l) > 0 {
		m[field] = l
	}
}
