package fixturebinding

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/tracker"
	"github.com/bindkit/bindkit/wiring"
)

// Group and version of both fixture kinds; CRDPath holds their CRDs,
// relative to the repository root.
const (
	Group   = "fixtures.bindkit.dev"
	Version = "v1alpha1"
	CRDPath = "test/fixturebinding/config/crds.yaml"
)

// Kinds: two Binding kinds with the same Go type and behaviour.
const (
	Kind      = "FixtureBinding"
	OtherKind = "OtherFixtureBinding"
)

// GVR returns the resource of kind (Kind or OtherKind).
func GVR(kind string) schema.GroupVersionResource {
	if kind == OtherKind {
		return schema.GroupVersionResource{Group: Group, Version: Version, Resource: "otherfixturebindings"}
	}
	return schema.GroupVersionResource{Group: Group, Version: Version, Resource: "fixturebindings"}
}

// EnvName is the env var Do sets in every container of a subject of a
// Binding of kind: FIXTURE_FIXTUREBINDING or FIXTURE_OTHERFIXTUREBINDING,
// so Bindings of both kinds can bind one subject.
func EnvName(kind string) string {
	if kind == OtherKind {
		return "FIXTURE_OTHERFIXTUREBINDING"
	}
	return "FIXTURE_FIXTUREBINDING"
}

// Binding is the Go type of both fixture kinds.
type Binding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              Spec        `json:"spec"`
	Status            duck.Status `json:"status,omitempty"`
}

// Spec is what a fixture Binding binds, and how it misbehaves.
type Spec struct {
	// Subject is what the Binding binds.
	Subject tracker.Reference `json:"subject"`
	// Value is the value of the env var Do sets. Default: the Binding's
	// name.
	Value string `json:"value,omitempty"`

	// PanicOnLabel makes Do and Undo panic on a subject that carries this
	// label (any value), with the value "fixture panic on <namespace>/<name>".
	PanicOnLabel string `json:"panicOnLabel,omitempty"`
	// PanicInWithContext makes WithContext panic.
	PanicInWithContext bool `json:"panicInWithContext,omitempty"`
	// AppendContainer makes Do append a container named "fixture" every
	// time it runs: not idempotent, and refused by the API server on a
	// subject that has such a container already.
	AppendContainer bool `json:"appendContainer,omitempty"`
	// ClearImage makes Do set the first container's image to "", which the
	// API server refuses for a Deployment (spec.template.spec.containers[0].image:
	// Required value) although Do is idempotent.
	ClearImage bool `json:"clearImage,omitempty"`
	// NoProxy, when set, makes Do normalize it in the Binding before
	// using it, as an author who takes the Binding for Do's own might:
	// it appends "localhost" to the list (a Binding Do changes), then sets
	// NO_PROXY to the list, comma-separated, in every container. On a
	// copy of its own, NO_PROXY is the list and localhost at every call;
	// on a Binding shared with an informer, it grows by one entry at each.
	NoProxy []string `json:"noProxy,omitempty"`
}

// NoProxyEnv is the env var Do sets from Spec.NoProxy.
const NoProxyEnv = "NO_PROXY"

// GetSubject implements duck.Bindable; the subject is in the Binding's
// namespace unless it names one.
func (b *Binding) GetSubject() tracker.Reference { return b.Spec.Subject }

// GetBindingStatus implements duck.Bindable.
func (b *Binding) GetBindingStatus() duck.BindableStatus { return &b.Status }

// DeepCopyObject implements runtime.Object.
func (b *Binding) DeepCopyObject() runtime.Object {
	out := &Binding{TypeMeta: b.TypeMeta, Spec: b.Spec}
	b.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	b.Spec.Subject.DeepCopyInto(&out.Spec.Subject)
	out.Spec.NoProxy = slices.Clone(b.Spec.NoProxy)
	b.Status.DeepCopyInto(&out.Status)
	return out
}

// Do sets EnvName(kind)=Value in every container, unless a misbehaviour
// says otherwise.
func (b *Binding) Do(_ context.Context, wp *duck.WithPod) {
	b.panicOn(wp)
	spec := &wp.Spec.Template.Spec
	setEnv(spec, corev1.EnvVar{Name: EnvName(b.Kind), Value: b.value()})
	if len(b.Spec.NoProxy) > 0 {
		b.Spec.NoProxy = append(b.Spec.NoProxy, "localhost")
		setEnv(spec, corev1.EnvVar{Name: NoProxyEnv, Value: strings.Join(b.Spec.NoProxy, ",")})
	}
	if b.Spec.AppendContainer {
		spec.Containers = append(spec.Containers, corev1.Container{Name: "fixture", Image: "fixture"})
	}
	if b.Spec.ClearImage && len(spec.Containers) > 0 {
		spec.Containers[0].Image = ""
	}
}

// setEnv sets env in every container of spec.
func setEnv(spec *corev1.PodSpec, env corev1.EnvVar) {
	for i := range spec.Containers {
		c := &spec.Containers[i]
		if j := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == env.Name }); j >= 0 {
			c.Env[j] = env
		} else {
			c.Env = append(c.Env, env)
		}
	}
}

// Undo removes what Do set.
func (b *Binding) Undo(_ context.Context, wp *duck.WithPod) {
	b.panicOn(wp)
	spec := &wp.Spec.Template.Spec
	name := EnvName(b.Kind)
	noProxy := len(b.Spec.NoProxy) > 0
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name || (noProxy && e.Name == NoProxyEnv) })
		if len(c.Env) == 0 {
			c.Env = nil
		}
	}
}

func (b *Binding) value() string {
	if b.Spec.Value != "" {
		return b.Spec.Value
	}
	return b.Name
}

func (b *Binding) panicOn(wp *duck.WithPod) {
	if l := b.Spec.PanicOnLabel; l != "" {
		if _, ok := wp.Labels[l]; ok {
			panic(fmt.Sprintf("fixture panic on %s/%s", wp.Namespace, wp.Name))
		}
	}
}

// withContext panics for a Binding with PanicInWithContext.
func withContext(ctx context.Context, b psbinding.Bindable) (context.Context, error) {
	if fb, ok := b.(*Binding); ok && fb.Spec.PanicInWithContext {
		panic("fixture panic in WithContext of " + fb.Namespace + "/" + fb.Name)
	}
	return ctx, nil
}

// New wires kind (Kind or OtherKind) with wiring.New and default options,
// as a user's main does, but for WithContext, which honours
// PanicInWithContext.
func New(kind string) (*wiring.Kind, error) {
	return wiring.New[Binding](GVR(kind), wiring.Options{Kind: kind, WithContext: withContext})
}
