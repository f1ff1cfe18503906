package duck_test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "sigs.k8s.io/json"

	"github.com/bindkit/bindkit/duck"
)

// clientGoList decodes a LIST response as client-go's dynamic client does.
func clientGoList(data []byte) (*unstructured.UnstructuredList, error) {
	obj, err := runtime.Decode(unstructured.UnstructuredJSONScheme, data)
	if err != nil {
		return nil, err
	}
	list, ok := obj.(*unstructured.UnstructuredList)
	if !ok {
		return nil, fmt.Errorf("decoded a %T, not a list", obj)
	}
	return list, nil
}

func deploymentPage(t testing.TB, n int) []byte {
	t.Helper()
	list := &appsv1.DeploymentList{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DeploymentList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "next"}}
	for i := range n {
		d := realisticDeployment()
		d.Name = fmt.Sprintf("d-%03d", i)
		list.Items = append(list.Items, *d)
	}
	raw, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// TestDecodeListAsClientGo checks that DecodeList gives what client-go's
// dynamic client decodes from the same page.
func TestDecodeListAsClientGo(t *testing.T) {
	for _, tc := range []struct {
		name string
		page []byte
	}{
		{"a page of Deployments, items without kinds", deploymentPage(t, 3)},
		{"empty", []byte(`{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"7"},"items":[]}`)},
		{"items null", []byte(`{"apiVersion":"v1","kind":"PodList","metadata":{},"items":null}`)},
		{"an item null", []byte(`{"apiVersion":"v1","kind":"PodList","items":[null]}`)},
		{"items with their own kinds", []byte(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"a"}}]}`)},
		{"numbers", []byte(`{"apiVersion":"x/v1","kind":"WidgetList","items":[{"spec":{"int":3,"float":1.5,"big":9007199254740993,"exp":1e3,"neg":-0}}]}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := clientGoList(tc.page)
			if err != nil {
				t.Fatalf("client-go: %v", err)
			}
			got, err := duck.DecodeList(tc.page)
			if err != nil {
				t.Fatalf("DecodeList: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("DecodeList (-client-go +got):\n%s", diff)
			}
		})
	}
}

// TestDecodeRawListAsDecodeList checks that each item of DecodeRawList is
// its item of DecodeList, read as JSON, with its name, and that the page's
// kinds and continue token are those of DecodeList's.
func TestDecodeRawListAsDecodeList(t *testing.T) {
	for _, tc := range []struct {
		name string
		page []byte
	}{
		{"a page of Deployments, items without kinds", deploymentPage(t, 3)},
		{"empty, the last page", []byte(`{"apiVersion":"v1","kind":"PodList","metadata":{"resourceVersion":"7"},"items":[]}`)},
		{"a page with a continue token", []byte(`{"apiVersion":"x/v1","kind":"WidgetList","metadata":{"continue":"abc"},"items":[{"metadata":{"name":"w"},"spec":{"int":3,"big":9007199254740993}}]}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := duck.DecodeList(tc.page)
			if err != nil {
				t.Fatal(err)
			}
			got, err := duck.DecodeRawList(tc.page)
			if err != nil {
				t.Fatalf("DecodeRawList: %v", err)
			}
			if got.APIVersion != want.GetAPIVersion() || got.Kind+"List" != want.GetKind() || got.Continue != want.GetContinue() || len(got.Items) != len(want.Items) {
				t.Fatalf("DecodeRawList: %s %s continue %q, %d items; DecodeList: %s %s continue %q, %d items",
					got.APIVersion, got.Kind, got.Continue, len(got.Items), want.GetAPIVersion(), want.GetKind(), want.GetContinue(), len(want.Items))
			}
			for i, item := range got.Items {
				var obj map[string]any
				if err := kjson.UnmarshalCaseSensitivePreserveInts(item.JSON, &obj); err != nil {
					t.Fatal(err)
				}
				u := unstructured.Unstructured{Object: obj}
				if u.GetKind() == "" {
					u.SetKind(got.Kind)
					u.SetAPIVersion(got.APIVersion)
				}
				if diff := cmp.Diff(want.Items[i], u); diff != "" || item.Name != want.Items[i].GetName() {
					t.Errorf("item %d, named %q (-DecodeList +DecodeRawList):\n%s", i, item.Name, diff)
				}
			}
		})
	}
	for _, page := range []string{``, `[]`, `{"items":[]}`, `{"kind":"L","items":[{"metadata":{}}]}`, `{"kind":"L","items":[{"metadata":{"name":7}}]}`, `{"kind":"L","items":[{"a":}]}`} {
		if _, err := duck.DecodeRawList([]byte(page)); err == nil {
			t.Errorf("DecodeRawList(%q): no error", page)
		}
	}
}

// TestDecodeListRefusesWhatIsNotAList checks that malformed pages are an
// error naming what could not be read, never a panic.
func TestDecodeListRefusesWhatIsNotAList(t *testing.T) {
	for _, page := range []string{``, `[]`, `{"kind":"L","items":{}}`, `{"kind":"L","items":[1]}`, `{"kind":"L","items":[{"a":}]}`, `{"kind":"L","metadata":"x","items":[]}`, `{"items":[{"a":1}]}`} {
		if _, err := duck.DecodeList([]byte(page)); err == nil {
			t.Errorf("DecodeList(%q): no error", page)
		}
	}
}

// FuzzDecodeList checks, for any bytes, that DecodeList does not panic
// and, wherever client-go decodes a list from them whose top level holds
// only what a kube-apiserver sends (apiVersion and kind strings, metadata
// an object, items), that DecodeList decodes the same list.
func FuzzDecodeList(f *testing.F) {
	f.Add(deploymentPage(f, 2))
	f.Add([]byte(`{"apiVersion":"v1","kind":"PodList","items":[null,{"kind":"Pod"},{"apiVersion":"v1"}]}`))
	f.Add([]byte(`{"kind":"WidgetList","items":[{"a":[1,2.5,{"b":null}]}],"metadata":{"continue":"c"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := duck.DecodeList(data)
		want, wantErr := clientGoList(data)
		if wantErr != nil || !asAPIServerSends(data) {
			return
		}
		if err != nil {
			t.Fatalf("DecodeList: %v; client-go decoded %v", err, want)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("DecodeList (-client-go +got):\n%s", diff)
		}
	})
}

// asAPIServerSends reports whether data's top level holds only what a
// LIST response of a kube-apiserver holds, each of its type.
func asAPIServerSends(data []byte) bool {
	var top map[string]any
	if json.Unmarshal(data, &top) != nil || top == nil {
		return false
	}
	if _, ok := top["items"]; !ok {
		return false
	}
	for k, v := range top {
		switch k {
		case "apiVersion", "kind":
			if _, ok := v.(string); !ok {
				return false
			}
		case "metadata":
			if _, ok := v.(map[string]any); !ok {
				return false
			}
		case "items":
		default:
			return false
		}
	}
	return true
}

// TestNewDynamicClientListsAsClientGoWithRealAPIServer lists Deployments
// page by page through NewDynamicClient and through client-go's dynamic
// client, and checks that every page holds the same items.
func TestNewDynamicClientListsAsClientGoWithRealAPIServer(t *testing.T) {
	c := newCluster(t)
	ctx := t.Context()
	for i := range 5 {
		d := realisticDeployment()
		d.Name, d.Namespace, d.ResourceVersion, d.UID = fmt.Sprintf("paged-%d", i), c.ns, "", ""
		d.Labels = map[string]string{"paged": c.ns}
		if _, err := c.kube.AppsV1().Deployments(c.ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	paged, err := duck.NewDynamicClient(c.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	deployments := appsv1.SchemeGroupVersion.WithResource("deployments")
	for name, lister := range map[string]func(opts metav1.ListOptions) (*unstructured.UnstructuredList, error){
		"namespaced": func(opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
			return paged.Resource(deployments).Namespace(c.ns).List(ctx, opts)
		},
		"all namespaces": func(opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
			return paged.Resource(deployments).List(ctx, opts)
		},
	} {
		t.Run(name, func(t *testing.T) {
			opts := metav1.ListOptions{Limit: 2, LabelSelector: "paged=" + c.ns}
			var items int
			for page := 1; ; page++ {
				got, err := lister(opts)
				if err != nil {
					t.Fatalf("page %d: %v", page, err)
				}
				want, err := c.dynamic.Resource(deployments).Namespace(c.ns).List(ctx, opts)
				if name == "all namespaces" {
					want, err = c.dynamic.Resource(deployments).List(ctx, opts)
				}
				if err != nil {
					t.Fatalf("page %d, client-go: %v", page, err)
				}
				if diff := cmp.Diff(want.Items, got.Items); diff != "" {
					t.Errorf("page %d items (-client-go +NewDynamicClient):\n%s", page, diff)
				}
				if got.GetKind() != "DeploymentList" || got.GetAPIVersion() != "apps/v1" || (got.GetContinue() == "") != (want.GetContinue() == "") {
					t.Errorf("page %d: %s %s continue %q, client-go's continue %q", page, got.GetAPIVersion(), got.GetKind(), got.GetContinue(), want.GetContinue())
				}
				if raw, ok := paged.Resource(deployments).Namespace(c.ns).(duck.RawLister); name == "namespaced" && ok {
					rl, err := raw.ListRaw(ctx, opts)
					if err != nil {
						t.Fatalf("page %d, ListRaw: %v", page, err)
					}
					var names, wantNames []string
					for _, item := range rl.Items {
						names = append(names, item.Name)
					}
					for _, item := range want.Items {
						wantNames = append(wantNames, item.GetName())
					}
					if diff := cmp.Diff(wantNames, names); diff != "" || rl.Kind != "Deployment" || rl.APIVersion != "apps/v1" || (rl.Continue == "") != (want.GetContinue() == "") {
						t.Errorf("page %d, ListRaw: %s %s continue %q; names (-client-go +ListRaw):\n%s", page, rl.APIVersion, rl.Kind, rl.Continue, diff)
					}
				} else if name == "namespaced" {
					t.Error("NewDynamicClient's namespaced resource is no duck.RawLister")
				}
				items += len(got.Items)
				if opts.Continue = got.GetContinue(); opts.Continue == "" {
					break
				}
			}
			if items != 5 {
				t.Errorf("listed %d Deployments, want 5", items)
			}
		})
	}
	if _, err := paged.Resource(deployments).Namespace("../x").List(ctx, metav1.ListOptions{}); err == nil {
		t.Error("a namespace with a slash: no error")
	}
}

// BenchmarkDecodeList decodes a LIST page of 100 realistic Deployments
// (duck.DecodeList against client-go's dynamic client's decoding) and,
// with read=pod, reads each item's pod template (Shape.FromUnstructured),
// and with read=guard also guards a Binding's patch of it (duck.Guard), as
// a reconciler binding a selector's subjects did; impl=raw is what it does
// now: DecodeRawList, each item's template decoded from its JSON
// (Shape.Decode) and the patch guarded from the JSON (duck.GuardJSON).
func BenchmarkDecodeList(b *testing.B) {
	page := deploymentPage(b, 100)
	shape := duck.PodSpecable()
	// A Binding's change: an env var in each container, a volume, its
	// mount in each container, the bound record.
	first, err := shape.Decode(func() []byte { l, _ := duck.DecodeRawList(page); return l.Items[0].JSON }())
	if err != nil {
		b.Fatal(err)
	}
	changed := first.DeepCopy()
	spec := &changed.Spec.Template.Spec
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "t"}}})
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.Env = append(c.Env, corev1.EnvVar{Name: "TOKEN", Value: "/var/run/token"})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "token", MountPath: "/var/run/token"})
	}
	changed.Annotations = map[string]string{duck.BoundAnnotation: "x"}
	ops, err := shape.CreatePatch(first, changed)
	if err != nil {
		b.Fatal(err)
	}
	for _, impl := range []struct {
		name   string
		decode func([]byte) (*unstructured.UnstructuredList, error)
	}{{"client-go", clientGoList}, {"bindkit", duck.DecodeList}, {"raw", nil}} {
		for _, read := range []string{"list", "pod", "guard"} {
			b.Run(fmt.Sprintf("impl=%s/read=%s", impl.name, read), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if impl.decode == nil {
						list, err := duck.DecodeRawList(page)
						if err != nil {
							b.Fatal(err)
						}
						for _, item := range list.Items {
							if read == "list" {
								break
							}
							if _, err := shape.Decode(item.JSON); err != nil {
								b.Fatal(err)
							}
							if read == "guard" {
								if _, err := duck.GuardJSON(item.JSON, ops); err != nil {
									b.Fatal(err)
								}
							}
						}
						continue
					}
					list, err := impl.decode(page)
					if err != nil {
						b.Fatal(err)
					}
					for i := range list.Items {
						if read == "list" {
							break
						}
						if _, err := shape.FromUnstructured(&list.Items[i]); err != nil {
							b.Fatal(err)
						}
						if read == "guard" {
							if _, err := duck.Guard(list.Items[i].Object, ops); err != nil {
								b.Fatal(err)
							}
						}
					}
				}
			})
		}
	}
}

// TestListRawReadsBuiltInKindsAsTheServersJSONWithRealAPIServer lists
// each built-in kind ListRaw reads as protobuf, with realistic pod
// templates, through NewDynamicClient and, at the same resourceVersion,
// as JSON through client-go's dynamic client. An item that came as its
// typed object must write the JSON the kube-apiserver sent for it, field
// for field (patches are guarded with that JSON), and give the WithPod
// its JSON gives. Against a kube-apiserver of the minor this build's
// types are from, every item must come typed: the protobuf read is the
// one in use. Against another minor, a page whose fields differ from the
// types' comes as JSON.
func TestListRawReadsBuiltInKindsAsTheServersJSONWithRealAPIServer(t *testing.T) {
	c := newCluster(t)
	ctx := t.Context()
	template := realisticDeployment().Spec.Template
	jobTemplate := *template.DeepCopy()
	jobTemplate.Spec.RestartPolicy = corev1.RestartPolicyNever
	selector := &metav1.LabelSelector{MatchLabels: template.Labels}
	suspend := true
	kinds := []struct {
		gvr    schema.GroupVersionResource
		shape  duck.Shape
		create func(name string) error
	}{
		{appsv1.SchemeGroupVersion.WithResource("deployments"), duck.PodSpecable(), func(name string) error {
			d := realisticDeployment()
			d.Name, d.Namespace, d.ResourceVersion, d.UID = name, c.ns, "", ""
			_, err := c.kube.AppsV1().Deployments(c.ns).Create(ctx, d, metav1.CreateOptions{})
			return err
		}},
		{appsv1.SchemeGroupVersion.WithResource("statefulsets"), duck.PodSpecable(), func(name string) error {
			_, err := c.kube.AppsV1().StatefulSets(c.ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.StatefulSetSpec{Replicas: new(int32(0)), Selector: selector, Template: template}}, metav1.CreateOptions{})
			return err
		}},
		{appsv1.SchemeGroupVersion.WithResource("daemonsets"), duck.PodSpecable(), func(name string) error {
			_, err := c.kube.AppsV1().DaemonSets(c.ns).Create(ctx, &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.DaemonSetSpec{Selector: selector, Template: template}}, metav1.CreateOptions{})
			return err
		}},
		{appsv1.SchemeGroupVersion.WithResource("replicasets"), duck.PodSpecable(), func(name string) error {
			_, err := c.kube.AppsV1().ReplicaSets(c.ns).Create(ctx, &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: appsv1.ReplicaSetSpec{Replicas: new(int32(0)), Selector: selector, Template: template}}, metav1.CreateOptions{})
			return err
		}},
		{batchv1.SchemeGroupVersion.WithResource("jobs"), duck.PodSpecable(), func(name string) error {
			_, err := c.kube.BatchV1().Jobs(c.ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batchv1.JobSpec{Suspend: &suspend, Template: jobTemplate}}, metav1.CreateOptions{})
			return err
		}},
		{batchv1.SchemeGroupVersion.WithResource("cronjobs"), duck.CronJob(), func(name string) error {
			_, err := c.kube.BatchV1().CronJobs(c.ns).Create(ctx, &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batchv1.CronJobSpec{Schedule: "@daily", Suspend: &suspend, JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: jobTemplate}}}}, metav1.CreateOptions{})
			return err
		}},
		{corev1.SchemeGroupVersion.WithResource("pods"), duck.Pod(), func(name string) error {
			_, err := c.kube.CoreV1().Pods(c.ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: template.Labels}, Spec: template.Spec}, metav1.CreateOptions{})
			return err
		}},
	}
	paged, err := duck.NewDynamicClient(c.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	sameMinor := c.env.KubeMinor() == typesMinor(t)
	for _, kind := range kinds {
		t.Run(kind.gvr.Resource, func(t *testing.T) {
			for i := range 3 {
				if err := kind.create(fmt.Sprintf("%s-%d", kind.gvr.Resource, i)); err != nil {
					t.Fatal(err)
				}
			}
			want, err := c.dynamic.Resource(kind.gvr).Namespace(c.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got, err := paged.Resource(kind.gvr).Namespace(c.ns).(duck.RawLister).ListRaw(ctx, metav1.ListOptions{ResourceVersion: want.GetResourceVersion(), ResourceVersionMatch: metav1.ResourceVersionMatchExact})
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Items) != len(want.Items) || len(got.Items) != 3 {
				t.Fatalf("ListRaw: %d items, client-go %d, want 3", len(got.Items), len(want.Items))
			}
			for i, item := range got.Items {
				if sameMinor && item.Object == nil {
					t.Errorf("%s: came as JSON from a kube-apiserver %s, the minor of this build's types", item.Name, c.env.KubeMinor())
				}
				raw, err := item.Bytes()
				if err != nil {
					t.Fatal(err)
				}
				var obj map[string]any
				if err := json.Unmarshal(raw, &obj); err != nil {
					t.Fatal(err)
				}
				server := want.Items[i].DeepCopy()
				unstructured.RemoveNestedField(server.Object, "apiVersion")
				unstructured.RemoveNestedField(server.Object, "kind")
				if diff := cmp.Diff(jsonValues(t, server.Object), obj); diff != "" {
					t.Errorf("%s: JSON (-the kube-apiserver's +ListRaw's):\n%s", item.Name, diff)
				}
				serverJSON, err := json.Marshal(server.Object)
				if err != nil {
					t.Fatal(err)
				}
				wantPod, wantErr := kind.shape.Decode(serverJSON)
				gotPod, err := kind.shape.Decode(raw)
				if item.Object != nil {
					gotPod, err = kind.shape.FromObject(item.Object)
				}
				if (err != nil) != (wantErr != nil) {
					t.Fatalf("%s: %v, from the kube-apiserver's JSON: %v", item.Name, err, wantErr)
				}
				if diff := cmp.Diff(wantPod, gotPod); diff != "" {
					t.Errorf("%s: pod (-from the kube-apiserver's JSON +from ListRaw):\n%s", item.Name, diff)
				}
			}
		})
	}
}

// typesMinor is the minor of Kubernetes that this module's k8s.io/api is
// from (its go.mod's requirement): v0.37.2 is 1.37.
func typesMinor(t *testing.T) string {
	t.Helper()
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/api v0\.(\d+)\.`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod does not require k8s.io/api v0.x")
	}
	return "1." + string(m[1])
}

// jsonValues is v as encoding/json decodes its JSON (int64s as float64s).
func jsonValues(t *testing.T, v any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
