package declarative

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/bindkit/bindkit/duck"
)

// Declarer is a declarative Binding: it computes from itself the Spec of
// what it adds to its subjects. A Binding kind that implements it, with
// Do and Undo delegating to the Spec and PublishStatus publishing it
// (Status.Publish), may be admitted by the kube-apiserver's
// MutatingAdmissionPolicy instead of the webhook (wiring.New decides).
//
// Declare must be a pure function of the Binding: the reconciler, the
// webhook and the policy (from what PublishStatus published) must all see
// the same Spec for the same generation.
type Declarer interface {
	Declare() Spec
}

// InBinding is a Declarer whose Spec its user writes in the Binding
// itself, at DeclaredPath (a field of type Spec, "spec.declare" say), and
// whose Declare returns that field as it is. Such a kind is admitted by the
// MutatingAdmissionPolicy with the Binding's current spec, read by the
// kube-apiserver from the Binding, with no bindkit process running, and
// recorded at the Binding's generation; a kind whose Declare computes its
// Spec in Go is admitted with the Spec its controller last published
// (Status). The controller publishes Status for both: it is what
// operators read.
//
// The contract, which wiring.New checks at construction where it can:
//
//   - DeclaredPath is a dotted path of JSON field names, at which the
//     Binding's JSON holds the Spec Declare returns, field for field: no
//     default filled in, nothing computed.
//   - The field's schema in the kind's CRD is Spec's, as bindkit generate
//     writes it from the type: Spec's markers make the kube-apiserver
//     refuse, at the Binding's write, what Validate refuses (names, one
//     source per volume, images, entries of one name twice, bounds), so
//     that no value the policy applies with no process to check it makes
//     a pod template invalid. The controller still validates each
//     generation; one it reports invalid (Ready False, BindingInvalid, at
//     its generation) is skipped at admission, as on the webhook.
type InBinding interface {
	Declarer
	DeclaredPath() string
}

// Status is the status of a declarative Binding: the duck status every
// Binding has, and the Spec the Binding last published, which the
// MutatingAdmissionPolicy reads (policy.DefaultDeclaredPath).
type Status struct {
	duck.Status `json:",inline"`

	// Declared is what the Binding adds to its subjects, as computed by the
	// controller from its spec; the kube-apiserver applies it at admission.
	// +optional
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Declared *Spec `json:"declared,omitempty"`
	// DeclaredGeneration is the generation of the Binding Declared was
	// computed from; the kube-apiserver records it on the subjects it
	// binds, so that a subject's record names exactly what it carries.
	// +optional
	DeclaredGeneration int64 `json:"declaredGeneration,omitempty"`
}

// Publish records spec, computed from the Binding at generation, as the
// Declared Spec. A Binding kind's PublishStatus (psbinding.StatusPublisher)
// is one line:
//
//	func (b *SinkBinding) PublishStatus() { b.Status.Publish(b.Generation, b.Declare()) }
//
// The reconciler publishes only a Binding that validates (Spec.Validate):
// an invalid one keeps the last valid Spec published, with its generation.
func (s *Status) Publish(generation int64, spec Spec) {
	s.Declared, s.DeclaredGeneration = &spec, generation
}

// DeepCopyInto copies s into out, deeply.
func (s *Status) DeepCopyInto(out *Status) {
	*out = *s
	s.Status.DeepCopyInto(&out.Status)
	if s.Declared != nil {
		out.Declared = s.Declared.DeepCopy()
	}
}

// DeepCopy returns a deep copy of s.
func (s *Status) DeepCopy() *Status {
	if s == nil {
		return nil
	}
	out := new(Status)
	s.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies s into out, deeply.
func (s *Spec) DeepCopyInto(out *Spec) {
	*out = *s
	out.Env = copyEach(s.Env, (*corev1.EnvVar).DeepCopyInto)
	out.EnvFrom = copyEach(s.EnvFrom, (*corev1.EnvFromSource).DeepCopyInto)
	out.VolumeMounts = copyEach(s.VolumeMounts, (*corev1.VolumeMount).DeepCopyInto)
	out.Volumes = copyEach(s.Volumes, (*corev1.Volume).DeepCopyInto)
	out.InitContainers = copyEach(s.InitContainers, (*corev1.Container).DeepCopyInto)
	out.Containers = copyEach(s.Containers, (*corev1.Container).DeepCopyInto)
}

// DeepCopy returns a deep copy of s.
func (s *Spec) DeepCopy() *Spec {
	if s == nil {
		return nil
	}
	out := new(Spec)
	s.DeepCopyInto(out)
	return out
}

// copyEach deep-copies in element by element; nil stays nil.
func copyEach[E any](in []E, copyInto func(*E, *E)) []E {
	if in == nil {
		return nil
	}
	out := make([]E, len(in))
	for i := range in {
		copyInto(&in[i], &out[i])
	}
	return out
}
