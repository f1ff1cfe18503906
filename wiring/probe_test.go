package wiring

import (
	stdcmp "cmp"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	sinkv1alpha1 "github.com/bindkit/bindkit/examples/sinkbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/injection/injectiontest"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/tracker"
)

// publishedSink is a SinkBinding in ns that has published its Spec,
// binding Deployments labelled app=web.
func publishedSink(ns string) *sinkv1alpha1.SinkBinding {
	b := &sinkv1alpha1.SinkBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: sinkv1alpha1.SchemeGroupVersion.String(), Kind: sinkv1alpha1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sink", UID: "uid-sink", Generation: 1},
		Spec: sinkv1alpha1.SinkBindingSpec{Subject: tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment",
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}, Sink: "https://sink.example.com"},
	}
	b.Status.Publish(1, b.Declare())
	return b
}

// refuse makes the fake dynamic client answer verb on resource with err.
func refuse(f *injectiontest.Fakes, verb, resource string, err error) {
	f.Dynamic.PrependReactor(verb, resource, func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, err })
}

// TestProbeReadsNamespacesFromTheCacheAndReportsRefusals: the probe
// reads a Binding's namespace from the namespaces' cache (list and watch,
// which every bindkit process is granted), never with a get; a probe the
// kube-apiserver refuses is a refusal whatever else was probed, which is
// logged as an error, recorded as a Warning event on the Binding and
// reported by Check until a round is not refused; a create refused in a
// namespace being deleted, or a namespace excluded, is not; a namespace
// the cache has not seen yet holds the round, with an error.
func TestProbeReadsNamespacesFromTheCacheAndReportsRefusals(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "",
		errors.New(`User "bindkit" cannot create resource "deployments" in API group "apps"`))
	terminating := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "",
		errors.New("namespace app is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
	for _, tc := range []struct {
		name      string
		nsLabels  map[string]string
		nsName    string // of the namespace in the cache; default the Binding's
		fault     func(*injectiontest.Fakes)
		probed    int
		refusal   bool   // the round is a refusal
		wantErr   string // in the round's error
		wantEvent bool
	}{
		{name: "probed, namespace from the cache", probed: 1},
		{name: "namespace excluded", nsLabels: map[string]string{psbinding.ExcludeLabel: "true"}},
		{name: "namespace not in the cache yet", nsName: "other", wantErr: "not in the namespaces' cache yet"},
		{name: "dry run refused", fault: func(f *injectiontest.Fakes) { refuse(f, "create", "deployments", forbidden) },
			refusal: true, wantErr: `cannot create resource "deployments"`, wantEvent: true},
		{name: "namespace being deleted", fault: func(f *injectiontest.Fakes) { refuse(f, "create", "deployments", terminating) },
			wantErr: "being terminated"},
		{name: "namespaces' cache cannot sync", fault: func(f *injectiontest.Fakes) {
			refuse(f, "list", "namespaces", apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "", errors.New("RBAC")))
		}, refusal: true, wantErr: "namespaces' cache has not synced", wantEvent: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := publishedSink("app")
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: stdcmp.Or(tc.nsName, "app"), Labels: tc.nsLabels}}
			core, logs := observer.New(zap.InfoLevel)
			ctx, fakes := injectiontest.NewContextWithOptions(t, injectiontest.Options{Logger: zap.New(core)}, ns)
			fakes.Kube.PrependReactor("get", "namespaces", func(clienttesting.Action) (bool, runtime.Object, error) {
				t.Error("the probe got a namespace: the documented RBAC grants list and watch only")
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, "app", errors.New("RBAC"))
			})
			if tc.fault != nil {
				tc.fault(fakes)
			}
			kind := &Kind{GVR: sinkv1alpha1.GroupVersionResource()}
			p := kind.prober(ctx, func() ([]psbinding.Bindable, error) { return []psbinding.Bindable{b}, nil }, "sink-probe", "the webhook stays in the path")
			p.namespaceWait = time.Second
			events := record.NewFakeRecorder(10)
			p.faults.recorder = events

			_, probed, err := p.probeEach(ctx, func(psbinding.Bindable) bool { return true })
			p.faults.report(err)
			if probed != tc.probed || isRefusal(err) != tc.refusal || (tc.wantErr == "") != (err == nil) ||
				(err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("probeEach = %d probed, err %v (refusal %t); want %d probed, refusal %t, an error with %q",
					probed, err, isRefusal(err), tc.probed, tc.refusal, tc.wantErr)
			}
			check := p.faults.Check()
			if tc.refusal != (check != nil) || (check != nil && !strings.Contains(check.Error(), "probe of the admission path refused")) {
				t.Errorf("Check = %v, want a refusal: %t", check, tc.refusal)
			}
			wantLogged := 0
			if tc.refusal {
				wantLogged = 1
			}
			if n := logs.FilterLevelExact(zap.ErrorLevel).FilterMessageSnippet("refused").Len(); n != wantLogged {
				t.Errorf("%d error lines about a refusal, want %d", n, wantLogged)
			}
			var got []string
			for len(events.Events) > 0 {
				got = append(got, <-events.Events)
			}
			if tc.wantEvent != (len(got) == 1) || (tc.wantEvent && !strings.HasPrefix(got[0], "Warning "+ReasonAdmissionProbeRefused+" ")) {
				t.Errorf("events %q, want one Warning %s: %t", got, ReasonAdmissionProbeRefused, tc.wantEvent)
			}
			// A round that is not refused clears the fault.
			p.faults.report(nil)
			if err := p.faults.Check(); err != nil {
				t.Errorf("Check after a round not refused = %v, want nil", err)
			}
		})
	}
}

// TestRefused classifies the errors of a probe.
func TestRefused(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	terminating := apierrors.NewForbidden(gr, "", errors.New("namespace app is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
	got := map[string]bool{}
	for name, err := range map[string]error{
		"RBAC":                     apierrors.NewForbidden(gr, "", errors.New("cannot create")),
		"unauthorized":             apierrors.NewUnauthorized("token expired"),
		"namespaces' cache":        errNamespacesUnsynced,
		"namespace being deleted":  terminating,
		"server error":             apierrors.NewInternalError(errors.New("etcd")),
		"timeout":                  context.DeadlineExceeded,
		"wrapped RBAC, probe text": errors.Join(errors.New("probe with binding app/sink"), apierrors.NewForbidden(gr, "", errors.New("x"))),
	} {
		got[name] = refused(err)
	}
	want := map[string]bool{"RBAC": true, "unauthorized": true, "namespaces' cache": true, "namespace being deleted": false,
		"server error": false, "timeout": false, "wrapped RBAC, probe text": true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refused (-want +got):\n%s", diff)
	}
}
