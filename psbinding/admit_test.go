package psbinding

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/bindkit/bindkit/webhook"
)

// decision is what a test asserts of an AdmissionResponse.
type decision struct {
	Allowed  bool
	Code     int32
	Message  string
	Patch    string
	Warnings []string
}

func decide(resp *admissionv1.AdmissionResponse) decision {
	d := decision{Allowed: resp.Allowed, Patch: string(resp.Patch), Warnings: resp.Warnings}
	if resp.Result != nil {
		d.Code, d.Message = resp.Result.Code, resp.Result.Message
	}
	return d
}

func deploymentJSON(t *testing.T, ns, name string, labels map[string]string, env ...corev1.EnvVar) []byte {
	t.Helper()
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "app", Env: env}},
		}}},
	}
	raw, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func deploymentRequest(op admissionv1.Operation, ns, name string, raw []byte) *admissionv1.AdmissionRequest {
	return &admissionv1.AdmissionRequest{
		UID:       "uid",
		Kind:      metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		Namespace: ns,
		Name:      name,
		Operation: op,
		Object:    runtime.RawExtension{Raw: raw},
	}
}

func TestAdmit(t *testing.T) {
	now := metav1.Now()
	exact := newEnvBinding("ns", "exact", deploymentRef("", "web", nil), "EXACT", "1")
	selector := newEnvBinding("ns", "selector", deploymentRef("ns", "", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}), "SELECTED", "2")
	deleting := newEnvBinding("ns", "deleting", deploymentRef("ns", "old", nil), "OLD", "3")
	deleting.DeletionTimestamp = &now
	failing := newEnvBinding("ns", "failing", deploymentRef("ns", "broken", nil), "X", "4")
	big := newEnvBinding("ns", "big", deploymentRef("ns", "big", nil), "BIG", strings.Repeat("x", 50))
	panicking := &misbehaving{envBinding: *newEnvBinding("ns", "panicking", deploymentRef("ns", "bomb", nil), "P", "5"), panicDo: true}
	bindings := []Bindable{exact, selector, deleting, failing, big, panicking}

	webLabels := map[string]string{"app": "web"}
	tests := []struct {
		name string
		req  func(t *testing.T) *admissionv1.AdmissionRequest
		want decision
	}{{
		name: "create of an exact and selector subject gets both, in name order",
		req: func(t *testing.T) *admissionv1.AdmissionRequest {
			return deploymentRequest(admissionv1.Create, "ns", "web", deploymentJSON(t, "ns", "web", webLabels))
		},
		want: decision{Allowed: true, Patch: `[{"op":"add","path":"/spec/template/spec/containers/0/env","value":[{"name":"EXACT","value":"1"},{"name":"SELECTED","value":"2"}]}]`},
	}, {
		name: "generated name: the name comes from the object, selector still matches",
		req: func(t *testing.T) *admissionv1.AdmissionRequest {
			return deploymentRequest(admissionv1.Create, "ns", "", deploymentJSON(t, "ns", "", webLabels))
		},
		want: decision{Allowed: true, Patch: `[{"op":"add","path":"/spec/template/spec/containers/0/env","value":[{"name":"SELECTED","value":"2"}]}]`},
	}, {
		name: "update that is already bound needs no patch",
		req: func(t *testing.T) *admissionv1.AdmissionRequest {
			return deploymentRequest(admissionv1.Update, "ns", "web", deploymentJSON(t, "ns", "web", webLabels,
				corev1.EnvVar{Name: "EXACT", Value: "1"}, corev1.EnvVar{Name: "SELECTED", Value: "2"}))
		},
		want: decision{Allowed: true},
	}, {
		name: "a deleting binding undoes",
		req: func(t *testing.T) *admissionv1.AdmissionRequest {
			return deploymentRequest(admissionv1.Update, "ns", "old", deploymentJSON(t, "ns", "old", nil, corev1.EnvVar{Name: "OLD", Value: "3"}))
		},
		want: decision{Allowed: true, Patch: `[{"op":"remove","path":"/spec/template/spec/containers/0/env"}]`},
	}, {
		name: "no binding in the namespace: allowed without decoding the object",
		req: func(t *testing.T) *admissionv1.AdmissionRequest {
			return deploymentRequest(admissionv1.Create, "elsewhere", "web", []byte("not JSON"))
		},
		want: decision{Allowed: true},
	}, {
		name: "delete is let through",
		req: func(t *testing.T) *admissionv1.AdmissionRequest {
			return deploymentRequest(admissionv1.Delete, "ns", "web", nil)
		},
		want: decision{Allowed: true},
	}, {
		name: "subresource is let through untouched",
		req: func(t *testing.T) *admissionv1.AdmissionRequest {
			req := deploymentRequest(admissionv1.Update, "ns", "web", []byte(`{"kind":"Scale"}`))
			req.SubResource = "scale"
			return req
		},
		want: decision{Allowed: true},
	}, {
		name: "the webhook's own namespace is never mutated",
		req: func(t *testing.T) *admissionv1.AdmissionRequest {
			return deploymentRequest(admissionv1.Create, "bindkit-system", "web", deploymentJSON(t, "bindkit-system", "web", webLabels))
		},
		want: decision{Allowed: true},
	}, {
		name: "malformed object in scope is a clear 400",
		req: func(t *testing.T) *admissionv1.AdmissionRequest {
			return deploymentRequest(admissionv1.Create, "ns", "web", []byte(`{"metadata":`))
		},
		want: decision{Code: 400, Message: "Deployment.apps ns/web: decode metadata: invalid JSON at offset 12: unexpected end"},
	}, {
		name: "an object that is not a JSON object is a clear 400",
		req: func(t *testing.T) *admissionv1.AdmissionRequest {
			return deploymentRequest(admissionv1.Create, "ns", "web", []byte(`["web"]`))
		},
		want: decision{Code: 400, Message: "Deployment.apps ns/web: decode metadata: JSON is an array, not an object"},
	}, {
		name: "a subject without a pod template is admitted unchanged, with a warning",
		req: func(t *testing.T) *admissionv1.AdmissionRequest {
			return deploymentRequest(admissionv1.Create, "ns", "web", []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"ns","labels":{"app":"web"}},"spec":{"replicas":1}}`))
		},
		want: decision{Allowed: true, Warnings: []string{"bindings ns/exact, ns/selector: apps/v1 Deployment ns/web: no pod template at spec.template: admitted unchanged; " +
			"declare the kind's shape (duck.Shapes.With, duck.TemplateAt)"}},
	}, {
		name: "keys match case-sensitively: SPEC is not spec",
		req: func(t *testing.T) *admissionv1.AdmissionRequest {
			return deploymentRequest(admissionv1.Create, "ns", "old", []byte(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"old","namespace":"ns"},"SPEC":{"template":{"spec":{"containers":[{"name":"a"}]}}}}`))
		},
		want: decision{Allowed: true, Warnings: []string{"binding ns/deleting: apps/v1 Deployment ns/old: no pod template at spec.template: admitted unchanged; " +
			"declare the kind's shape (duck.Shapes.With, duck.TemplateAt)"}},
	}, {
		name: "a field twice is a clear 400",
		req: func(t *testing.T) *admissionv1.AdmissionRequest {
			return deploymentRequest(admissionv1.Create, "ns", "web", []byte(`{"metadata":{"name":"web"},"spec":{"template":{}},"spec":{}}`))
		},
		want: decision{Code: 400, Message: `Deployment.apps ns/web: decode spec.template workload: invalid JSON at offset 50: duplicate field "spec"`},
	}, {
		name: "more containers than the limit is a 413 naming it",
		req: func(t *testing.T) *admissionv1.AdmissionRequest {
			return deploymentRequest(admissionv1.Create, "ns", "web", []byte(`{"metadata":{"name":"web"},"spec":{"template":{"spec":{"containers":[{},{},{}]}}}}`))
		},
		want: decision{Code: 413, Message: "Deployment.apps ns/web: spec.template.spec.containers has 3 entries, more than the webhook's limit of 2 (Options.ObjectLimits.MaxContainers)"},
	}, {
		name: "more env than the limit is a 413 naming it",
		req: func(t *testing.T) *admissionv1.AdmissionRequest {
			return deploymentRequest(admissionv1.Create, "ns", "web", []byte(`{"metadata":{"name":"web"},"spec":{"template":{"spec":{"initContainers":[{"env":[{},{},{},{}]}]}}}}`))
		},
		want: decision{Code: 413, Message: "Deployment.apps ns/web: the env or envFrom of a container of spec.template.spec has 4 entries, more than the webhook's limit of 3 (Options.ObjectLimits.MaxEnv)"},
	}, {
		name: "deeper than the limit is a 413 naming it",
		req: func(t *testing.T) *admissionv1.AdmissionRequest {
			return deploymentRequest(admissionv1.Create, "ns", "web", []byte(`{"metadata":{"name":"web"},"x":[[[[[[[[[[]]]]]]]]]]}`))
		},
		want: decision{Code: 413, Message: "Deployment.apps ns/web: decode spec.template workload: at offset 40: JSON nested too deep: more than 10 levels (Options.ObjectLimits.MaxDepth)"},
	}, {
		name: "a patch larger than the limit is a 413 naming the bindings",
		req: func(t *testing.T) *admissionv1.AdmissionRequest {
			return deploymentRequest(admissionv1.Create, "ns", "big", deploymentJSON(t, "ns", "big", nil))
		},
		want: decision{Code: 413, Message: "binding ns/big: Deployment.apps ns/big: patch of 146 bytes exceeds the limit of 140 bytes (Options.ObjectLimits.MaxPatchBytes)"},
	}, {
		name: "a BindableContext error denies and names the binding",
		req: func(t *testing.T) *admissionv1.AdmissionRequest {
			return deploymentRequest(admissionv1.Create, "ns", "broken", deploymentJSON(t, "ns", "broken", nil))
		},
		want: decision{Code: 403, Message: "binding ns/failing: secret missing"},
	}, {
		name: "a panicking Do refuses the subject and names the binding, the subject and the value",
		req: func(t *testing.T) *admissionv1.AdmissionRequest {
			return deploymentRequest(admissionv1.Create, "ns", "bomb", deploymentJSON(t, "ns", "bomb", nil))
		},
		want: decision{Code: 500, Message: "binding ns/panicking: Do panicked on subject Deployment.apps ns/bomb: boom in Do"},
	}}

	a := &admitter{
		excludedNamespaces: []string{"bindkit-system"},
		withContext: func(ctx context.Context, b Bindable) (context.Context, error) {
			if b.GetName() == "failing" {
				return nil, errors.New("secret missing")
			}
			return ctx, nil
		},
	}
	if errs := a.setIndex(bindings); len(errs) > 0 {
		t.Fatalf("setIndex: %v", errs)
	}
	ctx := webhook.WithObjectLimits(context.Background(), webhook.ObjectLimits{MaxContainers: 2, MaxEnv: 3, MaxDepth: 10, MaxPatchBytes: 140})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := decide(a.admit(ctx, tc.req(t)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("admit (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAdmitBeforeFirstIndexIsUnavailable(t *testing.T) {
	var a admitter
	got := decide(a.admit(context.Background(), deploymentRequest(admissionv1.Create, "ns", "web", []byte("{}"))))
	want := decision{Code: 503, Message: "bindings not listed yet"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("admit before setIndex (-want +got):\n%s", diff)
	}
}

// TestAdmitSamePatchInAnyListOrder keeps the webhook from fighting the
// reconciler: two Bindings on one subject give one patch whatever order
// they are listed in.
func TestAdmitSamePatchInAnyListOrder(t *testing.T) {
	one := newEnvBinding("ns", "one", deploymentRef("ns", "web", nil), "SHARED", "from-one")
	two := newEnvBinding("ns", "two", deploymentRef("ns", "web", nil), "SHARED", "from-two")
	raw := deploymentJSON(t, "ns", "web", nil)
	var patches []string
	for _, order := range [][]Bindable{{one, two}, {two, one}} {
		var a admitter
		a.setIndex(order)
		patches = append(patches, string(a.admit(context.Background(), deploymentRequest(admissionv1.Create, "ns", "web", raw)).Patch))
	}
	if patches[0] != patches[1] {
		t.Errorf("patch depends on list order:\n%s\n%s", patches[0], patches[1])
	}
	if want := `[{"op":"add","path":"/spec/template/spec/containers/0/env","value":[{"name":"SHARED","value":"from-two"}]}]`; patches[0] != want {
		t.Errorf("patch = %s, want %s", patches[0], want)
	}
}
