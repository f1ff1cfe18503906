package tracker

import (
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var (
	deploymentGK = schema.GroupKind{Group: "apps", Kind: "Deployment"}
	podGK        = schema.GroupKind{Kind: "Pod"}
	envBindingGK = schema.GroupKind{Group: "bindkit.dev", Kind: "EnvBinding"}
	sinkBindGK   = schema.GroupKind{Group: "bindkit.dev", Kind: "SinkBinding"}
)

// fakeClock is a settable clock for lease tests.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func observer(gk schema.GroupKind, ns, name string) Observer {
	return Observer{GroupKind: gk, NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

// deployment is a typed object as informers deliver it: TypeMeta empty.
func deployment(ns, name string, lbls map[string]string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls}}
}

// unstructuredObj carries its own apiVersion and kind.
func unstructuredObj(apiVersion, kind, ns, name string, lbls map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(lbls)
	return u
}

func byName(apiVersion, kind, ns, name string) Reference {
	return Reference{APIVersion: apiVersion, Kind: kind, Namespace: ns, Name: name}
}

func bySelector(apiVersion, kind, ns string, sel *metav1.LabelSelector) Reference {
	return Reference{APIVersion: apiVersion, Kind: kind, Namespace: ns, Selector: sel}
}

func matchLabels(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func expr(key string, op metav1.LabelSelectorOperator, values ...string) metav1.LabelSelectorRequirement {
	return metav1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
}

func mustTrack(t testing.TB, tr Interface, ref Reference, o Observer) {
	t.Helper()
	if err := tr.TrackReference(ref, o); err != nil {
		t.Fatalf("TrackReference(%s, %s): %v", ref, o, err)
	}
}

// internals exposes the unexported state of a tracker built by New.
func internals(tr Interface) *tracker { return tr.(*tracker) }

// registrations counts what the tracker holds in each of its maps, to prove
// removal reclaims memory.
type registrations struct {
	Exact, SelectorScopes, Observers int
}

func countRegistrations(tr Interface) registrations {
	in := internals(tr)
	in.mu.RLock()
	defer in.mu.RUnlock()
	return registrations{Exact: len(in.exact), SelectorScopes: len(in.selectors), Observers: len(in.byObserver)}
}
