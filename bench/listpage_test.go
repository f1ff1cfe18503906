package bench

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/test/fixtures"
	"github.com/bindkit/bindkit/test/testenv"
)

// BenchmarkListPage times the LIST a reconciler binding a selector's
// subjects sends for each page: 100 realistic Deployments (about 370 KB of
// JSON, past the kube-apiserver's 128 KB threshold for compressing a
// response), read through duck.NewDynamicClient's ListRaw, with gzip
// asked for (client-go's default, and bindkit's processes') and without
// (rest.Config.DisableCompression, as kube-controller-manager runs).
// Besides sec/op it reports the CPU of this process (client-cpu-ms/op)
// and of the kube-apiserver and etcd (server-cpu-ms/op) per page, and
// fails unless every page came gzipped exactly when asked; these pages
// are JSON, as a kube-apiserver that does not speak protobuf sends them.
// read=pod reads each page into what a Shape needs (a WithPod per item,
// gzip asked for), as ListRaw reads a built-in kind: encoding=protobuf,
// the typed objects (Shape.FromObject), and encoding=json, the JSON a
// server that does not speak protobuf sends (Shape.Decode of each item:
// what the reconciler read before it asked for protobuf). Run each
// setting in a process of its own, alternating: one after the other in
// one control plane, the second is slower whichever it is.
func BenchmarkListPage(b *testing.B) {
	env := startControlPlane(b)
	ctx := context.Background()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ns := "list-page"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	for i := range 100 {
		d := fixtures.RealisticDeployment(ns, fmt.Sprintf("d-%03d", i))
		if _, err := kube.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	deployments := appsv1.SchemeGroupVersion.WithResource("deployments")
	for _, encoding := range []string{"json", "protobuf"} {
		b.Run("read=pod/encoding="+encoding, func(b *testing.B) {
			cfg := pageConfig(env.Config)
			if encoding == "json" {
				acceptOnlyJSON(cfg)
			}
			dyn, err := duck.NewDynamicClient(cfg)
			if err != nil {
				b.Fatal(err)
			}
			lister := dyn.Resource(deployments).Namespace(ns).(duck.RawLister)
			shape := duck.PodSpecable()
			readPages(b, env, func() int {
				page, err := lister.ListRaw(ctx, metav1.ListOptions{Limit: 100})
				if err != nil {
					b.Fatal(err)
				}
				for _, item := range page.Items {
					if (item.Object != nil) != (encoding == "protobuf") {
						b.Fatalf("%s: typed %v, asked for %s", item.Name, item.Object != nil, encoding)
					}
					var err error
					if item.Object != nil {
						_, err = shape.FromObject(item.Object)
					} else {
						_, err = shape.Decode(item.JSON)
					}
					if err != nil {
						b.Fatal(err)
					}
				}
				return len(page.Items)
			})
		})
	}
	for _, compression := range []bool{true, false} {
		b.Run(fmt.Sprintf("compression=%v", map[bool]string{true: "on", false: "off"}[compression]), func(b *testing.B) {
			cfg := pageConfig(env.Config)
			cfg.DisableCompression = !compression
			acceptOnlyJSON(cfg)
			var gzipped atomic.Int64
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
				return roundTripFunc(func(req *http.Request) (*http.Response, error) {
					resp, err := rt.RoundTrip(req)
					if err == nil && resp.Uncompressed {
						gzipped.Add(1)
					}
					return resp, err
				})
			})
			dyn, err := duck.NewDynamicClient(cfg)
			if err != nil {
				b.Fatal(err)
			}
			lister := dyn.Resource(deployments).Namespace(ns).(duck.RawLister)
			c0, s0 := selfCPU(), pidsCPU(env.PIDs())
			for b.Loop() {
				page, err := lister.ListRaw(ctx, metav1.ListOptions{Limit: 100})
				if err != nil {
					b.Fatal(err)
				}
				if len(page.Items) != 100 {
					b.Fatalf("%d items, want 100", len(page.Items))
				}
			}
			if got := gzipped.Load(); (got == int64(b.N)) != compression {
				b.Fatalf("%d of %d pages came gzipped, compression %v", got, b.N, compression)
			}
			b.ReportMetric(float64((selfCPU()-c0).Microseconds())/1000/float64(b.N), "client-cpu-ms/op")
			b.ReportMetric(float64((pidsCPU(env.PIDs())-s0).Microseconds())/1000/float64(b.N), "server-cpu-ms/op")
		})
	}
}

// roundTripFunc is a function as an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// acceptOnlyJSON makes cfg's requests accept JSON only, as if the
// kube-apiserver did not speak protobuf.
func acceptOnlyJSON(cfg *rest.Config) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			req = req.Clone(req.Context())
			req.Header.Set("Accept", "application/json")
			return rt.RoundTrip(req)
		})
	})
}

// pageConfig is cfg for one LIST at a time, unthrottled.
func pageConfig(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 1
	return cfg
}

// readPages runs read, which reads one page and returns its length, b.N
// times, and reports the CPU per page of this process and of env's
// control plane.
func readPages(b *testing.B, env *testenv.Environment, read func() int) {
	c0, s0 := selfCPU(), pidsCPU(env.PIDs())
	for b.Loop() {
		if n := read(); n != 100 {
			b.Fatalf("%d items, want 100", n)
		}
	}
	b.ReportMetric(float64((selfCPU()-c0).Microseconds())/1000/float64(b.N), "client-cpu-ms/op")
	b.ReportMetric(float64((pidsCPU(env.PIDs())-s0).Microseconds())/1000/float64(b.N), "server-cpu-ms/op")
}
