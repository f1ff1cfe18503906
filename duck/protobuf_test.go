package duck

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// protobufPage encodes list as the kube-apiserver sends a LIST page in
// protobuf: the magic, then the envelope carrying the list, with extra
// appended to the list's bytes (fields the reader's types do not know).
func protobufPage(t testing.TB, apiVersion, kind string, list interface{ Marshal() ([]byte, error) }, extra []byte) []byte {
	t.Helper()
	payload, err := list.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	envelope := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: append(payload, extra...)}
	data, err := envelope.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append(bytes.Clone(protobufMagic), data...)
}

// unknownField is a protobuf field no Kubernetes list has (number 1000,
// a varint): what a newer server's field looks like to older types.
var unknownField = []byte{0xc0, 0x3e, 0x01}

func deploymentList(names ...string) *appsv1.DeploymentList {
	list := &appsv1.DeploymentList{ListMeta: metav1.ListMeta{ResourceVersion: "7", Continue: "next-page"}}
	for _, name := range names {
		list.Items = append(list.Items, appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: map[string]string{"app": name}},
			Spec:       appsv1.DeploymentSpec{Template: podTemplate(name)},
		})
	}
	return list
}

func TestDecodeProtobufPage(t *testing.T) {
	deployments, _ := protobufListOf(appsv1.SchemeGroupVersion.WithResource("deployments"))
	page := protobufPage(t, "apps/v1", "DeploymentList", deploymentList("a", "b"), nil)
	for _, tc := range []struct {
		name      string
		data      []byte
		wantNames []string
		wantExact bool
		wantErr   string
	}{
		{name: "a page", data: page, wantNames: []string{"a", "b"}, wantExact: true},
		{name: "an empty page", data: protobufPage(t, "apps/v1", "DeploymentList", deploymentList(), nil), wantExact: true},
		{name: "fields these types do not know", data: protobufPage(t, "apps/v1", "DeploymentList", deploymentList("a"), unknownField), wantNames: []string{"a"}},
		{name: "JSON", data: []byte(`{"kind":"DeploymentList"}`), wantErr: "not the kube-apiserver's protobuf encoding"},
		{name: "only the magic", data: protobufMagic, wantErr: "DeploymentList"},
		{name: "truncated", data: page[:len(page)-10], wantErr: "DeploymentList"},
		{name: "another kind", data: protobufPage(t, "apps/v1", "StatefulSetList", &appsv1.StatefulSetList{}, nil), wantErr: "the response is a apps/v1 StatefulSetList"},
		{name: "another version", data: protobufPage(t, "apps/v1beta2", "DeploymentList", deploymentList("a"), nil), wantErr: "the response is a apps/v1beta2 DeploymentList"},
		{name: "an item without a name", data: protobufPage(t, "apps/v1", "DeploymentList", deploymentList("a", ""), nil), wantErr: "item 1 has no metadata.name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list, exact, err := decodeProtobufPage(tc.data, deployments, "apps/v1")
			if tc.wantErr != "" {
				if err == nil || !bytes.Contains([]byte(err.Error()), []byte(tc.wantErr)) {
					t.Fatalf("error %v, want one that says %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, item := range list.Items {
				if item.JSON != nil {
					t.Errorf("item %s has JSON", item.Name)
				}
				if d, ok := item.Object.(*appsv1.Deployment); !ok || d.Name != item.Name {
					t.Errorf("item %s: object %T", item.Name, item.Object)
				}
				names = append(names, item.Name)
			}
			if diff := cmp.Diff(tc.wantNames, names); diff != "" || exact != tc.wantExact || list.Kind != "Deployment" || list.APIVersion != "apps/v1" || list.Continue != "next-page" {
				t.Errorf("%s %s continue %q exact %v (want %v); names (-want +got):\n%s", list.APIVersion, list.Kind, list.Continue, exact, tc.wantExact, diff)
			}
		})
	}
}

// TestProtobufListsNameTheirKinds checks every kind ListRaw reads as
// protobuf: the envelope's kind it expects is its list's, and an item of
// each decodes to its typed object and writes the JSON it was made from.
func TestProtobufListsNameTheirKinds(t *testing.T) {
	for _, tc := range []struct {
		resource string
		list     interface{ Marshal() ([]byte, error) }
	}{
		{"apps/v1/deployments", deploymentList("x")},
		{"apps/v1/statefulsets", &appsv1.StatefulSetList{Items: []appsv1.StatefulSet{{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: appsv1.StatefulSetSpec{Template: podTemplate("x")}}}}},
		{"apps/v1/daemonsets", &appsv1.DaemonSetList{Items: []appsv1.DaemonSet{{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: appsv1.DaemonSetSpec{Template: podTemplate("x")}}}}},
		{"apps/v1/replicasets", &appsv1.ReplicaSetList{Items: []appsv1.ReplicaSet{{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Spec: appsv1.ReplicaSetSpec{Template: podTemplate("x")}}}}},
		{"batch/v1/jobs", jobList("x")},
		{"batch/v1/cronjobs", cronJobList("x")},
		{"v1/pods", podList("x")},
	} {
		t.Run(tc.resource, func(t *testing.T) {
			gv, resource := tc.resource[:bytes.LastIndexByte([]byte(tc.resource), '/')], tc.resource[bytes.LastIndexByte([]byte(tc.resource), '/')+1:]
			gvr := schema.FromAPIVersionAndKind(gv, "").GroupVersion().WithResource(resource)
			pl, ok := protobufListOf(gvr)
			if !ok {
				t.Fatalf("%s is not read as protobuf", gvr)
			}
			list, exact, err := decodeProtobufPage(protobufPage(t, gv, pl.listKind, tc.list, nil), pl, gv)
			if err != nil || !exact || len(list.Items) != 1 {
				t.Fatalf("exact %v, %v, %d items", exact, err, len(list.Items))
			}
			got, err := list.Items[0].Bytes()
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(tc.list)
			if err != nil {
				t.Fatal(err)
			}
			var wantList struct{ Items []json.RawMessage }
			if err := json.Unmarshal(want, &wantList); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, wantList.Items[0]) {
				t.Errorf("item's JSON:\n%s\nwant:\n%s", got, wantList.Items[0])
			}
		})
	}
	if _, ok := protobufListOf(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "deployments"}); ok {
		t.Error("a custom resource named deployments is read as protobuf")
	}
}

// FuzzDecodeProtobufPage feeds decodeProtobufPage any bytes: it returns a
// page or an error, never panics, and a page it calls exact holds items
// with names and typed objects only.
func FuzzDecodeProtobufPage(f *testing.F) {
	f.Add(protobufPage(f, "apps/v1", "DeploymentList", deploymentList("a", "b"), nil))
	f.Add(protobufPage(f, "apps/v1", "DeploymentList", deploymentList("a"), unknownField))
	f.Add(protobufPage(f, "apps/v1", "DeploymentList", deploymentList(), nil))
	f.Add([]byte("k8s\x00"))
	deployments, _ := protobufListOf(appsv1.SchemeGroupVersion.WithResource("deployments"))
	f.Fuzz(func(t *testing.T, data []byte) {
		list, _, err := decodeProtobufPage(data, deployments, "apps/v1")
		if err != nil {
			return
		}
		for i, item := range list.Items {
			if item.Name == "" || item.JSON != nil || item.Object == nil {
				t.Fatalf("item %d: %+v", i, item)
			}
			if _, err := item.Bytes(); err != nil {
				t.Fatalf("item %d: %v", i, err)
			}
			if _, err := PodSpecable().FromObject(item.Object); err != nil {
				t.Fatalf("item %d: %v", i, err)
			}
		}
	})
}

func podTemplate(name string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: name, Image: "registry.example.com/" + name + ":1",
				Env:       []corev1.EnvVar{{Name: "A", Value: "<&>"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}},
			}},
		},
	}
}

func jobList(name string) *batchv1.JobList {
	return &batchv1.JobList{Items: []batchv1.Job{{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: batchv1.JobSpec{Template: podTemplate(name)}}}}
}

func cronJobList(name string) *batchv1.CronJobList {
	return &batchv1.CronJobList{Items: []batchv1.CronJob{{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       batchv1.CronJobSpec{Schedule: "@daily", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: podTemplate(name)}}},
	}}}
}

func podList(name string) *corev1.PodList {
	t := podTemplate(name)
	return &corev1.PodList{Items: []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: t.Labels}, Spec: t.Spec}}}
}

// TestListRawReadsAnInexactKindAsJSON serves ListRaw a protobuf page with
// a field this build's types do not know (as a newer kube-apiserver
// would), and checks that the page is read again as JSON, and that the
// resource's later pages are asked for as JSON only.
func TestListRawReadsAnInexactKindAsJSON(t *testing.T) {
	protobufPageWithNewField := protobufPage(t, "apps/v1", "DeploymentList", deploymentList("a"), unknownField)
	jsonPage := []byte(`{"apiVersion":"apps/v1","kind":"DeploymentList","metadata":{},"items":[{"metadata":{"name":"a"},"spec":{"template":{}}}]}`)
	var accepts []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		accepts = append(accepts, r.Header.Get("Accept"))
		mu.Unlock()
		if strings.HasPrefix(r.Header.Get("Accept"), contentTypeProtobuf) {
			w.Header().Set("Content-Type", contentTypeProtobuf)
			w.Write(protobufPageWithNewField)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(jsonPage)
	}))
	defer srv.Close()
	dyn, err := NewDynamicClient(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	lister := dyn.Resource(appsv1.SchemeGroupVersion.WithResource("deployments")).Namespace("shop").(RawLister)
	for range 2 {
		page, err := lister.ListRaw(t.Context(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Items) != 1 || page.Items[0].Object != nil || string(page.Items[0].JSON) != `{"metadata":{"name":"a"},"spec":{"template":{}}}` {
			t.Fatalf("page: %+v", page)
		}
	}
	want := []string{contentTypeProtobuf + ", application/json", "application/json", "application/json"}
	if diff := cmp.Diff(want, accepts); diff != "" {
		t.Errorf("Accept headers (-want +got):\n%s", diff)
	}
}
