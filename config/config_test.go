package config

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/reconciler/githubbinding"
)

const fieldManager = "bindkit-config-test"

// apply server-side applies obj, as a dry run unless real is set.
func apply(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, obj *unstructured.Unstructured, real bool) (*unstructured.Unstructured, error) {
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	opts := metav1.PatchOptions{FieldManager: fieldManager}
	if !real {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var client dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		client = dyn.Resource(mapping.Resource).Namespace(obj.GetNamespace())
	}
	return client.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts)
}

// TestEveryFileAppliesWithRealAPIServer applies every object of config/ to
// the real kube-apiserver with server-side apply: bindkit-system for real,
// so that the namespaced objects have a namespace, and everything else as
// a dry run, which runs defaulting, validation and admission without
// storing anything.
func TestEveryFileAppliesWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	dyn := dynamic.NewForConfigOrDie(env.Config)
	mapper := duck.NewRESTMapper(discovery.NewDiscoveryClientForConfigOrDie(env.Config))
	manifests := readManifests(t, ".")

	ns := find(t, manifests, "Namespace", "bindkit-system")
	if _, err := apply(ctx, dyn, mapper, ns, true); err != nil {
		t.Fatalf("100-namespace.yaml: create bindkit-system: %v", err)
	}

	kinds := map[string]int{}
	// The uninstall Job too, which an operator applies when removing
	// bindkit.
	for _, m := range append(manifests, readManifests(t, "uninstall")...) {
		kinds[m.obj.GetKind()]++
		got, err := apply(ctx, dyn, mapper, m.obj, false)
		if err != nil {
			t.Errorf("%s: rejected: %v", m, err)
			continue
		}
		if got.GetKind() != m.obj.GetKind() || got.GetName() != m.obj.GetName() {
			t.Errorf("%s: server answered with %s %s", m, got.GetKind(), key(got))
		}
	}
	// Every kind config/ must deploy is there: a file dropped by mistake
	// fails here rather than in a cluster.
	for _, kind := range []string{
		"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
		"CustomResourceDefinition", "Service", "MutatingWebhookConfiguration", "Secret", "Deployment", "Job",
	} {
		if kinds[kind] == 0 {
			t.Errorf("config/ has no %s", kind)
		}
	}
}

// TestGithubBindingSchemaWithRealAPIServer installs the CRD for real and
// proves its schema, as the real kube-apiserver evaluates it, accepts the
// GithubBindings a user may write and rejects broken ones.
func TestGithubBindingSchemaWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	if err := env.InstallCRDs(ctx, "300-githubbinding.yaml"); err != nil {
		t.Fatalf("install CRD: %v", err)
	}
	kube := kubernetes.NewForConfigOrDie(env.Config)
	nsObj, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "schema-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns := nsObj.Name
	client := dynamic.NewForConfigOrDie(env.Config).Resource(v1alpha1.GroupVersionResource()).Namespace(ns)

	deployment := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
	secret := map[string]any{"name": "gh-token"}
	tests := []struct {
		name    string
		spec    map[string]any
		wantErr string // a substring of the rejection; empty for accepted
	}{{
		name: "subject by name",
		spec: map[string]any{"subject": deployment, "secret": secret},
	}, {
		name: "subject by selector",
		spec: map[string]any{
			"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "selector": map[string]any{
				"matchLabels":      map[string]any{"app": "web"},
				"matchExpressions": []any{map[string]any{"key": "tier", "operator": "In", "values": []any{"front"}}},
			}},
			"secret": secret,
		},
	}, {
		name: "empty namespace, as Go clients send it",
		spec: map[string]any{"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "", "name": "web"}, "secret": secret},
	}, {
		name:    "no spec",
		spec:    nil,
		wantErr: "spec: Required value",
	}, {
		name:    "no secret",
		spec:    map[string]any{"subject": deployment},
		wantErr: "spec.secret: Required value",
	}, {
		name:    "secret without a name",
		spec:    map[string]any{"subject": deployment, "secret": map[string]any{"name": ""}},
		wantErr: "spec.secret.name",
	}, {
		name:    "no subject",
		spec:    map[string]any{"secret": secret},
		wantErr: "spec.subject: Required value",
	}, {
		name:    "subject without a kind",
		spec:    map[string]any{"subject": map[string]any{"apiVersion": "apps/v1", "name": "web"}, "secret": secret},
		wantErr: "spec.subject.kind: Required value",
	}, {
		name:    "subject with neither name nor selector",
		spec:    map[string]any{"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment"}, "secret": secret},
		wantErr: "exactly one of name and selector",
	}, {
		name: "subject with both name and selector",
		spec: map[string]any{"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}, "secret": secret},
		wantErr: "exactly one of name and selector",
	}, {
		// The CRD leaves the namespace to the framework, which refuses a
		// subject outside the Binding's namespace on both paths, saying so
		// in the Binding's Ready condition (psbinding's isolation tests).
		name: "subject in another namespace",
		spec: map[string]any{"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "other", "name": "web"}, "secret": secret},
	}, {
		name: "selector with an unknown operator",
		spec: map[string]any{"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "selector": map[string]any{
			"matchExpressions": []any{map[string]any{"key": "tier", "operator": "Like"}},
		}}, "secret": secret},
		wantErr: "operator",
	}, {
		// tracker.Reference's rules bound a selector, whichever generator
		// wrote the CRD.
		name:    "selector with 65 labels",
		spec:    map[string]any{"subject": selectorSubject(map[string]any{"matchLabels": manyLabels(65)}), "secret": secret},
		wantErr: "at most 64 matchLabels",
	}, {
		name: "selector with 64 labels",
		spec: map[string]any{"subject": selectorSubject(map[string]any{"matchLabels": manyLabels(64)}), "secret": secret},
	}, {
		name:    "selector with a label value of 64 characters",
		spec:    map[string]any{"subject": selectorSubject(map[string]any{"matchLabels": map[string]any{"app": strings.Repeat("v", 64)}}), "secret": secret},
		wantErr: "values at most 63",
	}, {
		name: "selector with an expression of 65 values",
		spec: map[string]any{"subject": selectorSubject(map[string]any{"matchExpressions": []any{
			map[string]any{"key": "tier", "operator": "In", "values": manyValues(65)},
		}}), "secret": secret},
		wantErr: "at most 64 values",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": v1alpha1.SchemeGroupVersion.String(),
				"kind":       v1alpha1.Kind,
				"metadata":   map[string]any{"name": "gh"},
			}}
			if tc.spec != nil {
				obj.Object["spec"] = tc.spec
			}
			_, err := client.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("rejected: %v", err)
			case tc.wantErr != "" && err == nil:
				t.Errorf("accepted, want a rejection naming %q", tc.wantErr)
			case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
				t.Errorf("rejected with %v, want it to name %q", err, tc.wantErr)
			}
		})
	}
}

// TestAdmissionPoliciesAreWhatTheControllerPrograms keeps
// 310-githubbinding-admission-policies.yaml what the example's Webhook
// programs (the authority policy, the namespace guard, the requested-by
// record), so that an install from config/ is guarded before the
// controller first runs, and with none running.
func TestAdmissionPoliciesAreWhatTheControllerPrograms(t *testing.T) {
	kind, err := githubbinding.New()
	if err != nil {
		t.Fatal(err)
	}
	bindingtest.CheckManifests(t, kind, bindingtest.AdmissionPoliciesFileName("githubbinding"))
}

// selectorSubject is a Deployment subject chosen by selector.
func selectorSubject(selector map[string]any) map[string]any {
	return map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "selector": selector}
}

// manyLabels returns n labels l0=v ... l<n-1>=v.
func manyLabels(n int) map[string]any {
	m := map[string]any{}
	for i := range n {
		m[fmt.Sprintf("l%d", i)] = "v"
	}
	return m
}

// manyValues returns n values v0 ... v<n-1>.
func manyValues(n int) []any {
	var l []any
	for i := range n {
		l = append(l, fmt.Sprintf("v%d", i))
	}
	return l
}
