package duck_test

import (
	"errors"
	"reflect"
	"strings"
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
	custom := duck.TemplateAt("spec", "workload", "template")
	base := func(spec any) map[string]any {
		return map[string]any{"apiVersion": "example.bindkit.dev/v1", "kind": "Workload",
			"metadata": map[string]any{"name": "w", "namespace": "ns"}, "spec": spec}
	}
	const (
		ok = iota
		noTemplate
		otherError
	)
	tests := []struct {
		name    string
		shape   duck.Shape
		doc     map[string]any
		want    int
		wantMsg string
	}{
		{"missing template", custom, base(map[string]any{"workload": map[string]any{}}), noTemplate,
			"example.bindkit.dev/v1 Workload ns/w: no pod template at spec.workload.template"},
		{"missing parent", custom, base(map[string]any{}), noTemplate,
			"example.bindkit.dev/v1 Workload ns/w: no pod template at spec.workload.template"},
		{"null template", custom, base(map[string]any{"workload": map[string]any{"template": nil}}), noTemplate,
			"example.bindkit.dev/v1 Workload ns/w: no pod template at spec.workload.template"},
		{"spec.template missing", duck.PodSpecable(), base(map[string]any{"replicas": 1.0}), noTemplate,
			"example.bindkit.dev/v1 Workload ns/w: no pod template at spec.template"},
		{"spec.template null", duck.PodSpecable(), base(map[string]any{"template": nil}), noTemplate,
			"example.bindkit.dev/v1 Workload ns/w: no pod template at spec.template"},
		{"no spec at all", duck.PodSpecable(), base(nil), noTemplate,
			"example.bindkit.dev/v1 Workload ns/w: no pod template at spec.template"},
		{"empty template is a template", duck.PodSpecable(), base(map[string]any{"template": map[string]any{}}), ok, ""},
		// Something else than an object on the way: no pod template either,
		// and the message says what is there.
		{"parent not an object", custom, base(map[string]any{"workload": "oops"}), noTemplate,
			"example.bindkit.dev/v1 Workload ns/w: no pod template at spec.workload.template: "},
		{"template not an object", custom, base(map[string]any{"workload": map[string]any{"template": 3.0}}), noTemplate,
			"example.bindkit.dev/v1 Workload ns/w: no pod template at spec.workload.template: "},
		{"spec.template not an object", duck.PodSpecable(), base(map[string]any{"template": []any{}}), noTemplate,
			"example.bindkit.dev/v1 Workload ns/w: no pod template at spec.template: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for via, convert := range map[string]func() (*duck.WithPod, error){
				"Decode": func() (*duck.WithPod, error) { return tt.shape.Decode(mustJSON(t, tt.doc)) },
				"FromUnstructured": func() (*duck.WithPod, error) {
					return tt.shape.FromUnstructured(&unstructured.Unstructured{Object: tt.doc})
				},
			} {
				w, err := convert()
				switch tt.want {
				case ok:
					if err != nil {
						t.Fatalf("%s: %v", via, err)
					}
				case noTemplate:
					if !errors.Is(err, duck.ErrNoPodTemplate) {
						t.Fatalf("%s error = %v, want ErrNoPodTemplate", via, err)
					}
					if msg := err.Error(); msg != tt.wantMsg && !(strings.HasSuffix(tt.wantMsg, ": ") && strings.HasPrefix(msg, tt.wantMsg)) {
						t.Errorf("%s error = %q, want %q", via, err, tt.wantMsg)
					}
					if w == nil || w.Name != "w" || !reflect.ValueOf(w.Spec.Template).IsZero() {
						t.Errorf("%s = %+v, want the metadata and a zero template beside ErrNoPodTemplate", via, w)
					}
				case otherError:
					if err == nil || errors.Is(err, duck.ErrNoPodTemplate) {
						t.Fatalf("%s error = %v, want an error other than ErrNoPodTemplate", via, err)
					}
					if w != nil {
						t.Errorf("%s returned %+v beside its error", via, w)
					}
				}
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

func TestDecodeSkipsManagedFields(t *testing.T) {
	raw := []byte(`{"metadata":{"name":"w","managedFields":[{"manager":"kubectl","fieldsV1":{"f:spec":{}}}],"labels":{"a":"b"}},"spec":{"template":{}}}`)
	for name, shape := range map[string]duck.Shape{"spec.template": duck.PodSpecable(), "pod": duck.Pod(), "custom": duck.TemplateAt("spec", "template", "x")} {
		w, err := shape.Decode(raw)
		if err != nil && !errors.Is(err, duck.ErrNoPodTemplate) {
			t.Fatalf("%s: %v", name, err)
		}
		if w.ManagedFields != nil || w.Name != "w" || w.Labels["a"] != "b" {
			t.Errorf("%s: decoded metadata %+v, want name and labels without managedFields", name, w.ObjectMeta)
		}
	}
	if _, err := duck.PodSpecable().Decode([]byte(`{"metadata":{"managedFields":[],"managedFields":[]}}`)); err == nil || !strings.Contains(err.Error(), `duplicate field "managedFields"`) {
		t.Errorf("managedFields twice: %v, want a duplicate field", err)
	}
}
