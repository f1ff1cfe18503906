package tracker

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

func TestGetObservers(t *testing.T) {
	tr := New(nil, time.Hour)
	byNameObs := observer(envBindingGK, "default", "by-name")
	betaObs := observer(envBindingGK, "default", "by-beta-version")
	labelObs := observer(envBindingGK, "default", "match-labels")
	inObs := observer(envBindingGK, "default", "in-one")
	inManyObs := observer(envBindingGK, "default", "in-many")
	notInObs := observer(envBindingGK, "default", "not-in")
	existsObs := observer(envBindingGK, "default", "exists")
	allObs := observer(envBindingGK, "default", "everything")
	bothObs := observer(sinkBindGK, "default", "both")
	otherNS := observer(envBindingGK, "other", "other-ns")

	mustTrack(t, tr, byName("apps/v1", "Deployment", "default", "web"), byNameObs)
	mustTrack(t, tr, byName("apps/v1beta1", "Deployment", "default", "web"), betaObs)
	mustTrack(t, tr, bySelector("apps/v1", "Deployment", "default", matchLabels("app", "web", "tier", "front")), labelObs)
	mustTrack(t, tr, bySelector("apps/v1", "Deployment", "default", &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{expr("app", metav1.LabelSelectorOpIn, "api")},
	}), inObs)
	mustTrack(t, tr, bySelector("apps/v1", "Deployment", "default", &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{expr("app", metav1.LabelSelectorOpIn, "api", "db")},
	}), inManyObs)
	mustTrack(t, tr, bySelector("apps/v1", "Deployment", "default", &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{expr("app", metav1.LabelSelectorOpNotIn, "web", "api", "db")},
	}), notInObs)
	mustTrack(t, tr, bySelector("apps/v1", "Deployment", "default", &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{expr("canary", metav1.LabelSelectorOpExists)},
	}), existsObs)
	mustTrack(t, tr, bySelector("v1", "Pod", "default", &metav1.LabelSelector{}), allObs)
	// bothObs tracks the same object by name and by selector: reported once.
	mustTrack(t, tr, byName("apps/v1", "Deployment", "default", "db"), bothObs)
	mustTrack(t, tr, bySelector("apps/v1", "Deployment", "default", matchLabels("app", "db")), bothObs)
	mustTrack(t, tr, byName("apps/v1", "Deployment", "other", "web"), otherNS)

	tests := []struct {
		name string
		gk   schema.GroupKind
		obj  any
		want []Observer
	}{{
		name: "exact name, any version",
		gk:   deploymentGK,
		obj:  deployment("default", "web", nil),
		want: []Observer{betaObs, byNameObs, notInObs},
	}, {
		name: "name and all matchLabels",
		gk:   deploymentGK,
		obj:  deployment("default", "web", map[string]string{"app": "web", "tier": "front"}),
		want: []Observer{betaObs, byNameObs, labelObs},
	}, {
		name: "one of two matchLabels is not enough",
		gk:   deploymentGK,
		obj:  deployment("default", "x", map[string]string{"app": "web"}),
		want: nil,
	}, {
		name: "In with one value, In with two, NotIn excluded",
		gk:   deploymentGK,
		obj:  deployment("default", "x", map[string]string{"app": "api"}),
		want: []Observer{inManyObs, inObs},
	}, {
		name: "NotIn and Exists from the fallback",
		gk:   deploymentGK,
		obj:  deployment("default", "x", map[string]string{"canary": "", "app": "cache"}),
		want: []Observer{existsObs, notInObs},
	}, {
		name: "same observer by name and selector, once",
		gk:   deploymentGK,
		obj:  deployment("default", "db", map[string]string{"app": "db"}),
		want: []Observer{inManyObs, bothObs},
	}, {
		name: "empty selector matches every object of its kind only",
		gk:   podGK,
		obj:  unstructuredObj("v1", "Pod", "default", "anything", nil),
		want: []Observer{allObs},
	}, {
		name: "kind read from the object",
		obj:  unstructuredObj("apps/v1", "Deployment", "other", "web", nil),
		want: []Observer{otherNS},
	}, {
		name: "other namespace does not see default's selectors",
		gk:   deploymentGK,
		obj:  deployment("other", "x", map[string]string{"app": "web", "tier": "front", "canary": "yes"}),
		want: nil,
	}, {
		name: "other kind, same name",
		obj:  unstructuredObj("batch/v1", "Deployment", "default", "web", nil),
		want: nil,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tr.GetObserversKind(tc.gk, tc.obj)
			if err != nil {
				t.Fatalf("GetObserversKind: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("GetObserversKind (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOnChangedCallsCallbackOncePerObserver(t *testing.T) {
	var got []Observer
	tr := New(func(o Observer) { got = append(got, o) }, time.Hour)
	a := observer(envBindingGK, "default", "a")
	b := observer(envBindingGK, "default", "b")
	mustTrack(t, tr, byName("apps/v1", "Deployment", "default", "web"), a)
	mustTrack(t, tr, bySelector("apps/v1", "Deployment", "default", matchLabels("app", "web")), a)
	mustTrack(t, tr, bySelector("apps/v1", "Deployment", "default", matchLabels("app", "web")), b)

	if err := tr.OnChangedKind(deploymentGK, deployment("default", "web", map[string]string{"app": "web"})); err != nil {
		t.Fatalf("OnChangedKind: %v", err)
	}
	if err := tr.OnChanged(unstructuredObj("apps/v1", "Deployment", "default", "web", nil)); err != nil {
		t.Fatalf("OnChanged: %v", err)
	}
	want := []Observer{a, b, a}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("callback calls (-want +got):\n%s", diff)
	}
}

func TestKindSeparation(t *testing.T) {
	tr := New(nil, time.Hour)
	env := observer(envBindingGK, "default", "same")
	sink := observer(sinkBindGK, "default", "same")
	mustTrack(t, tr, byName("apps/v1", "Deployment", "default", "web"), env)
	mustTrack(t, tr, byName("v1", "Pod", "default", "web"), sink)

	lookup := func() [][]Observer {
		d, err := tr.GetObserversKind(deploymentGK, deployment("default", "web", nil))
		if err != nil {
			t.Fatal(err)
		}
		p, err := tr.GetObserversKind(podGK, deployment("default", "web", nil))
		if err != nil {
			t.Fatal(err)
		}
		return [][]Observer{d, p}
	}
	if diff := cmp.Diff([][]Observer{{env}, {sink}}, lookup()); diff != "" {
		t.Errorf("before delete (-want +got):\n%s", diff)
	}
	tr.OnDeletedObserver(env)
	if diff := cmp.Diff([][]Observer{nil, {sink}}, lookup()); diff != "" {
		t.Errorf("after deleting the EnvBinding only (-want +got):\n%s", diff)
	}
}

func TestLeaseExpiry(t *testing.T) {
	const lease = 10 * time.Minute
	clock := newFakeClock()
	tr, err := NewWithOptions(Options{Lease: lease, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	o := observer(envBindingGK, "default", "b")
	web := deployment("default", "web", map[string]string{"app": "web"})
	mustTrack(t, tr, byName("apps/v1", "Deployment", "default", "web"), o)
	mustTrack(t, tr, bySelector("apps/v1", "Deployment", "default", matchLabels("app", "web")), o)

	type step struct {
		advance time.Duration
		renew   bool
		want    []Observer
	}
	steps := []step{
		{advance: lease - time.Nanosecond, want: []Observer{o}},
		{advance: time.Nanosecond, want: nil}, // exactly lease after tracking
		{renew: true, want: []Observer{o}},
		{advance: lease / 2, renew: true, want: []Observer{o}},
		{advance: lease - time.Nanosecond, want: []Observer{o}}, // renewal counted from itself
		{advance: time.Nanosecond, want: nil},
	}
	for i, s := range steps {
		clock.Step(s.advance)
		if s.renew {
			mustTrack(t, tr, byName("apps/v1", "Deployment", "default", "web"), o)
			mustTrack(t, tr, bySelector("apps/v1", "Deployment", "default", matchLabels("app", "web")), o)
		}
		got, err := tr.GetObserversKind(deploymentGK, web)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("step %d (%+v) (-want +got):\n%s", i, s, diff)
		}
	}
	// The lookup that met the expired registrations removed them.
	if diff := cmp.Diff(registrations{}, countRegistrations(tr)); diff != "" {
		t.Errorf("after lazy cleanup (-want +got):\n%s", diff)
	}
}

func TestSweep(t *testing.T) {
	const lease = time.Minute
	clock := newFakeClock()
	tr, err := NewWithOptions(Options{Lease: lease, Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	old := observer(envBindingGK, "default", "old")
	fresh := observer(envBindingGK, "default", "fresh")
	mustTrack(t, tr, byName("apps/v1", "Deployment", "default", "a"), old)
	mustTrack(t, tr, bySelector("v1", "Pod", "default", matchLabels("app", "a")), old)
	mustTrack(t, tr, bySelector("v1", "Pod", "default", &metav1.LabelSelector{}), old)
	clock.Step(lease / 2)
	mustTrack(t, tr, byName("apps/v1", "Deployment", "default", "a"), fresh)
	clock.Step(lease / 2)

	type result struct {
		Removed int
		Counts  registrations
	}
	got := []result{{Removed: tr.Sweep(), Counts: countRegistrations(tr)}}
	clock.Step(lease / 2)
	got = append(got, result{Removed: tr.Sweep(), Counts: countRegistrations(tr)})
	want := []result{
		{Removed: 3, Counts: registrations{Exact: 1, Observers: 1}},
		{Removed: 1, Counts: registrations{}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Sweep (-want +got):\n%s", diff)
	}
}

func TestOnDeletedObserverAndUntrack(t *testing.T) {
	tr := New(nil, time.Hour)
	gone := observer(envBindingGK, "default", "gone")
	stays := observer(envBindingGK, "default", "stays")
	refs := []Reference{
		byName("apps/v1", "Deployment", "default", "web"),
		bySelector("apps/v1", "Deployment", "default", matchLabels("app", "web")),
		bySelector("apps/v1", "Deployment", "default", &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{expr("app", metav1.LabelSelectorOpExists)},
		}),
	}
	for _, r := range refs {
		mustTrack(t, tr, r, gone)
	}
	mustTrack(t, tr, refs[1], stays)
	web := deployment("default", "web", map[string]string{"app": "web"})

	lookup := func() []Observer {
		got, err := tr.GetObserversKind(deploymentGK, web)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	type result struct {
		Observers []Observer
		Counts    registrations
	}
	var got []result
	record := func() { got = append(got, result{lookup(), countRegistrations(tr)}) }

	record()
	if err := tr.UntrackReference(refs[1], stays); err != nil {
		t.Fatal(err)
	}
	record()
	if err := tr.UntrackReference(refs[1], stays); err != nil { // already gone: no error
		t.Fatal(err)
	}
	tr.OnDeletedObserver(gone)
	record()
	tr.OnDeletedObserver(gone) // idempotent
	record()

	want := []result{
		{[]Observer{gone, stays}, registrations{Exact: 1, SelectorScopes: 1, Observers: 2}},
		{[]Observer{gone}, registrations{Exact: 1, SelectorScopes: 1, Observers: 1}},
		{nil, registrations{}},
		{nil, registrations{}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestTrackReferenceErrors(t *testing.T) {
	tr := New(nil, time.Hour)
	good := observer(envBindingGK, "default", "b")
	tests := []struct {
		name     string
		ref      Reference
		observer Observer
		want     string
	}{{
		name:     "invalid reference names observer and reference",
		ref:      Reference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default"},
		observer: good,
		want:     "tracker: observer EnvBinding.bindkit.dev default/b: reference apps/v1 Deployment default/: one of name and selector is required",
	}, {
		name:     "observer without kind",
		ref:      byName("apps/v1", "Deployment", "default", "web"),
		observer: Observer{NamespacedName: good.NamespacedName},
		want:     "tracker: observer  default/b: observer kind is required",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, err := range []error{tr.TrackReference(tc.ref, tc.observer), tr.UntrackReference(tc.ref, tc.observer)} {
				if err == nil {
					got = append(got, "<nil>")
				} else {
					got = append(got, err.Error())
				}
			}
			if diff := cmp.Diff([]string{tc.want, tc.want}, got); diff != "" {
				t.Errorf("Track/UntrackReference errors (-want +got):\n%s", diff)
			}
		})
	}
	if diff := cmp.Diff(registrations{}, countRegistrations(tr)); diff != "" {
		t.Errorf("invalid calls registered something (-want +got):\n%s", diff)
	}
}

func TestObjectForms(t *testing.T) {
	tr := New(nil, time.Hour)
	o := observer(envBindingGK, "default", "b")
	mustTrack(t, tr, byName("apps/v1", "Deployment", "default", "web"), o)
	typed := deployment("default", "web", nil)
	withTypeMeta := deployment("default", "web", nil)
	withTypeMeta.APIVersion, withTypeMeta.Kind = "apps/v1", "Deployment"
	partial := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
	}
	var nilDeployment = deployment("", "", nil)
	nilDeployment = nil

	tests := []struct {
		name    string
		gk      schema.GroupKind
		obj     any
		want    []Observer
		wantErr error  // checked with errors.Is when set
		wantMsg string // a fragment of the error when set
	}{
		{name: "typed, explicit kind", gk: deploymentGK, obj: typed, want: []Observer{o}},
		{name: "typed with TypeMeta", obj: withTypeMeta, want: []Observer{o}},
		{name: "typed with TypeMeta, agreeing kind", gk: deploymentGK, obj: withTypeMeta, want: []Observer{o}},
		{name: "PartialObjectMetadata", obj: partial, want: []Observer{o}},
		{name: "client-go tombstone", gk: deploymentGK, obj: cache.DeletedFinalStateUnknown{Key: "default/web", Obj: typed}, want: []Observer{o}},
		{name: "pointer to tombstone", gk: deploymentGK, obj: &cache.DeletedFinalStateUnknown{Key: "default/web", Obj: typed}, want: []Observer{o}},
		{name: "tombstone of unstructured", obj: cache.DeletedFinalStateUnknown{Obj: unstructuredObj("apps/v1", "Deployment", "default", "web", nil)}, want: []Observer{o}},
		{name: "typed without kind", obj: typed, wantErr: ErrNoKind, wantMsg: "*v1.Deployment default/web: object carries no kind"},
		{name: "tombstone of typed without kind", obj: cache.DeletedFinalStateUnknown{Obj: typed}, wantErr: ErrNoKind},
		{name: "explicit kind contradicts object", gk: podGK, obj: withTypeMeta, wantMsg: "tracker: Pod default/web: object says it is a Deployment.apps"},
		{name: "group without kind", gk: schema.GroupKind{Group: "apps"}, obj: typed, wantMsg: "has a group but no kind"},
		{name: "string", gk: deploymentGK, obj: "default/web", wantErr: ErrNotObject},
		{name: "nil", gk: deploymentGK, obj: nil, wantErr: ErrNotObject},
		{name: "typed nil pointer", gk: deploymentGK, obj: nilDeployment, wantErr: ErrNotObject},
		{name: "empty tombstone", gk: deploymentGK, obj: cache.DeletedFinalStateUnknown{Key: "default/web"}, wantErr: ErrNotObject},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tr.GetObserversKind(tc.gk, tc.obj)
			// OnChangedKind must fail exactly when GetObserversKind does.
			onChangedErr := tr.OnChangedKind(tc.gk, tc.obj)
			if (err == nil) != (onChangedErr == nil) {
				t.Errorf("GetObserversKind err = %v but OnChangedKind err = %v", err, onChangedErr)
			}
			if tc.wantErr == nil && tc.wantMsg == "" {
				if err != nil {
					t.Fatalf("GetObserversKind: %v", err)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("GetObserversKind (-want +got):\n%s", diff)
				}
				return
			}
			if err == nil {
				t.Fatalf("GetObserversKind = %v, nil; want an error", got)
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("error %q is not %v", err, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q lacks %q", err, tc.wantMsg)
			}
		})
	}
}

func TestObserverFor(t *testing.T) {
	typed := deployment("default", "gh", nil)
	tests := []struct {
		name    string
		gk      schema.GroupKind
		obj     any
		want    Observer
		wantErr bool
	}{
		{name: "explicit kind", gk: envBindingGK, obj: typed, want: observer(envBindingGK, "default", "gh")},
		{name: "own kind", obj: unstructuredObj("bindkit.dev/v1alpha1", "EnvBinding", "default", "gh", nil), want: observer(envBindingGK, "default", "gh")},
		{name: "tombstone", gk: envBindingGK, obj: cache.DeletedFinalStateUnknown{Obj: typed}, want: observer(envBindingGK, "default", "gh")},
		{name: "no kind", obj: typed, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ObserverFor(tc.gk, tc.obj)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ObserverFor error = %v, want error %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ObserverFor (-want +got):\n%s", diff)
			}
		})
	}
	if got, want := observer(envBindingGK, "default", "gh").String(), "EnvBinding.bindkit.dev default/gh"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestCallbackMayCallBackIntoTracker(t *testing.T) {
	var tr Interface
	var seen [][]Observer
	tr = New(func(o Observer) {
		// Each of these needs the tracker's lock; holding it during the
		// callback would deadlock here.
		if err := tr.TrackReference(byName("v1", "Pod", "default", "p"), o); err != nil {
			t.Error(err)
		}
		got, err := tr.GetObserversKind(podGK, deployment("default", "p", nil))
		if err != nil {
			t.Error(err)
		}
		seen = append(seen, got)
		tr.OnDeletedObserver(o)
	}, time.Hour)
	o := observer(envBindingGK, "default", "b")
	mustTrack(t, tr, byName("apps/v1", "Deployment", "default", "web"), o)
	if err := tr.OnChangedKind(deploymentGK, deployment("default", "web", nil)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([][]Observer{{o}}, seen); diff != "" {
		t.Errorf("lookups from the callback (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(registrations{}, countRegistrations(tr)); diff != "" {
		t.Errorf("after OnDeletedObserver from the callback (-want +got):\n%s", diff)
	}
}

func TestNewRejectsNonPositiveLease(t *testing.T) {
	for _, lease := range []time.Duration{0, -time.Second} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(nil, %v) did not panic", lease)
				}
			}()
			New(nil, lease)
		}()
		if _, err := NewWithOptions(Options{Lease: lease}); err == nil {
			t.Errorf("NewWithOptions(Lease: %v) returned no error", lease)
		}
	}
}
