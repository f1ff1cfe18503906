package webhook

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bindkit/bindkit/certificates"
)

// secretMap is a SecretGetter backed by a map; Set bumps resourceVersion
// like the API server would.
type secretMap struct {
	mu      sync.Mutex
	rv      int
	secrets map[string]*corev1.Secret
}

func (m *secretMap) Get(name string) (*corev1.Secret, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.secrets[name]
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
	}
	return s, nil
}

func (m *secretMap) Set(name string, data map[string][]byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.secrets == nil {
		m.secrets = map[string]*corev1.Secret{}
	}
	m.rv++
	m.secrets[name] = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "test", ResourceVersion: strconv.Itoa(m.rv)},
		Data:       data,
	}
}

func (m *secretMap) Delete(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.secrets, name)
}

// testPKI is a CA and a way to make serving certificates for 127.0.0.1.
type testPKI struct {
	ca *certificates.KeyPair
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	ca, err := certificates.GenerateCA("test CA", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return &testPKI{ca: ca}
}

// servingData returns Secret data with a fresh serving certificate valid for
// validity from notBefore (plus the generator's clock skew).
func (p *testPKI) servingData(t testing.TB, now time.Time, validity time.Duration) map[string][]byte {
	t.Helper()
	kp, err := certificates.GenerateServingCert(p.ca, []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, now, validity)
	if err != nil {
		t.Fatal(err)
	}
	k := certificates.DefaultDataKeys()
	return map[string][]byte{k.CACert: p.ca.CertPEM, k.ServerCert: kp.CertPEM, k.ServerKey: kp.KeyPEM}
}

func (p *testPKI) pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(p.ca.Cert)
	return pool
}

// funcController is an Admitter from a function.
type funcController struct {
	path  string
	admit func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse
}

func (c *funcController) Path() string { return c.path }
func (c *funcController) Admit(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	return c.admit(ctx, req)
}

func allowAll(path string) *funcController {
	return &funcController{path: path, admit: func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return Allowed()
	}}
}

// syncingController is a controller whose informers sync when told.
type syncingController struct {
	funcController
	synced atomic.Bool
}

func (c *syncingController) HasSynced() bool { return c.synced.Load() }

// newTestServer returns a Server with a valid certificate in its Secret.
// testSettingNames name settings as injection/sharedmain's flags do, as
// the answers of a server started by sharedmain do.
var testSettingNames = map[string]string{
	"MaxAdmissionsInFlight": "--webhook-max-in-flight",
	"MaxInFlightMemory":     "--webhook-max-in-flight-memory",
	"MaxRequestBodyBytes":   "--webhook-max-request-body-bytes",
}

func newTestServer(t testing.TB, opts Options, controllers ...Admitter) *Server {
	t.Helper()
	secrets := &secretMap{}
	secrets.Set(DefaultSecretName, newTestPKI(t).servingData(t, time.Now(), time.Hour))
	if opts.SettingNames == nil {
		opts.SettingNames = testSettingNames
	}
	s, err := New(opts, secrets, controllers...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newDeploymentJSON(t testing.TB, ns, name string) []byte {
	t.Helper()
	labels := map[string]string{"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "bindkit-tests", "tier": "frontend"}
	d := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: map[string]string{"owner": "team-web", "description": "a deployment of about three kilobytes, like a real one"}},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: name,
					Containers: []corev1.Container{{
						Name:  "web",
						Image: "registry.example/team/web:1.2.3@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
						Args:  []string{"--listen=:8080", "--log-level=info", "--upstream=http://api.backend.svc.cluster.local:8080"},
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}},
						Env: []corev1.EnvVar{
							{Name: "GOMAXPROCS", Value: "2"},
							{Name: "LOG_FORMAT", Value: "json"},
							{Name: "FEATURE_FLAGS", Value: "checkout-v2,search-suggestions,fast-images"},
							{Name: "CACHE_DIR", Value: "/var/cache/web"},
							{Name: "OTEL_EXPORTER_OTLP_ENDPOINT", Value: "http://otel-collector.observability.svc.cluster.local:4317"},
							{Name: "SESSION_KEY", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "web-session"}, Key: "key"}}},
							{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
							{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
							{Name: "DATABASE_URL", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "url"}}},
						},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
							Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
						},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("http")}}, PeriodSeconds: 5},
						LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}, PeriodSeconds: 10},
						VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/web"}, {Name: "cache", MountPath: "/var/cache/web"}},
						SecurityContext: &corev1.SecurityContext{
							RunAsNonRoot: new(true), ReadOnlyRootFilesystem: new(true), AllowPrivilegeEscalation: new(false),
							Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}, {
						Name:         "proxy",
						Image:        "registry.example/infra/proxy:4.5.6",
						Args:         []string{"--config=/etc/proxy/config.yaml"},
						Ports:        []corev1.ContainerPort{{Name: "proxy", ContainerPort: 15001}},
						VolumeMounts: []corev1.VolumeMount{{Name: "proxy-config", MountPath: "/etc/proxy"}},
					}},
					Volumes: []corev1.Volume{
						{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}},
						{Name: "proxy-config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "proxy-config"}}}},
						{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					},
					InitContainers: []corev1.Container{{
						Name:         "migrate",
						Image:        "registry.example/team/web-migrate:1.2.3",
						Command:      []string{"/bin/migrate", "--database-url-from-env=DATABASE_URL", "--timeout=5m", "--lock-table=schema_migrations_lock"},
						Env:          []corev1.EnvVar{{Name: "DATABASE_URL", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "url"}}}},
						VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/web"}},
					}},
					Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "web", Effect: corev1.TaintEffectNoSchedule}},
				},
			},
		},
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reviewJSON returns an AdmissionReview of apiVersion for a CREATE of object.
func reviewJSON(t testing.TB, apiVersion string, uid types.UID, object []byte, dryRun bool) []byte {
	t.Helper()
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       uid,
			Kind:      metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
			Namespace: "default",
			Name:      "web",
			Operation: admissionv1.Create,
			DryRun:    &dryRun,
			Object:    runtime.RawExtension{Raw: object},
		},
	}
	b, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// post sends body to path through the server's handler.
func post(s http.Handler, path, contentType string, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

// decodeResponse decodes a 200 answer.
func decodeResponse(t testing.TB, w *httptest.ResponseRecorder) *admissionv1.AdmissionReview {
	t.Helper()
	if w.Code != http.StatusOK {
		t.Fatalf("status %d, body %q; want 200", w.Code, w.Body.String())
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(w.Body.Bytes(), &review); err != nil {
		t.Fatalf("decode response: %v", err)
	}
	if review.Response == nil {
		t.Fatalf("response review has no response: %s", w.Body.String())
	}
	return &review
}
