package bindingtest

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/tracker"
)

// testBinding is a Binding whose Do and Undo the test chooses.
type testBinding struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	status   duck.Status
	do, undo func(*duck.WithPod)
}

func (b *testBinding) GetSubject() tracker.Reference         { return tracker.Reference{} }
func (b *testBinding) GetBindingStatus() duck.BindableStatus { return &b.status }
func (b *testBinding) DeepCopyObject() runtime.Object        { c := *b; return &c }
func (b *testBinding) Do(_ context.Context, wp *duck.WithPod) {
	if b.do != nil {
		b.do(wp)
	}
}
func (b *testBinding) Undo(_ context.Context, wp *duck.WithPod) {
	if b.undo != nil {
		b.undo(wp)
	}
}

// everyContainer calls f on every container and init container of wp.
func everyContainer(wp *duck.WithPod, f func(*corev1.Container)) {
	spec := &wp.Spec.Template.Spec
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			f(&list[i])
		}
	}
}

func isFoo(e corev1.EnvVar) bool { return e.Name == "FOO" }

// setFoo is a Do that keeps the contract.
func setFoo(wp *duck.WithPod) {
	everyContainer(wp, func(c *corev1.Container) {
		if i := slices.IndexFunc(c.Env, isFoo); i >= 0 {
			c.Env[i].Value = "bar"
		} else {
			c.Env = append(c.Env, corev1.EnvVar{Name: "FOO", Value: "bar"})
		}
	})
}

// removeFoo is its Undo.
func removeFoo(wp *duck.WithPod) {
	everyContainer(wp, func(c *corev1.Container) {
		c.Env = slices.DeleteFunc(c.Env, isFoo)
	})
}

// indexBinding is a Binding whose Undo deletes the volume at the index
// its Do remembered in the Binding: right on the copy Do ran on, wrong on
// the fresh copy the reconciler unbinds with.
type indexBinding struct {
	testBinding
	at int // 1 + the index of Do's volume; 0 before Do
}

func (b *indexBinding) DeepCopyObject() runtime.Object { c := *b; return &c }
func (b *indexBinding) Do(_ context.Context, wp *duck.WithPod) {
	spec := &wp.Spec.Template.Spec
	i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "ca" })
	if i < 0 {
		i = len(spec.Volumes)
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "ca", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	b.at = i + 1
}
func (b *indexBinding) Undo(_ context.Context, wp *duck.WithPod) {
	if spec := &wp.Spec.Template.Spec; b.at > 0 && b.at <= len(spec.Volumes) {
		spec.Volumes = slices.Delete(spec.Volumes, b.at-1, b.at)
	}
}

// noProxyBinding is a Binding whose Do normalizes its own spec before
// using it: it completes its list of hosts with localhost, in the
// Binding, then sets NO_PROXY from it. On the copy each call gets, the
// result is always the same; on a Binding the webhook shares with its
// informer, NO_PROXY grew by one entry at every admission.
type noProxyBinding struct {
	testBinding
	Hosts []string `json:"hosts"`
	// undoClears makes Undo clear Hosts.
	undoClears bool
}

func (b *noProxyBinding) DeepCopyObject() runtime.Object {
	c := *b
	c.Hosts = slices.Clone(b.Hosts)
	return &c
}

func (b *noProxyBinding) Do(_ context.Context, wp *duck.WithPod) {
	if !slices.Contains(b.Hosts, "localhost") {
		b.Hosts = append(b.Hosts, "localhost")
	}
	setEnv(wp, corev1.EnvVar{Name: "NO_PROXY", Value: strings.Join(b.Hosts, ",")})
}

func (b *noProxyBinding) Undo(_ context.Context, wp *duck.WithPod) {
	everyContainer(wp, func(c *corev1.Container) {
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "NO_PROXY" })
	})
	if b.undoClears {
		b.Hosts = nil
	}
}

// setEnv sets e in every container and init container.
func setEnv(wp *duck.WithPod, e corev1.EnvVar) {
	everyContainer(wp, func(c *corev1.Container) {
		if i := slices.IndexFunc(c.Env, func(x corev1.EnvVar) bool { return x.Name == e.Name }); i >= 0 {
			c.Env[i] = e
		} else {
			c.Env = append(c.Env, e)
		}
	})
}

// stampTime is a Do that writes the time, to the second, in an
// annotation of the pod template: it passes every other check almost
// always, and changes the template of every workload at each admitted
// update.
func stampTime(wp *duck.WithPod) {
	meta := &wp.Spec.Template.ObjectMeta
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations["bound-at"] = time.Now().UTC().Format(time.RFC3339)
}

func removeStamp(wp *duck.WithPod) {
	delete(wp.Spec.Template.Annotations, "bound-at")
	if len(wp.Spec.Template.Annotations) == 0 {
		wp.Spec.Template.Annotations = nil
	}
}

// declaredBinding is a declarative kind: Do and Undo from its Spec.
type declaredBinding struct {
	testBinding
	spec declarative.Spec
}

func (b *declaredBinding) DeepCopyObject() runtime.Object           { c := *b; return &c }
func (b *declaredBinding) Declare() declarative.Spec                { return b.spec }
func (b *declaredBinding) Do(_ context.Context, wp *duck.WithPod)   { b.spec.Do(wp) }
func (b *declaredBinding) Undo(_ context.Context, wp *duck.WithPod) { b.spec.Undo(wp) }

// caSpec is a declarative Spec with env, a ConfigMap volume (no
// defaultMode) and its mount.
func caSpec() declarative.Spec {
	return declarative.Spec{
		Env: []corev1.EnvVar{{Name: "CA_PATH", Value: "/etc/ca"}},
		Volumes: []corev1.Volume{{Name: "ca", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}}}}},
		VolumeMounts:      []corev1.VolumeMount{{Name: "ca", MountPath: "/etc/ca", ReadOnly: true}},
		InitContainersToo: true,
	}
}

// fooFromMap is a Do that builds FOO, BAR and BAZ from a Go map.
func fooFromMap(wp *duck.WithPod) {
	vars := map[string]string{"FOO": "1", "BAR": "2", "BAZ": "3"}
	everyContainer(wp, func(c *corev1.Container) {
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { _, ok := vars[e.Name]; return ok })
		for k, v := range vars {
			c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: v})
		}
	})
}

// TestContractProblems: each mistake is reported once, by the call and the
// promise it breaks, naming the field and the fix, in a few lines; a
// Binding that keeps the contract is not reported.
func TestContractProblems(t *testing.T) {
	setCA := func(wp *duck.WithPod) {
		spec := &wp.Spec.Template.Spec
		if !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "ca" }) {
			spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "ca", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		}
		everyContainer(wp, func(c *corev1.Container) {
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/etc/ca" }) {
				c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "ca", MountPath: "/etc/ca"})
			}
		})
	}
	removeCA := func(wp *duck.WithPod) {
		spec := &wp.Spec.Template.Spec
		spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "ca" })
		everyContainer(wp, func(c *corev1.Container) {
			c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/etc/ca" })
		})
	}
	tests := []struct {
		name     string
		do, undo func(*duck.WithPod)
		binding  psbinding.Bindable // instead of do and undo
		reach    Reach
		want     []string // substrings of the one failure; none for a Binding that keeps the contract
		// orWant, when set, is what the failure says instead when the
		// determinism check catches it first: a clock read to the second
		// changes between two calls that straddle a second, more often on
		// a loaded machine; either catch is the right one.
		orWant []string
	}{{
		name: "a Binding that keeps the contract",
		do:   setFoo, undo: removeFoo, reach: EveryContainerAndInitContainer,
	}, {
		name: "a Binding with a volume and mounts that keeps the contract",
		do:   setCA, undo: removeCA, reach: EveryContainerAndInitContainer,
	}, {
		name: "a Binding that adds an annotation and leaves an empty map behind",
		do: func(wp *duck.WithPod) {
			if wp.Spec.Template.Annotations == nil {
				wp.Spec.Template.Annotations = map[string]string{}
			}
			wp.Spec.Template.Annotations["bound"] = "yes"
		},
		undo: func(wp *duck.WithPod) { delete(wp.Spec.Template.Annotations, "bound") },
	}, {
		name:    "a declarative kind with a ConfigMap volume",
		binding: &declaredBinding{testBinding: testBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "b"}}, spec: caSpec()},
	}, {
		name: "a declarative kind that mounts a volume its Spec lacks",
		binding: &declaredBinding{testBinding: testBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "b"}}, spec: func() declarative.Spec {
			s := caSpec()
			s.VolumeMounts[0].Name = "ca-certs"
			return s
		}()},
		want: []string{"Do breaks its promise to mount only volumes the pod has", "fix: name in the Spec's VolumeMounts a volume of its Volumes"},
	}, {
		name: "Do appends every time",
		do: func(wp *duck.WithPod) {
			everyContainer(wp, func(c *corev1.Container) { c.Env = append(c.Env, corev1.EnvVar{Name: "FOO", Value: "bar"}) })
		},
		undo: removeFoo,
		want: []string{"Do breaks its promise to be idempotent", "add template/spec/initContainers/0/env"},
	}, {
		name: "Undo forgets what Do did",
		do:   setFoo,
		want: []string{"Undo breaks its promise to restore", "leaves template.spec.containers[bindingtest-app].env[FOO], which Do added"},
	}, {
		name: "Undo removes what the workload had itself",
		do:   setFoo,
		undo: func(wp *duck.WithPod) {
			removeFoo(wp)
			everyContainer(wp, func(c *corev1.Container) { c.VolumeMounts = nil })
		},
		want: []string{"Undo breaks its promise to leave a subject Do never bound as it is", "removes template.spec.containers[bindingtest-app].volumeMounts[/cache]"},
	}, {
		name: "Do sorts the workload's containers",
		do: func(wp *duck.WithPod) {
			setFoo(wp)
			slices.SortFunc(wp.Spec.Template.Spec.Containers, func(a, b corev1.Container) int { return strings.Compare(b.Name, a.Name) })
		},
		undo: removeFoo,
		want: []string{"Do breaks its promise to keep what the subject has", "reorders template.spec.containers"},
	}, {
		name: "Do adds a container without a name (a zero spec)",
		do: func(wp *duck.WithPod) {
			if !slices.ContainsFunc(wp.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "" }) {
				wp.Spec.Template.Spec.Containers = append(wp.Spec.Template.Spec.Containers, corev1.Container{})
			}
		},
		undo: func(wp *duck.WithPod) {
			wp.Spec.Template.Spec.Containers = slices.DeleteFunc(wp.Spec.Template.Spec.Containers, func(c corev1.Container) bool { return c.Name == "" })
		},
		want: []string{"Do adds a container with an empty name: is the Binding's spec filled in?"},
	}, {
		name: "Do adds a volume named like the kit's",
		do: func(wp *duck.WithPod) {
			if !slices.ContainsFunc(wp.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == KitNamePrefix+"mine" }) {
				wp.Spec.Template.Spec.Volumes = append(wp.Spec.Template.Spec.Volumes, corev1.Volume{Name: KitNamePrefix + "mine"})
			}
		},
		undo: func(wp *duck.WithPod) {
			wp.Spec.Template.Spec.Volumes = slices.DeleteFunc(wp.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == KitNamePrefix+"mine" })
		},
		want: []string{"are the kit's subjects' own"},
	}, {
		name: "Do replaces each container's env wholesale",
		do: func(wp *duck.WithPod) {
			everyContainer(wp, func(c *corev1.Container) { c.Env = []corev1.EnvVar{{Name: "FOO", Value: "bar"}} })
		},
		undo: removeFoo,
		want: []string{"Do breaks its promise to keep what the subject has", "removes template.spec.containers[bindingtest-app].env[LOG_LEVEL]", "fix: change only the entries Do adds"},
	}, {
		name: "Do rebuilds each container from its name, image and env",
		do: func(wp *duck.WithPod) {
			cs := wp.Spec.Template.Spec.Containers
			for i, c := range cs {
				env := slices.DeleteFunc(slices.Clone(c.Env), isFoo)
				cs[i] = corev1.Container{Name: c.Name, Image: c.Image, Env: append(env, corev1.EnvVar{Name: "FOO", Value: "bar"})}
			}
		},
		undo: removeFoo,
		want: []string{"Do breaks its promise to keep what the subject has", "removes template.spec.containers[bindingtest-app].ports"},
	}, {
		name:    "Undo deletes the volume at the index Do remembered",
		binding: &indexBinding{testBinding: testBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "b"}}},
		want:    []string{"Do breaks its promise to leave its Binding alone", "\n  at: 0 before, ", "fix: compute what Do needs in local variables", "other checks are skipped until Do leaves its Binding alone"},
	}, {
		name:    "Do completes its Binding's list of hosts (a normalizing Do)",
		binding: &noProxyBinding{testBinding: testBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "b"}}, Hosts: []string{"10.0.0.0/8"}},
		want:    []string{"Do breaks its promise to leave its Binding alone", `hosts: ["10.0.0.0/8"] before, ["10.0.0.0/8" "localhost"] after`, "bindkit gives each call a copy of its own, so the change is lost"},
	}, {
		name:    "Undo clears its Binding's list of hosts",
		binding: &noProxyBinding{testBinding: testBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "b"}}, Hosts: []string{"10.0.0.0/8", "localhost"}, undoClears: true},
		want:    []string{"Undo breaks its promise to leave its Binding alone", `hosts: ["10.0.0.0/8" "localhost"] before, nil after`},
	}, {
		name:  "Do stamps the time, to the second",
		do:    stampTime,
		undo:  removeStamp,
		reach: EveryContainerAndInitContainer,
		want: []string{"Do breaks its promise to be a function of the Binding and the subject", "run again 1.1s later", "template/metadata/annotations/bound-at",
			"its template changes at every admitted update of a workload, which rolls its pods", "never time.Now() in Do"},
		orWant: []string{"Do breaks its promise to be deterministic", "template/metadata/annotations/bound-at",
			"its template changes at every admitted update of a workload, which rolls its pods", "no clock"},
	}, {
		name: "Do draws a random number",
		do: func(wp *duck.WithPod) {
			setEnv(wp, corev1.EnvVar{Name: "SEED", Value: strconv.FormatUint(rand.Uint64(), 10)})
		},
		undo: func(wp *duck.WithPod) {
			everyContainer(wp, func(c *corev1.Container) {
				c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "SEED" })
			})
		},
		want: []string{"Do breaks its promise to be deterministic", "its template changes at every admitted update of a workload, which rolls its pods"},
	}, {
		name: "Do builds env from a Go map",
		do:   fooFromMap,
		undo: func(wp *duck.WithPod) {
			everyContainer(wp, func(c *corev1.Container) {
				c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "FOO" || e.Name == "BAR" || e.Name == "BAZ" })
			})
		},
		want: []string{"Do breaks its promise to be deterministic", "it orders entries differently", "].env: ", "slices.Sorted(maps.Keys(m))"},
	}, {
		name: "Undo removes every env var that begins like the Binding's",
		do:   setFoo,
		undo: func(wp *duck.WithPod) {
			everyContainer(wp, func(c *corev1.Container) {
				c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return strings.HasPrefix(e.Name, "FOO") })
			})
		},
		want: []string{"Undo breaks its promise to leave a subject Do never bound as it is", "user entries named like the Binding's own", "env[FOO_USER]"},
	}, {
		name: "Do sets env in the first container only",
		do: func(wp *duck.WithPod) {
			c := &wp.Spec.Template.Spec.Containers[0]
			if !slices.ContainsFunc(c.Env, isFoo) {
				c.Env = append(c.Env, corev1.EnvVar{Name: "FOO", Value: "bar"})
			}
		},
		undo:  removeFoo,
		reach: EveryContainerAndInitContainer,
		want:  []string{"Do breaks its promise to reach every container and init container", "container bindingtest-sidecar lacks env FOO", "init container bindingtest-setup lacks env FOO"},
	}, {
		name: "Do writes into a nil map",
		do: func(wp *duck.WithPod) {
			wp.Spec.Template.Annotations["bound"] = "yes"
		},
		undo: func(wp *duck.WithPod) { delete(wp.Spec.Template.Annotations, "bound") },
		want: []string{"Do breaks its promise not to panic on a bare pod template", "assignment to entry in nil map"},
	}, {
		name: "Do mounts a volume under another name than it adds",
		do: func(wp *duck.WithPod) {
			setCA(wp)
			everyContainer(wp, func(c *corev1.Container) {
				for i := range c.VolumeMounts {
					if c.VolumeMounts[i].MountPath == "/etc/ca" {
						c.VolumeMounts[i].Name = "ca-certs"
					}
				}
			})
		},
		undo: removeCA,
		want: []string{"Do breaks its promise to mount only volumes the pod has", `mounts volume "ca-certs" at /etc/ca`, "(Do adds: ca)"},
	}, {
		name: "Undo forgets the init containers",
		do:   setFoo,
		undo: func(wp *duck.WithPod) {
			for i := range wp.Spec.Template.Spec.Containers {
				c := &wp.Spec.Template.Spec.Containers[i]
				c.Env = slices.DeleteFunc(c.Env, isFoo)
			}
		},
		want: []string{"Undo breaks its promise to restore", "leaves template.spec.initContainers[bindingtest-setup].env[FOO]"},
	}, {
		name: "Do changes nothing",
		want: []string{"changed none of the subjects"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel() // each that Do changes waits clockGap
			b := tc.binding
			if b == nil {
				b = &testBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "b"}, do: tc.do, undo: tc.undo}
			}
			got := contractFailures(t, b, ContractOptions{Reach: tc.reach})
			if len(tc.want) == 0 {
				if len(got) > 0 {
					t.Fatalf("failures of a Binding that keeps the contract:\n%s", strings.Join(got, "\n----\n"))
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("%d failures, want 1:\n%s", len(got), strings.Join(got, "\n----\n"))
			}
			want := tc.want
			if tc.orWant != nil && strings.Contains(got[0], tc.orWant[0]) {
				want = tc.orWant
			}
			for _, w := range want {
				if !strings.Contains(got[0], w) {
					t.Errorf("the failure does not say %q:\n%s", w, got[0])
				}
			}
			if n := strings.Count(got[0], "\n") + 1; n > 20 {
				t.Errorf("the failure has %d lines, want at most 20:\n%s", n, got[0])
			}
			t.Logf("the failure:\n%s", got[0])
		})
	}
}

// TestSubjectsCoverEveryShape: one subject of each kind bindkit binds, each
// carrying UnknownField in the places a patch could lose it, and each
// decoding through its shape.
func TestSubjectsCoverEveryShape(t *testing.T) {
	var kinds []string
	for _, s := range Subjects("shop") {
		kinds = append(kinds, s.Object.GetKind())
		if s.Object.GetNamespace() != "shop" {
			t.Errorf("%s in namespace %q", s.Name, s.Object.GetNamespace())
		}
		wp, err := s.Shape.FromUnstructured(s.Object)
		if err != nil {
			t.Errorf("%s: %v", s.Name, err)
			continue
		}
		if n := len(wp.Spec.Template.Spec.Containers); n != 2 {
			t.Errorf("%s: %d containers, want 2", s.Name, n)
		}
		ms := markers(s.Object.Object, nil, "")
		if len(ms) < 7 {
			t.Errorf("%s: %d unknown fields, want them beside and in the template, containers and volumes: %v", s.Name, len(ms), ms)
		}
	}
	want := []string{"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob", "Pod", CustomWorkloadKind.Kind}
	if !slices.Equal(kinds, want) {
		t.Errorf("kinds = %v, want %v", kinds, want)
	}
}

// TestOneBugOneFailure: a bug that breaks a promise the same way on every
// subject is one failure naming them all, whatever the shape's path.
func TestOneBugOneFailure(t *testing.T) {
	b := &testBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "b"}, do: setFoo}
	got := contractFailures(t, b, ContractOptions{})
	if len(got) != 1 {
		t.Fatalf("%d failures, want 1:\n%s", len(got), strings.Join(got, "\n----\n"))
	}
	for _, s := range Subjects("shop") {
		if kind := s.Object.GetKind(); !strings.Contains(got[0], kind) {
			t.Errorf("the failure does not name %s:\n%s", kind, got[0])
		}
	}
	if strings.Contains(got[0], "/spec/template/") || strings.Contains(got[0], "jobTemplate") {
		t.Errorf("the failure's paths are not relative to the pod template:\n%s", got[0])
	}
}
