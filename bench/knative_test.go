package bench

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	admissionlisters "k8s.io/client-go/listers/admissionregistration/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	kduck "knative.dev/pkg/apis/duck"
	kduckv1 "knative.dev/pkg/apis/duck/v1"
	ktracker "knative.dev/pkg/tracker"
	kpsbinding "knative.dev/pkg/webhook/psbinding"
)

// knBinding is the same benchmark Binding written for knative.dev/pkg.
type knBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Subject           ktracker.Reference `json:"subject"`
	Spec              bindingSpec        `json:"spec"`
	Status            knStatus           `json:"status,omitempty"`
}

// knStatus satisfies knative's BindableStatus; the admission path never
// touches it.
type knStatus struct {
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

func (s *knStatus) InitializeConditions()                 {}
func (s *knStatus) MarkBindingAvailable()                 {}
func (s *knStatus) MarkBindingUnavailable(string, string) {}
func (s *knStatus) SetObservedGeneration(g int64)         { s.ObservedGeneration = g }

var _ kpsbinding.Bindable = (*knBinding)(nil)

func (b *knBinding) GetSubject() ktracker.Reference         { return b.Subject }
func (b *knBinding) GetBindingStatus() kduck.BindableStatus { return &b.Status }
func (b *knBinding) GetGroupVersionKind() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: "bench.bindkit.dev", Version: "v1", Kind: "BenchBinding"}
}
func (b *knBinding) Do(_ context.Context, wp *kduckv1.WithPod) {
	b.Spec.do(&wp.Spec.Template.Spec)
}
func (b *knBinding) Undo(_ context.Context, wp *kduckv1.WithPod) {
	b.Spec.undo(&wp.Spec.Template.Spec)
}

func (b *knBinding) DeepCopyObject() runtime.Object {
	out := *b
	b.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if b.Subject.Selector != nil {
		out.Subject.Selector = b.Subject.Selector.DeepCopy()
	}
	return &out
}

func knativeBindings(set bindingSet) []kpsbinding.Bindable {
	var out []kpsbinding.Bindable
	for _, d := range set.defs() {
		out = append(out, &knBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "bench.bindkit.dev/v1", Kind: "BenchBinding"},
			ObjectMeta: metav1.ObjectMeta{Namespace: bindingNamespace, Name: d.name},
			Subject: ktracker.Reference{
				APIVersion: "apps/v1", Kind: "Deployment", Namespace: bindingNamespace,
				Name: d.subject, Selector: d.selector,
			},
			Spec: d.spec,
		})
	}
	return out
}

// knativeAdmission returns knative's admission reconciler for set, its index
// built by its own Reconcile. Not being leader, it stops after indexing and
// never reads the (empty) webhook configuration lister. Knative finds its
// namespace in SYSTEM_NAMESPACE, so the caller's test sets it.
func knativeAdmission(tb testing.TB, set bindingSet, secrets corelisters.SecretLister) *kpsbinding.Reconciler {
	tb.Helper()
	bindings := knativeBindings(set)
	mwh := admissionlisters.NewMutatingWebhookConfigurationLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}))
	r := kpsbinding.NewReconciler("bindings.bench.bindkit.dev", "/bindings", secretName, fake.NewClientset(), mwh, secrets, nil)
	r.ListAll = func() ([]kpsbinding.Bindable, error) { return bindings, nil }
	if err := r.Reconcile(context.Background(), "bindings.bench.bindkit.dev"); err != nil {
		tb.Fatal(err)
	}
	return r
}
