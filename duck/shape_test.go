package duck_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/bindkit/bindkit/duck"
)

func TestShapeDecodeAndFromUnstructuredAgree(t *testing.T) {
	deployment := realisticDeployment()
	wantTemplate := toMap(t, deployment.Spec.Template)
	tests := []struct {
		name  string
		shape duck.Shape
		doc   func(testing.TB) map[string]any
		path  string
		kind  string
	}{
		{"deployment", duck.PodSpecable(), deploymentDoc, "spec.template", "Deployment"},
		{"zero shape is podspecable", duck.Shape{}, deploymentDoc, "spec.template", "Deployment"},
		{"cronjob", duck.CronJob(), cronJobDoc, "spec.jobTemplate.spec.template", "CronJob"},
		{"custom", duck.TemplateAt("spec", "workload", "template"), customDoc, "spec.workload.template", "Workload"},
		{"pod", duck.Pod(), podDoc, "pod", "Pod"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.shape.String(); got != tt.path {
				t.Errorf("String() = %q, want %q", got, tt.path)
			}
			doc := tt.doc(t)
			fromJSON, err := tt.shape.Decode(mustJSON(t, doc))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			fromU, err := tt.shape.FromUnstructured(&unstructured.Unstructured{Object: doc})
			if err != nil {
				t.Fatalf("FromUnstructured: %v", err)
			}
			if diff := cmp.Diff(toMap(t, fromJSON), toMap(t, fromU)); diff != "" {
				t.Errorf("Decode and FromUnstructured differ (-Decode +FromUnstructured):\n%s", diff)
			}
			if fromJSON.Kind != tt.kind || fromJSON.Name == "" {
				t.Errorf("decoded kind %q name %q, want kind %q and a name", fromJSON.Kind, fromJSON.Name, tt.kind)
			}
			got := toMap(t, fromJSON.Spec.Template)
			// Every fixture's template is the Deployment's (a CronJob's with
			// its own restartPolicy); a Pod's template metadata is its own.
			ignoreRestartPolicy := cmpopts.IgnoreMapEntries(func(k string, _ any) bool { return k == "restartPolicy" })
			if diff := cmp.Diff(wantTemplate["spec"], got["spec"], ignoreRestartPolicy); diff != "" {
				t.Errorf("template spec (-want +got):\n%s", diff)
			}
			wantMeta := wantTemplate["metadata"]
			if tt.shape.Path() == nil {
				wantMeta = doc["metadata"]
			}
			if diff := cmp.Diff(wantMeta, got["metadata"]); diff != "" {
				t.Errorf("template metadata (-want +got):\n%s", diff)
			}
		})
	}
}

func TestShapeMissingAndMalformedTemplate(t *testing.T) {
	shape := duck.TemplateAt("spec", "workload", "template")
	base := func(spec any) map[string]any {
		return map[string]any{"apiVersion": "example.bindkit.dev/v1", "kind": "Workload",
			"metadata": map[string]any{"name": "w", "namespace": "ns"}, "spec": spec}
	}
	// What each conversion says: "" for a zero template, "none" for
	// ErrNoPodTemplate, "error" for another error.
	tests := []struct {
		name                     string
		doc                      map[string]any
		decode, fromUnstructured string
	}{
		{"missing template", base(map[string]any{"workload": map[string]any{}}), "", "none"},
		{"missing parent", base(map[string]any{}), "", "none"},
		{"null template", base(map[string]any{"workload": map[string]any{"template": nil}}), "", "none"},
		{"parent not an object", base(map[string]any{"workload": "oops"}), "error", "error"},
		{"template not an object", base(map[string]any{"workload": map[string]any{"template": 3}}), "error", "error"},
	}
	outcome := func(w *duck.WithPod, err error) string {
		switch {
		case errors.Is(err, duck.ErrNoPodTemplate):
			return "none"
		case err != nil:
			return "error"
		case w.Name != "w" || len(w.Spec.Template.Spec.Containers) != 0:
			return fmt.Sprintf("name %q with %d containers", w.Name, len(w.Spec.Template.Spec.Containers))
		}
		return ""
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := outcome(shape.Decode(mustJSON(t, tt.doc))); got != tt.decode {
				t.Errorf("Decode: %q, want %q", got, tt.decode)
			}
			if got := outcome(shape.FromUnstructured(&unstructured.Unstructured{Object: tt.doc})); got != tt.fromUnstructured {
				t.Errorf("FromUnstructured: %q, want %q", got, tt.fromUnstructured)
			}
		})
	}
}

func TestShapeApply(t *testing.T) {
	tests := []struct {
		name  string
		shape duck.Shape
		doc   func(testing.TB) map[string]any
	}{
		{"deployment", duck.PodSpecable(), deploymentDoc},
		{"cronjob", duck.CronJob(), cronJobDoc},
		{"custom", duck.TemplateAt("spec", "workload", "template"), customDoc},
		{"pod", duck.Pod(), podDoc},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: tt.doc(t)}
			w, err := tt.shape.FromUnstructured(u)
			if err != nil {
				t.Fatal(err)
			}
			addEnv(&w.Spec.Template.Spec.Containers[0], "BOUND", "1")
			w.Spec.Template.Labels["bound"] = "yes"
			if err := tt.shape.Apply(w, u); err != nil {
				t.Fatalf("Apply: %v", err)
			}
			back, err := tt.shape.FromUnstructured(u)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(toMap(t, canonical(tt.shape, w)), toMap(t, canonical(tt.shape, back))); diff != "" {
				t.Errorf("after Apply (-applied +read back):\n%s", diff)
			}
			if _, ok := u.Object["spec"].(map[string]any)["x-unknown"]; !ok && tt.name != "pod" && tt.name != "cronjob" {
				t.Errorf("Apply dropped spec.x-unknown")
			}
		})
	}
}

func TestShapesFor(t *testing.T) {
	workload := schema.GroupKind{Group: "example.bindkit.dev", Kind: "Workload"}
	var builtin duck.Shapes
	extended := builtin.With(workload, duck.TemplateAt("spec", "workload", "template")).
		With(schema.GroupKind{Kind: "Pod"}, duck.PodSpecable())
	tests := []struct {
		shapes duck.Shapes
		gk     schema.GroupKind
		want   string
	}{
		{builtin, schema.GroupKind{Group: "apps", Kind: "Deployment"}, "spec.template"},
		{builtin, schema.GroupKind{Group: "batch", Kind: "Job"}, "spec.template"},
		{builtin, schema.GroupKind{Group: "batch", Kind: "CronJob"}, "spec.jobTemplate.spec.template"},
		{builtin, schema.GroupKind{Kind: "Pod"}, "pod"},
		{builtin, workload, "spec.template"},
		{extended, workload, "spec.workload.template"},
		{extended, schema.GroupKind{Kind: "Pod"}, "spec.template"},
		{extended, schema.GroupKind{Group: "batch", Kind: "CronJob"}, "spec.jobTemplate.spec.template"},
	}
	for _, tt := range tests {
		if got := tt.shapes.For(tt.gk).String(); got != tt.want {
			t.Errorf("For(%v) = %q, want %q", tt.gk, got, tt.want)
		}
	}
	if got := builtin.For(workload).String(); got != "spec.template" {
		t.Errorf("With changed the Shapes it was called on: For(%v) = %q", workload, got)
	}
}

func TestTemplateAtNormalizes(t *testing.T) {
	tests := []struct {
		path []string
		want string
	}{
		{nil, "pod"},
		{[]string{"spec", "template"}, "spec.template"},
		{[]string{"spec", "a/b", "template"}, "spec.a/b.template"},
	}
	for _, tt := range tests {
		s := duck.TemplateAt(tt.path...)
		if got := s.String(); got != tt.want {
			t.Errorf("TemplateAt(%q) = %q, want %q", tt.path, got, tt.want)
		}
		if diff := cmp.Diff(tt.path, s.Path()); diff != "" {
			t.Errorf("TemplateAt(%q).Path() (-want +got):\n%s", tt.path, diff)
		}
	}
}
