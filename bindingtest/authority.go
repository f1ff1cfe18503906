package bindingtest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/envtest"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/wiring"
)

// The users CheckAuthority writes Bindings as: one allowed to create the
// kind's Bindings only, one also allowed to patch what they reach.
const (
	AuthorityTestUser             = "bindingtest-author"
	AuthorityTestUserWithoutPatch = "bindingtest-author-without-patch"
)

// CheckAuthority checks, on env's kube-apiserver, that kind's Bindings
// carry their author's authority: example (a Binding of kind, in the
// namespace it names, whose subject names a kind bindkit knows the
// resource of) is refused, with the authority policy's message, to a user
// who may create such Bindings but not patch what example reaches, and
// allowed, with the requested-by record naming them, to one who may. It
// writes dry runs of a Binding with example's spec (example itself may
// exist), so nothing is stored but the two users' Roles.
// The kind's policies must be in force: run the kind's Webhook first
// (Run), or apply its config/ (CheckManifests); CheckAuthority waits a
// minute for them.
func CheckAuthority(t testing.TB, env *envtest.Environment, kind *wiring.Kind, example psbinding.Bindable) {
	t.Helper()
	ctx := t.Context()
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(example)
	if err != nil {
		t.Fatalf("CheckAuthority: %v", err)
	}
	// A new Binding like example: example itself may exist already.
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": content["spec"]}}
	obj.SetGroupVersionKind(kind.GVK)
	obj.SetNamespace(example.GetNamespace())
	obj.SetGenerateName(example.GetName() + "-")
	ns := obj.GetNamespace()
	subject := example.GetSubject()
	gvk, err := subject.GroupVersionKind()
	if err != nil {
		t.Fatalf("CheckAuthority: example's subject: %v", err)
	}
	mapper := duck.NewRESTMapper(discovery.NewDiscoveryClientForConfigOrDie(env.Config))
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("CheckAuthority: example's subject kind %s: %v", gvk, err)
	}
	create := rbacv1.PolicyRule{APIGroups: []string{kind.GVR.Group}, Resources: []string{kind.GVR.Resource}, Verbs: []string{"create"}}
	patch := rbacv1.PolicyRule{APIGroups: []string{mapping.Resource.Group}, Resources: []string{mapping.Resource.Resource}, Verbs: []string{"patch"}}
	kube := kubernetes.NewForConfigOrDie(env.Config)
	grantRole(t, kube, ns, AuthorityTestUserWithoutPatch, create)
	grantRole(t, kube, ns, AuthorityTestUser, create, patch)

	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	var refused error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, refused = impersonating(env, AuthorityTestUserWithoutPatch).Resource(kind.GVR).Namespace(ns).Create(ctx, obj, dryRun)
		return apierrors.IsForbidden(refused), nil
	})
	if err != nil {
		t.Fatalf("CheckAuthority: a %s whose author may not patch %s was not refused within a minute (last: %v); is the kind's authority policy %s in force?",
			kind.GVK.Kind, mapping.Resource.GroupResource(), refused, policy.AuthorityName(kind.GVR.GroupResource()))
	}
	want := fmt.Sprintf("user %q may not %s %s", AuthorityTestUserWithoutPatch, policy.SubjectVerb, mapping.Resource.GroupResource())
	if !strings.Contains(refused.Error(), want) {
		t.Errorf("CheckAuthority: refusal %q does not say %q", refused, want)
	}
	// The requested-by policy is a second object, in force on its own
	// schedule (and answering 503 for a moment after it is programmed):
	// wait for it as for the authority policy.
	var created *unstructured.Unstructured
	var last error
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		created, last = impersonating(env, AuthorityTestUser).Resource(kind.GVR).Namespace(ns).Create(ctx, obj, dryRun)
		if apierrors.IsForbidden(last) {
			return false, last // refused with the authority policy in force: a wrong refusal, not a wait
		}
		return last == nil && created.GetAnnotations()[policy.RequestedByAnnotation] != "", nil
	})
	switch {
	case apierrors.IsForbidden(err):
		t.Fatalf("CheckAuthority: a %s whose author may patch %s in %s was refused: %v", kind.GVK.Kind, mapping.Resource.GroupResource(), ns, err)
	case created == nil:
		t.Fatalf("CheckAuthority: a %s whose author may patch %s in %s was not admitted within a minute: %v", kind.GVK.Kind, mapping.Resource.GroupResource(), ns, last)
	}
	if got := created.GetAnnotations()[policy.RequestedByAnnotation]; got != AuthorityTestUser {
		t.Errorf("CheckAuthority: %s = %q, want %q: who asked is not recorded (is the kind's requested-by policy %s in force?)",
			policy.RequestedByAnnotation, got, AuthorityTestUser, policy.RequestedByName(kind.GVR.GroupResource()))
	}
}

func impersonating(env *envtest.Environment, user string) dynamic.Interface {
	c := rest.CopyConfig(env.Config)
	c.Impersonate = rest.ImpersonationConfig{UserName: user}
	return dynamic.NewForConfigOrDie(c)
}

// grantRole gives user rules in namespace, replacing an earlier grant.
func grantRole(t testing.TB, kube kubernetes.Interface, namespace, user string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := t.Context()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: rules}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}
	for _, write := range []func() error{
		func() error {
			_, err := kube.RbacV1().Roles(namespace).Create(ctx, role, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := kube.RbacV1().RoleBindings(namespace).Create(ctx, rb, metav1.CreateOptions{})
			return err
		},
	} {
		if err := write(); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("CheckAuthority: grant %s: %v", user, err)
		}
	}
}
