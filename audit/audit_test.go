package audit_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/bindkit/bindkit/audit"
	"github.com/bindkit/bindkit/duck"
)

var (
	deployments = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	sinks       = schema.GroupVersionResource{Group: "bindings.example.com", Version: "v1", Resource: "sinkbindings"}
)

func deployment(name string, annotations map[string]string, env ...any) *unstructured.Unstructured {
	container := map[string]any{"name": "app", "image": "app:1"}
	if len(env) > 0 {
		container["env"] = env
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"namespace": "ns", "name": name, "annotations": toAny(annotations)},
		"spec":     map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{container}}}},
	}}
}

func toAny(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// sinkBinding is a declarative Binding at generation gen that published
// the Spec setting K_SINK=url at published.
func sinkBinding(name, uid string, gen, published int64, url string, rollout map[string]any) *unstructured.Unstructured {
	status := map[string]any{
		"declaredGeneration": published,
		"declared":           map[string]any{"env": []any{map[string]any{"name": "K_SINK", "value": url}}},
	}
	if rollout != nil {
		status["rollout"] = rollout
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "bindings.example.com/v1", "kind": "SinkBinding",
		"metadata": map[string]any{"namespace": "ns", "name": name, "uid": uid, "generation": gen},
		"status":   status,
	}}
}

func TestRun(t *testing.T) {
	sinkEnv := map[string]any{"name": "K_SINK", "value": "https://a"}
	tests := []struct {
		name    string
		objects []runtime.Object
		want    []string // problem: detail of each finding
	}{{
		name: "records that are the truth",
		objects: []runtime.Object{
			sinkBinding("sb", "u1", 2, 2, "https://a", map[string]any{"generation": int64(2), "updated": int64(1), "total": int64(1)}),
			deployment("web", map[string]string{
				duck.BoundAnnotation:   "sinkbindings.bindings.example.com/sb@u1:2",
				duck.RolloutAnnotation: "sinkbindings.bindings.example.com/sb@u1:2:1:1700000000",
			}, sinkEnv),
		},
	}, {
		name: "a Binding that is gone, and one re-created under its name",
		objects: []runtime.Object{
			sinkBinding("again", "u2", 1, 1, "https://a", nil),
			deployment("web", map[string]string{
				duck.BoundAnnotation:   "sinkbindings.bindings.example.com/gone@u0:3,sinkbindings.bindings.example.com/again@u1:1",
				duck.RolloutAnnotation: "sinkbindings.bindings.example.com/gone@u0:3:1:1",
			}, sinkEnv),
		},
		want: []string{
			"BindingGone: records of a Binding that is gone: the Binding of that name has UID u2, not u1: it was deleted and created again",
			"BindingGone: records of a Binding that is gone: no such Binding",
		},
	}, {
		name: "two Bindings set one variable: the last to bind wins, both records are the truth",
		objects: []runtime.Object{
			sinkBinding("first", "u1", 1, 1, "https://b", nil),
			sinkBinding("second", "u2", 1, 1, "https://a", nil),
			deployment("web", map[string]string{duck.BoundAnnotation: "sinkbindings.bindings.example.com/first@u1:1,sinkbindings.bindings.example.com/second@u2:1"}, sinkEnv),
		},
	}, {
		name: "a Binding not published yet may be the one whose value the subject carries: no finding",
		objects: []runtime.Object{
			sinkBinding("first", "u1", 1, 1, "https://b", nil),
			sinkBinding("second", "u2", 1, 0, "", nil),
			deployment("web", map[string]string{duck.BoundAnnotation: "sinkbindings.bindings.example.com/first@u1:1,sinkbindings.bindings.example.com/second@u2:1"}, sinkEnv),
		},
	}, {
		name: "a generation ahead, content that disagrees",
		objects: []runtime.Object{
			sinkBinding("sb", "u1", 2, 2, "https://b", nil),
			deployment("ahead", map[string]string{duck.BoundAnnotation: "sinkbindings.bindings.example.com/sb@u1:5"}, sinkEnv),
			deployment("stale", map[string]string{duck.BoundAnnotation: "sinkbindings.bindings.example.com/sb@u1:2"}, sinkEnv),
		},
		want: []string{
			"GenerationAhead: records generation 5; the Binding is at 2",
			"ContentDisagrees: records generation 2 but does not carry its change: Do would change /spec/template/spec/containers/0/env/0/value",
		},
	}, {
		name: "a rollback of a generation not carried, a hold a complete rollout should have lifted",
		objects: []runtime.Object{
			sinkBinding("sb", "u1", 3, 3, "https://a", map[string]any{"generation": int64(3), "updated": int64(1), "total": int64(1)}),
			deployment("web", map[string]string{
				duck.BoundAnnotation:    "sinkbindings.bindings.example.com/sb@u1:3",
				duck.RollbackAnnotation: `{"sinkbindings.bindings.example.com/sb@u1:2":{"patch":[]}}`,
				duck.HeldAnnotation:     "sinkbindings.bindings.example.com/sb@u1:2",
			}, sinkEnv),
		},
		want: []string{
			"StaleHold: held from generation 2, but the rollout of generation 3 is complete",
			"StaleRollback: undoes generation 2, which the subject does not carry",
		},
	}, {
		name: "records of a newer format: left alone, but gone with their Binding",
		objects: []runtime.Object{
			sinkBinding("sb", "u1", 2, 2, "https://a", nil),
			deployment("web", map[string]string{
				duck.BoundAnnotation:   "sinkbindings.bindings.example.com/sb@u1:v2;2;x,sinkbindings.bindings.example.com/gone@u0:v2;1",
				duck.RolloutAnnotation: "sinkbindings.bindings.example.com/sb@u1:v2;2;1;1700000000",
			}, sinkEnv),
		},
		want: []string{
			"BindingGone: records of a Binding that is gone: no such Binding",
			"NewerFormat: written in a newer record format than this bindkit's (1), which it leaves alone: audit with the bindkit that wrote it",
		},
	}, {
		name:    "unreadable",
		objects: []runtime.Object{deployment("web", map[string]string{duck.RollbackAnnotation: "sinkbindings.bindings.example.com/sb:2 [{}]"})},
		want:    []string{"UnreadableRecord: annotation bindings.bindkit.dev/rollback: invalid character 's' looking for beginning of value"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme, map[schema.GroupVersionResource]string{
				deployments: "DeploymentList", sinks: "SinkBindingList",
			}, tc.objects...)
			mapper := meta.NewDefaultRESTMapper(nil)
			mapper.Add(deployments.GroupVersion().WithKind("Deployment"), meta.RESTScopeNamespace)
			mapper.Add(sinks.GroupVersion().WithKind("SinkBinding"), meta.RESTScopeNamespace)
			findings, err := audit.Run(context.Background(), audit.Options{Dynamic: client, Mapper: mapper, Subjects: []schema.GroupVersionResource{deployments}})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range findings {
				got = append(got, f.Problem+": "+f.Detail)
				if (f.FixCommand == "" || len(f.Fix) == 0) && f.Problem != audit.ProblemNewerFormat {
					t.Errorf("%v: no fix", f)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFixMakesTheRecordTheTruth applies each finding's fix and audits
// again: nothing is left.
func TestFixMakesTheRecordTheTruth(t *testing.T) {
	objects := []runtime.Object{
		sinkBinding("sb", "u1", 2, 2, "https://b", map[string]any{"generation": int64(2), "updated": int64(1), "total": int64(1)}),
		deployment("web", map[string]string{
			duck.BoundAnnotation:    "sinkbindings.bindings.example.com/sb@u1:2,sinkbindings.bindings.example.com/gone@u0:1",
			duck.RolloutAnnotation:  "sinkbindings.bindings.example.com/gone@u0:1:1:1",
			duck.RollbackAnnotation: `{"sinkbindings.bindings.example.com/gone@u0:1":{"patch":[]}}`,
			duck.HeldAnnotation:     "sinkbindings.bindings.example.com/sb@u1:1",
			"kept":                  "yes",
		}),
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		deployments: "DeploymentList", sinks: "SinkBindingList",
	}, objects...)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(deployments.GroupVersion().WithKind("Deployment"), meta.RESTScopeNamespace)
	mapper.Add(sinks.GroupVersion().WithKind("SinkBinding"), meta.RESTScopeNamespace)
	opts := audit.Options{Dynamic: client, Mapper: mapper, Subjects: []schema.GroupVersionResource{deployments}}
	ctx := context.Background()
	findings, err := audit.Run(ctx, opts)
	if err != nil || len(findings) == 0 {
		t.Fatalf("findings %v, %v", findings, err)
	}
	for _, f := range findings {
		if err := audit.Apply(ctx, client, f); err != nil {
			t.Fatalf("%v: %v", f, err)
		}
	}
	if again, err := audit.Run(ctx, opts); err != nil || len(again) != 0 {
		t.Errorf("after the fixes: %v, %v", again, err)
	}
	got, err := client.Resource(deployments).Namespace("ns").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"kept": "yes"}, got.GetAnnotations()); diff != "" {
		t.Errorf("annotations after the fixes (-want +got):\n%s", diff)
	}
}

// TestFixLeavesNewerRecords: the fixes of a subject's findings keep the
// records of a newer format of Bindings that exist, and a newer record
// alone needs no fix.
func TestFixLeavesNewerRecords(t *testing.T) {
	newer := "sinkbindings.bindings.example.com/sb@u1:v2;2;x"
	objects := []runtime.Object{
		sinkBinding("sb", "u1", 2, 2, "https://a", nil),
		deployment("web", map[string]string{
			duck.BoundAnnotation: newer + ",sinkbindings.bindings.example.com/gone@u0:1,unreadable",
			duck.HeldAnnotation:  "sinkbindings.bindings.example.com/sb@u1:v2;1,x",
		}),
		deployment("alone", map[string]string{duck.BoundAnnotation: newer}),
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		deployments: "DeploymentList", sinks: "SinkBindingList",
	}, objects...)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(deployments.GroupVersion().WithKind("Deployment"), meta.RESTScopeNamespace)
	mapper.Add(sinks.GroupVersion().WithKind("SinkBinding"), meta.RESTScopeNamespace)
	opts := audit.Options{Dynamic: client, Mapper: mapper, Subjects: []schema.GroupVersionResource{deployments}}
	ctx := context.Background()
	findings, err := audit.Run(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		if err := audit.Apply(ctx, client, f); err != nil {
			t.Fatalf("%v: %v", f, err)
		}
	}
	again, err := audit.Run(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	for _, f := range again {
		problems = append(problems, f.Subject+" "+f.Problem)
		if len(f.Fix) != 0 {
			t.Errorf("%v: a fix of a record left alone", f)
		}
	}
	if diff := cmp.Diff([]string{"apps/v1 Deployment ns/alone NewerFormat", "apps/v1 Deployment ns/web NewerFormat"}, problems); diff != "" {
		t.Errorf("findings after the fixes (-want +got):\n%s", diff)
	}
	got, err := client.Resource(deployments).Namespace("ns").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{duck.BoundAnnotation: newer, duck.HeldAnnotation: "sinkbindings.bindings.example.com/sb@u1:v2;1"}
	if diff := cmp.Diff(want, got.GetAnnotations()); diff != "" {
		t.Errorf("annotations after the fixes (-want +got):\n%s", diff)
	}
}
