package bench

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/tracker"
)

// bkBinding is the benchmark Binding written for bindkit.
type bkBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Subject           tracker.Reference `json:"subject"`
	Spec              bindingSpec       `json:"spec"`
	Status            duck.Status       `json:"status,omitempty"`
}

var _ psbinding.Bindable = (*bkBinding)(nil)

func (b *bkBinding) GetSubject() tracker.Reference         { return b.Subject }
func (b *bkBinding) GetBindingStatus() duck.BindableStatus { return &b.Status }
func (b *bkBinding) Do(_ context.Context, wp *duck.WithPod) {
	b.Spec.do(&wp.Spec.Template.Spec)
}
func (b *bkBinding) Undo(_ context.Context, wp *duck.WithPod) {
	b.Spec.undo(&wp.Spec.Template.Spec)
}

func (b *bkBinding) DeepCopyObject() runtime.Object {
	out := *b
	b.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	b.Status.DeepCopyInto(&out.Status)
	if b.Subject.Selector != nil {
		out.Subject.Selector = b.Subject.Selector.DeepCopy()
	}
	return &out
}

func bindkitBindings(set bindingSet) []psbinding.Bindable {
	var out []psbinding.Bindable
	for _, d := range set.defs() {
		out = append(out, &bkBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "bench.bindkit.dev/v1", Kind: "BenchBinding"},
			ObjectMeta: metav1.ObjectMeta{Namespace: bindingNamespace, Name: d.name},
			Subject: tracker.Reference{
				APIVersion: "apps/v1", Kind: "Deployment", Namespace: bindingNamespace,
				Name: d.subject, Selector: d.selector,
			},
			Spec: d.spec,
		})
	}
	return out
}

// bindkitAdmission returns bindkit's admission controller for set, its index
// built by one Reconcile as a follower replica builds it (a follower does not
// write the webhook configuration, so the fake client sees no call).
func bindkitAdmission(tb testing.TB, set bindingSet, secrets corelisters.SecretLister) *psbinding.AdmissionReconciler {
	tb.Helper()
	bindings := bindkitBindings(set)
	ac, err := psbinding.NewAdmissionReconciler(psbinding.AdmissionConfig{
		ConfigurationName: "bindings.bench.bindkit.dev",
		Path:              "/bindings",
		ListAll:           func() ([]psbinding.Bindable, error) { return bindings, nil },
		KubeClient:        fake.NewClientset(),
		Mapper:            meta.NewDefaultRESTMapper(nil),
		SecretLister:      secrets,
		SecretName:        secretName,
		SystemNamespace:   systemNamespace,
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := ac.Reconcile(context.Background(), ac.Key()); err != nil {
		tb.Fatal(err)
	}
	if !ac.HasSynced() {
		tb.Fatal("bindkit admission controller has no index after Reconcile")
	}
	return ac
}
