package v1alpha1

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/bindkit/bindkit/declarative"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/tracker"
)

// What a SinkBinding adds to its subjects.
const (
	// SinkEnv is the environment variable that holds the sink's URL.
	SinkEnv = "K_SINK"
	// CACertsEnv holds where the sink's CA certificates are mounted.
	CACertsEnv = "K_CA_CERTS"
	// CACertsVolume is the volume of the CA certificates Secret.
	CACertsVolume = "sinkbinding-ca-certs"
	// CACertsPath is where it is mounted.
	CACertsPath = "/var/run/sinkbinding/ca-certs"
	// ForwarderContainer is the sidecar of SinkBindingSpec.ForwarderImage.
	ForwarderContainer = "sink-forwarder"
)

var (
	_ psbinding.Bindable        = (*SinkBinding)(nil)
	_ psbinding.StatusPublisher = (*SinkBinding)(nil)
	_ declarative.Declarer      = (*SinkBinding)(nil)
)

// GetSubject implements duck.Bindable; an empty namespace is the Binding's.
func (b *SinkBinding) GetSubject() tracker.Reference {
	ref := b.Spec.Subject
	if ref.Namespace == "" {
		ref.Namespace = b.Namespace
	}
	return ref
}

// GetBindingStatus implements duck.Bindable.
func (b *SinkBinding) GetBindingStatus() duck.BindableStatus { return &b.Status.Status }

// Declare implements declarative.Declarer: K_SINK in every container and,
// with a CA certificates Secret, its volume, its mount (init containers
// too) and K_CA_CERTS.
func (b *SinkBinding) Declare() declarative.Spec {
	spec := declarative.Spec{Env: []corev1.EnvVar{{Name: SinkEnv, Value: b.Spec.Sink}}}
	if b.Spec.CACertsSecret != "" {
		spec.Env = append(spec.Env, corev1.EnvVar{Name: CACertsEnv, Value: CACertsPath})
		spec.VolumeMounts = []corev1.VolumeMount{{Name: CACertsVolume, MountPath: CACertsPath, ReadOnly: true}}
		// The mode the API server would default, so the policy's result
		// and the webhook's compare equal.
		mode := corev1.SecretVolumeSourceDefaultMode
		spec.Volumes = []corev1.Volume{{Name: CACertsVolume, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: b.Spec.CACertsSecret, DefaultMode: &mode}}}}
		spec.InitContainersToo = true
	}
	if b.Spec.ForwarderImage != "" {
		// With the defaults the API server fills in, so that what a
		// subject stores is what Do sets.
		spec.Containers = []corev1.Container{{
			Name: ForwarderContainer, Image: b.Spec.ForwarderImage,
			Env:                      []corev1.EnvVar{{Name: SinkEnv, Value: b.Spec.Sink}},
			TerminationMessagePath:   corev1.TerminationMessagePathDefault,
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			ImagePullPolicy:          pullPolicy(b.Spec.ForwarderImage),
		}}
	}
	return spec
}

// pullPolicy is the API server's default for image: Always for :latest or
// no tag, IfNotPresent otherwise.
func pullPolicy(image string) corev1.PullPolicy {
	name := image[strings.LastIndex(image, "/")+1:]
	if strings.Contains(image, "@") || (strings.Contains(name, ":") && !strings.HasSuffix(name, ":latest")) {
		return corev1.PullIfNotPresent
	}
	return corev1.PullAlways
}

// Do implements psbinding.Bindable with the declared Spec.
func (b *SinkBinding) Do(_ context.Context, wp *duck.WithPod) { b.Declare().Do(wp) }

// Undo implements psbinding.Bindable with the declared Spec.
func (b *SinkBinding) Undo(_ context.Context, wp *duck.WithPod) { b.Declare().Undo(wp) }

// PublishStatus implements psbinding.StatusPublisher: the declared Spec, in
// status.declared, for the admission policy.
func (b *SinkBinding) PublishStatus() { b.Status.Publish(b.Generation, b.Declare()) }
