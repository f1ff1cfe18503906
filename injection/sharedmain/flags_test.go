package sharedmain

import (
	"errors"
	"flag"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/bindkit/bindkit/injection/injectiontest"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/webhook"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    Flags
		wantErr string
	}{
		{name: "defaults", want: DefaultFlags()},
		{
			name: "everything",
			args: []string{"--kubeconfig=/k", "--server", "https://api:6443", "--disable-ha",
				"--webhook-address=127.0.0.1", "--webhook-port=9443", "--webhook-ip-sans=127.0.0.1, ::1",
				"--webhook-grace-period=2s", "--probe-port=9090",
				"--kube-api-qps=50.5", "--kube-api-burst=75", "--resync-period=1h",
				"--webhook-ca-validity=10h", "--webhook-ca-rotate-before=5h", "--webhook-cert-validity=3h",
				"--webhook-cert-rotate-before=1h", "--webhook-kube-namespaces", "--metrics-address=127.0.0.1:9091",
				"--declarative-admission=webhook"},
			want: Flags{
				Kubeconfig: "/k", Server: "https://api:6443", DisableHA: true,
				WebhookAddress: "127.0.0.1", WebhookPort: 9443,
				WebhookIPSANs:      []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
				WebhookGracePeriod: 2 * time.Second, ProbePort: 9090,
				KubeAPIQPS: 50.5, KubeAPIBurst: 75, ResyncPeriod: time.Hour,
				WebhookCAValidity: 10 * time.Hour, WebhookCARotateBefore: 5 * time.Hour,
				WebhookCertValidity: 3 * time.Hour, WebhookCertRotateBefore: time.Hour, WebhookKubeNamespaces: true,
				Webhook:              DefaultFlags().Webhook,
				DeclarativeAdmission: policy.ByWebhook,
				MetricsAddress:       "127.0.0.1:9091",
			},
		},
		{name: "declarative admission neither policy nor webhook", args: []string{"--declarative-admission=cel"}, wantErr: `declarative admission "cel": want "policy" or "webhook"`},
		{
			name: "metrics off",
			args: []string{"--metrics-address="},
			want: func() Flags {
				f := DefaultFlags()
				f.MetricsAddress = MetricsOff
				return f
			}(),
		},
		{
			name: "metrics over plain HTTP",
			args: []string{"--metrics-secure=false"},
			want: func() Flags {
				f := DefaultFlags()
				f.MetricsInsecure = true
				return f
			}(),
		},
		{
			name: "metrics certificate from a directory",
			args: []string{"--metrics-secure", "--metrics-cert-dir=/certs"},
			want: func() Flags {
				f := DefaultFlags()
				f.MetricsCertDir = "/certs"
				return f
			}(),
		},
		{name: "metrics certificate over plain HTTP", args: []string{"--metrics-secure=false", "--metrics-cert-dir=/certs"}, wantErr: `--metrics-cert-dir "/certs": plain HTTP (--metrics-secure=false) serves no certificate`},
		{name: "metrics secure not a boolean", args: []string{"--metrics-secure=maybe"}, wantErr: `invalid boolean value "maybe" for -metrics-secure`},
		{name: "metrics address without a port", args: []string{"--metrics-address=localhost"}, wantErr: `--metrics-address "localhost": not host:port (empty turns metrics off)`},
		{name: "metrics port not a number", args: []string{"--metrics-address=:http"}, wantErr: `--metrics-address ":http": port "http" is not a number in 0-65535`},
		{
			name: "webhook bounds",
			args: []string{"--webhook-read-timeout=5s", "--webhook-max-connections=10", "--webhook-max-in-flight=3",
				"--webhook-max-in-flight-memory=64Mi", "--webhook-max-request-body-bytes=1M", "--webhook-max-object-depth=20",
				"--webhook-max-containers=4", "--webhook-max-volumes=5", "--webhook-max-env=6", "--webhook-max-volume-mounts=7",
				"--webhook-max-patch-bytes=65536", "--webhook-client-ca=/etc/ca.crt",
				"--webhook-max-connections-per-peer=8", "--webhook-handshake-timeout=2s", "--webhook-read-header-timeout=3s", "--webhook-min-body-rate=1Mi"},
			want: func() Flags {
				f := DefaultFlags()
				f.Webhook.ReadTimeout, f.Webhook.MaxConnections, f.Webhook.MaxAdmissionsInFlight = 5*time.Second, 10, 3
				f.Webhook.MaxConnectionsPerPeer, f.Webhook.HandshakeTimeout, f.Webhook.ReadHeaderTimeout, f.Webhook.MinBodyRate = 8, 2*time.Second, 3*time.Second, 1<<20
				f.Webhook.MaxInFlightMemory, f.Webhook.MaxRequestBodyBytes = 64<<20, 1000000
				f.Webhook.ObjectLimits = webhook.ObjectLimits{MaxDepth: 20, MaxContainers: 4, MaxVolumes: 5, MaxEnv: 6, MaxVolumeMounts: 7, MaxPatchBytes: 65536}
				f.Webhook.ClientCAFile = "/etc/ca.crt"
				return f
			}(),
		},
		{name: "negative bound", args: []string{"--webhook-max-env=-1"}, wantErr: "--webhook-max-env must not be negative"},
		{name: "bad quantity", args: []string{"--webhook-max-in-flight-memory=lots"}, wantErr: `"lots" is not a quantity of bytes, such as 48Mi`},
		{name: "fractional bytes", args: []string{"--webhook-max-patch-bytes=0.5"}, wantErr: `"0.5" is not a whole, non-negative number of bytes`},
		{
			name: "negative qps turns throttling off",
			args: []string{"--kube-api-qps=-1"},
			want: func() Flags {
				f := DefaultFlags()
				f.KubeAPIQPS = -1
				return f
			}(),
		},
		{
			name: "zero resync on the command line turns it off",
			args: []string{"--resync-period=0"},
			want: func() Flags {
				f := DefaultFlags()
				f.ResyncPeriod = -1
				return f
			}(),
		},
		{name: "zero qps", args: []string{"--kube-api-qps=0"}, wantErr: "--kube-api-qps 0: must be positive, or negative"},
		{name: "qps not a number", args: []string{"--kube-api-qps=NaN"}, wantErr: "--kube-api-qps NaN: not a finite number"},
		{name: "qps infinite", args: []string{"--kube-api-qps=+Inf"}, wantErr: "--kube-api-qps +Inf: not a finite number"},
		{name: "qps beyond float32", args: []string{"--kube-api-qps=1e39"}, wantErr: "--kube-api-qps 1e+39: not a finite number"},
		{name: "zero burst", args: []string{"--kube-api-burst=0"}, wantErr: "--kube-api-burst 0: must be at least 1"},
		{name: "negative burst", args: []string{"--kube-api-burst=-5"}, wantErr: "--kube-api-burst -5: must be at least 1"},
		{name: "resync below a second", args: []string{"--resync-period=500ms"}, wantErr: "--resync-period 500ms: below the minimum of 1s"},
		{name: "bad resync", args: []string{"--resync-period=often"}, wantErr: `invalid value "often" for flag -resync-period`},
		{
			name: "ip sans repeat and add up",
			args: []string{"--webhook-ip-sans=10.0.0.1", "--webhook-ip-sans=10.0.0.2,"},
			want: func() Flags {
				f := DefaultFlags()
				f.WebhookIPSANs = []net.IP{net.ParseIP("10.0.0.1"), net.ParseIP("10.0.0.2")}
				return f
			}(),
		},
		{name: "bad ip", args: []string{"--webhook-ip-sans=localhost"}, wantErr: `"localhost" is not an IP address`},
		{name: "port out of range", args: []string{"--webhook-port=70000"}, wantErr: "--webhook-port 70000 out of range"},
		{
			name: "port 0 binds a port the kernel picks",
			args: []string{"--webhook-port=0", "--probe-port=0", "--metrics-address=127.0.0.1:0", "--listen-addresses-file=/run/listen.json"},
			want: func() Flags {
				f := DefaultFlags()
				f.WebhookPort, f.ProbePort, f.MetricsAddress = AnyPort, AnyPort, "127.0.0.1:0"
				f.ListenAddressesFile = "/run/listen.json"
				return f
			}(),
		},
		{name: "negative webhook port", args: []string{"--webhook-port=-1"}, wantErr: "--webhook-port -1 out of range 0-65535 (0 binds a port the kernel picks)"},
		{name: "negative probe port", args: []string{"--probe-port=-1"}, wantErr: "--probe-port -1 out of range 0-65535"},
		{name: "positional argument", args: []string{"extra"}, wantErr: `unexpected argument "extra"`},
		{name: "unknown flag", args: []string{"--verbose"}, wantErr: "flag provided but not defined: -verbose"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseFlags("test", tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseFlags error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseFlags: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("flags (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFlagsValidate checks the settings a test or a program hands to Run
// through WithFlags: zero fields are defaults, anything else that cannot
// work is an error naming each flag at fault.
func TestFlagsValidate(t *testing.T) {
	tests := []struct {
		name  string
		flags Flags
		want  []string // lines of the joined error; none when valid
	}{
		{name: "zero value", flags: Flags{}},
		{name: "defaults", flags: DefaultFlags()},
		{name: "throttling and resync off", flags: Flags{KubeAPIQPS: -1, ResyncPeriod: -1}},
		{name: "host names and URLs", flags: Flags{Server: "https://api.example.com:6443", WebhookAddress: "localhost"}},
		{name: "IPv6 address", flags: Flags{WebhookAddress: "::1"}},
		{name: "ports the kernel picks", flags: Flags{WebhookPort: AnyPort, ProbePort: AnyPort, MetricsAddress: ":0"}},
		{name: "everything wrong", flags: Flags{
			Server: "api.example.com:6443", WebhookAddress: "127.0.0.1:8443",
			WebhookPort: 70000, ProbePort: -2, KubeAPIQPS: math.Inf(1), KubeAPIBurst: -1, ResyncPeriod: time.Millisecond,
		}, want: []string{
			`--server "api.example.com:6443": not an http or https URL with a host`,
			`--webhook-address "127.0.0.1:8443": not an IP address or host name (the port is --webhook-port)`,
			"--webhook-port 70000 out of range 0-65535 (0 binds a port the kernel picks)",
			"--probe-port -2 out of range 0-65535 (0 binds a port the kernel picks)",
			"--kube-api-qps +Inf: not a finite number of requests per second",
			"--kube-api-burst -1: must be at least 1",
			"--resync-period 1ms: below the minimum of 1s",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			if err := tt.flags.Validate(); err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEveryFlagHasAField parses a command line that sets every flag the
// flag set defines to a value other than its default and checks that no
// field of Flags is left at its default, and that every flag is named in
// the package documentation's list.
func TestEveryFlagHasAField(t *testing.T) {
	var usage strings.Builder
	if _, err := ParseFlags("test", []string{"-h"}, &usage); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("ParseFlags(-h) = %v", err)
	}
	values := map[string]string{
		"kubeconfig": "/k", "server": "https://s", "disable-ha": "true", "webhook-address": "127.0.0.1",
		"webhook-port": "1", "webhook-ip-sans": "10.0.0.1", "webhook-grace-period": "1s", "probe-port": "2",
		"kube-api-qps": "3", "kube-api-burst": "4", "resync-period": "5s",
		"webhook-ca-validity": "10h", "webhook-ca-rotate-before": "5h", "webhook-cert-validity": "3h",
		"webhook-cert-rotate-before": "1h", "webhook-kube-namespaces": "true",
		"webhook-read-timeout": "5s", "webhook-max-connections": "10", "webhook-max-in-flight": "3",
		"webhook-max-in-flight-memory": "64Mi", "webhook-max-request-body-bytes": "1M", "webhook-max-object-depth": "20",
		"webhook-max-containers": "4", "webhook-max-volumes": "5", "webhook-max-env": "6", "webhook-max-volume-mounts": "7",
		"webhook-max-patch-bytes": "65536", "webhook-client-ca": "/etc/ca.crt",
		"webhook-max-connections-per-peer": "8", "webhook-handshake-timeout": "2s", "webhook-read-header-timeout": "3s", "webhook-min-body-rate": "1Mi",
		"metrics-address": "127.0.0.1:9091", "listen-addresses-file": "/run/listen.json", "uninstall": "true", "declarative-admission": "webhook",
		"metrics-secure": "false", "metrics-cert-dir": "/certs",
	}
	// alone are flags whose value contradicts another's above: each is
	// parsed on a command line of its own.
	alone := map[string]bool{"metrics-secure": true}
	var args, names, aloneArgs []string
	for _, line := range strings.Split(usage.String(), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "-"); ok {
			name, _, _ = strings.Cut(name, " ")
			names = append(names, name)
			if name == "version" {
				continue // an action, not a setting: TestParseFlagsVersion
			}
			v, ok := values[name]
			if !ok {
				t.Errorf("flag --%s has no test value here: add it, and check its Flags field", name)
				continue
			}
			if alone[name] {
				aloneArgs = append(aloneArgs, "--"+name+"="+v)
			} else {
				args = append(args, "--"+name+"="+v)
			}
		}
	}
	var parsed []reflect.Value
	for _, cmdline := range append([][]string{args}, splitEach(aloneArgs)...) {
		f, err := ParseFlags("test", cmdline, io.Discard)
		if err != nil {
			t.Fatalf("ParseFlags(%v): %v", cmdline, err)
		}
		parsed = append(parsed, reflect.ValueOf(f))
	}
	def := reflect.ValueOf(DefaultFlags())
	for i := range def.NumField() {
		set := false
		for _, got := range parsed {
			set = set || !reflect.DeepEqual(got.Field(i).Interface(), def.Field(i).Interface())
		}
		if !set {
			t.Errorf("Flags.%s is not set by any flag", def.Type().Field(i).Name)
		}
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if !strings.Contains(string(doc), "--"+name) {
			t.Errorf("doc.go does not list --%s", name)
		}
	}
}

// splitEach returns each of args as a command line of its own.
func splitEach(args []string) [][]string {
	var out [][]string
	for _, a := range args {
		out = append(out, []string{a})
	}
	return out
}

func TestParseFlagsHelp(t *testing.T) {
	var usage strings.Builder
	_, err := ParseFlags("test", []string{"-h"}, &usage)
	if !errors.Is(err, flag.ErrHelp) {
		t.Errorf("ParseFlags(-h) error = %v, want flag.ErrHelp", err)
	}
	for _, name := range []string{"-webhook-ip-sans", "-webhook-read-timeout", "-webhook-max-connections", "-webhook-max-in-flight",
		"-webhook-max-in-flight-memory", "-webhook-max-request-body-bytes", "-webhook-max-object-depth", "-webhook-max-containers",
		"-webhook-max-volumes", "-webhook-max-env", "-webhook-max-volume-mounts", "-webhook-max-patch-bytes", "-webhook-client-ca",
		"-webhook-max-connections-per-peer", "-webhook-handshake-timeout", "-webhook-read-header-timeout", "-webhook-min-body-rate"} {
		if !strings.Contains(usage.String(), name+" ") {
			t.Errorf("usage does not list %s:\n%s", name, usage.String())
		}
	}
	// Each bound shows its default.
	for _, def := range []string{"(default 48Mi)", "(default 7Mi)", "(default 1Mi)", "(default 30s)", "(default 256)", "(default 5s)", "(default 256Ki)"} {
		if !strings.Contains(usage.String(), def) {
			t.Errorf("usage does not show %s:\n%s", def, usage.String())
		}
	}
}

// TestParseFlagsVersion: --version asks for the build information,
// whatever else the command line says (Main prints it and exits 0).
func TestParseFlagsVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"--kubeconfig=/k", "--version"}, {"--version", "--disable-ha"}} {
		if _, err := ParseFlags("test", args, io.Discard); !errors.Is(err, ErrVersion) {
			t.Errorf("ParseFlags(%v) error = %v, want ErrVersion", args, err)
		}
	}
	if _, err := ParseFlags("test", []string{"--version=false"}, io.Discard); err != nil {
		t.Errorf("ParseFlags(--version=false) = %v", err)
	}
}

func TestFlagsFromContextFillsDefaults(t *testing.T) {
	got := flagsFrom(WithFlags(t.Context(), Flags{DisableHA: true}))
	want := DefaultFlags()
	want.DisableHA = true
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("flags (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(DefaultFlags(), flagsFrom(t.Context())); diff != "" {
		t.Errorf("flags without WithFlags (-want +got):\n%s", diff)
	}
	if DefaultFlags().WebhookPort != webhook.DefaultPort {
		t.Errorf("default webhook port = %d, want webhook.DefaultPort", DefaultFlags().WebhookPort)
	}
}

func TestLevelObserver(t *testing.T) {
	cm := func(data map[string]string) *corev1.ConfigMap { return &corev1.ConfigMap{Data: data} }
	tests := []struct {
		name  string
		start zapcore.Level
		cm    *corev1.ConfigMap
		want  zapcore.Level
	}{
		{name: "missing ConfigMap is info", start: zapcore.DebugLevel, cm: nil, want: zapcore.InfoLevel},
		{name: "missing key is info", start: zapcore.ErrorLevel, cm: cm(map[string]string{"loglevel.other": "debug"}), want: zapcore.InfoLevel},
		{name: "debug", start: zapcore.InfoLevel, cm: cm(map[string]string{"loglevel.demo": "debug"}), want: zapcore.DebugLevel},
		{name: "error", start: zapcore.InfoLevel, cm: cm(map[string]string{"loglevel.demo": "error"}), want: zapcore.ErrorLevel},
		{name: "invalid keeps the level", start: zapcore.WarnLevel, cm: cm(map[string]string{"loglevel.demo": "loud"}), want: zapcore.WarnLevel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			level := zap.NewAtomicLevelAt(tt.start)
			levelObserver("demo", level, zap.NewNop())(tt.cm)
			if got := level.Level(); got != tt.want {
				t.Errorf("level = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRestConfig(t *testing.T) {
	dir := t.TempDir()
	writeKubeconfig := func(name, server string) string {
		path := filepath.Join(dir, name)
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: server}
		cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "t"}
		cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
		cfg.CurrentContext = "x"
		if err := clientcmd.WriteToFile(*cfg, path); err != nil {
			t.Fatal(err)
		}
		return path
	}
	flagFile := writeKubeconfig("flag", "https://from-flag:6443")
	envFile := writeKubeconfig("env", "https://from-env:6443")

	tests := []struct {
		name     string
		flags    Flags
		env      string
		wantHost string
		wantErr  string
	}{
		{name: "flag", flags: Flags{Kubeconfig: flagFile}, env: envFile, wantHost: "https://from-flag:6443"},
		{name: "env", env: envFile, wantHost: "https://from-env:6443"},
		{name: "server overrides", flags: Flags{Kubeconfig: flagFile, Server: "https://other:443"}, wantHost: "https://other:443"},
		{name: "missing file", flags: Flags{Kubeconfig: filepath.Join(dir, "nope")}, wantErr: "kubeconfig " + filepath.Join(dir, "nope")},
		{name: "neither, out of cluster", wantErr: "no --kubeconfig, no $KUBECONFIG and not in a cluster"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", tt.env)
			// Out of cluster whatever runs the test: in-cluster config is
			// found through this variable.
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			cfg, err := restConfig(tt.flags)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("restConfig error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("restConfig: %v", err)
			}
			if cfg.Host != tt.wantHost {
				t.Errorf("host = %q, want %q", cfg.Host, tt.wantHost)
			}
			// Zero flags take the defaults, never client-go's 5 and 10.
			if cfg.QPS != DefaultKubeAPIQPS || cfg.Burst != DefaultKubeAPIBurst {
				t.Errorf("QPS, Burst = %v, %d; want %v, %d", cfg.QPS, cfg.Burst, DefaultKubeAPIQPS, DefaultKubeAPIBurst)
			}
		})
	}
}

func TestAdmissionControllersFound(t *testing.T) {
	ctx, _ := injectiontest.NewContext(t)
	var rec recorder
	impls, err := construct(ctx, nil, []Constructor{newDenierController("/one"), recordingController(&rec), newDenierController("/two")})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, ac := range admitters(impls) {
		paths = append(paths, ac.Path())
	}
	if diff := cmp.Diff([]string{"/one", "/two"}, paths); diff != "" {
		t.Errorf("admission controllers found (-want +got):\n%s", diff)
	}
}
