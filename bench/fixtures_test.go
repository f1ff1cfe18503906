package bench

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/test/fixtures"
)

// Namespaces of the benchmarks. systemNamespace is where the webhooks run;
// bindkit never mutates it, so no request is sent there.
const (
	bindingNamespace = "ns"
	otherNamespace   = "other"
	systemNamespace  = "bindkit-system"
	secretName       = "webhook-certs"
	subjectName      = "web"
)

// deploymentRaw is the request object: the Deployment as JSON.
func deploymentRaw(tb testing.TB, ns string) []byte {
	tb.Helper()
	raw, err := json.Marshal(fixtures.RealisticDeployment(ns, subjectName))
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

// deploymentRequest is a CREATE of the realistic Deployment, as the
// kube-apiserver sends it.
func deploymentRequest(ns string, raw []byte) *admissionv1.AdmissionRequest {
	return &admissionv1.AdmissionRequest{
		UID:       types.UID("0f5e4c1a-6c1d-4a47-9a0e-5a1f3c2b7d10"),
		Kind:      metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		Namespace: ns,
		Operation: admissionv1.Create,
		UserInfo:  authenticationv1.UserInfo{Username: "kubernetes-admin", Groups: []string{"system:masters", "system:authenticated"}},
		Object:    runtime.RawExtension{Raw: raw},
	}
}

// bindingSpec is what every Binding of the benchmarks does, whichever
// framework runs it: an env var, a secret volume and a mount of it on every
// container. The framework-specific types wrap it.
type bindingSpec struct {
	Env       corev1.EnvVar
	Secret    string
	MountPath string
}

func (s bindingSpec) volumeName() string { return "bound-" + s.Secret }

// do binds spec in place; it is idempotent.
func (s bindingSpec) do(spec *corev1.PodSpec) {
	vol := corev1.Volume{Name: s.volumeName(), VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: s.Secret}}}
	spec.Volumes = upsert(spec.Volumes, vol, func(v corev1.Volume) string { return v.Name })
	mount := corev1.VolumeMount{Name: s.volumeName(), MountPath: s.MountPath, ReadOnly: true}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.Env = upsert(c.Env, s.Env, func(e corev1.EnvVar) string { return e.Name })
		c.VolumeMounts = upsert(c.VolumeMounts, mount, func(m corev1.VolumeMount) string { return m.Name })
	}
}

// undo reverts what do changed.
func (s bindingSpec) undo(spec *corev1.PodSpec) {
	spec.Volumes = slices.DeleteFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == s.volumeName() })
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == s.Env.Name })
		c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == s.volumeName() })
	}
}

func upsert[T any](list []T, item T, key func(T) string) []T {
	if i := slices.IndexFunc(list, func(x T) bool { return key(x) == key(item) }); i >= 0 {
		list[i] = item
		return list
	}
	return append(list, item)
}

// bindingSet describes the Bindings of one scenario independently of a
// framework: n Bindings in bindingNamespace each selecting app=app-i, and,
// if match is set, one more that selects the subject by label or by name.
type bindingSet struct {
	n     int
	match matchKind
}

type matchKind int

const (
	matchNone matchKind = iota
	matchSelector
	matchExact
)

// bindingDef is one Binding: its name, its subject (a selector or a name)
// and what it does.
type bindingDef struct {
	name     string
	selector *metav1.LabelSelector
	subject  string
	spec     bindingSpec
}

func (s bindingSet) defs() []bindingDef {
	defs := make([]bindingDef, 0, s.n+1)
	for i := range s.n {
		defs = append(defs, bindingDef{
			name:     fmt.Sprintf("b%05d", i),
			selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("app-%d", i)}},
			spec:     newBindingSpec(fmt.Sprintf("s%05d", i)),
		})
	}
	match := bindingDef{name: "match", spec: newBindingSpec("match")}
	switch s.match {
	case matchSelector:
		match.selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": subjectName}}
		defs = append(defs, match)
	case matchExact:
		match.subject = subjectName
		defs = append(defs, match)
	}
	return defs
}

func newBindingSpec(secret string) bindingSpec {
	return bindingSpec{
		Env:       corev1.EnvVar{Name: "BINDING_" + secret, Value: "/var/run/bindings/" + secret},
		Secret:    secret,
		MountPath: "/var/run/bindings/" + secret,
	}
}

// secretIndexer is a SecretLister's store holding the webhook's certificates
// Secret with data, as an informer would.
func secretIndexer(tb testing.TB, data map[string][]byte) cache.Indexer {
	tb.Helper()
	ix := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	err := ix.Add(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: systemNamespace, Name: secretName, ResourceVersion: "1"},
		Data:       data,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return ix
}
