package sharedmain

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/bindkit/bindkit/envtest"
	"github.com/bindkit/bindkit/test/scrape"
	"github.com/bindkit/bindkit/webhook"
)

// TestListenersReportTheAddressesTheyBound: with every port 0, the process
// writes the addresses it got to --listen-addresses-file and logs them,
// and each one answers: the webhook and the metrics over TLS, the probes
// over HTTP. A listener that does not run is absent.
func TestListenersReportTheAddressesTheyBound(t *testing.T) {
	ca, err := envtest.NewServingCert("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "client-ca.pem")
	if err := os.WriteFile(caFile, ca.CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	webhookFlags := Flags{DisableHA: true, WebhookAddress: "127.0.0.1", WebhookGracePeriod: -1}
	withClientCA := webhookFlags
	withClientCA.Webhook.ClientCAFile = caFile
	tests := []struct {
		name  string
		flags Flags
		ctors []Constructor
		want  []string // the listeners that run
	}{
		{name: "webhook and metrics", flags: webhookFlags, ctors: []Constructor{newDenierController("/deny")}, want: []string{"webhook", "metrics"}},
		{name: "webhook with client authentication", flags: withClientCA, ctors: []Constructor{newDenierController("/deny")}, want: []string{"webhook", "probes", "metrics"}},
		{name: "probes without a webhook", flags: Flags{DisableHA: true}, ctors: []Constructor{recordingController(&recorder{})}, want: []string{"probes", "metrics"}},
		{name: "metrics off", flags: Flags{DisableHA: true, MetricsAddress: MetricsOff}, ctors: []Constructor{recordingController(&recorder{})}, want: []string{"probes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, _, logs := fakeContext(t, tt.flags)
			p, stop := startProcess(t, ctx, tt.ctors...)
			addrs := listenAddresses(t, p.flags)
			got := map[string]string{"webhook": addrs.Webhook, "probes": addrs.Probes, "metrics": addrs.Metrics}
			var running []string
			for _, name := range []string{"webhook", "probes", "metrics"} {
				if got[name] == "" {
					continue
				}
				running = append(running, name)
				if _, port, _ := net.SplitHostPort(got[name]); port == "" || port == "0" {
					t.Errorf("%s reported at %q, want the port the kernel gave", name, got[name])
				}
				conn, err := net.Dial("tcp", got[name])
				if err != nil {
					t.Errorf("%s at %s: %v", name, got[name], err)
					continue
				}
				conn.Close()
			}
			if diff := cmp.Diff(tt.want, running); diff != "" {
				t.Errorf("listeners reported (-want +got):\n%s", diff)
			}
			if addrs.Probes != "" {
				poll(t, "probes answer /healthz where reported", func(ctx context.Context) (bool, error) {
					code, _ := get(ctx, http.DefaultClient, "http://"+addrs.Probes+webhook.HealthzPath)
					return code == http.StatusOK, nil
				})
			}
			if addrs.Metrics != "" {
				// Over HTTPS, to callers with a token (this one has none).
				_, err := scrape.GetWithToken(t.Context(), "https://"+addrs.Metrics+MetricsPath, "")
				if scrape.Status(err) != http.StatusUnauthorized {
					t.Errorf("GET metrics at %s without a token: %v; want 401", addrs.Metrics, err)
				}
			}
			if addrs.WebhookPort() != portOf(addrs.Webhook) || addrs.ProbePort() != portOf(addrs.Probes) {
				t.Errorf("ports of %+v = %d and %d", addrs, addrs.WebhookPort(), addrs.ProbePort())
			}
			line := loggedListening(t, logs.String())
			if diff := cmp.Diff(ListenAddresses{Webhook: line["webhook"], Probes: line["probes"], Metrics: line["metrics"]}, addrs); diff != "" {
				t.Errorf("logged addresses differ from the file's (-logged +file):\n%s", diff)
			}
			if err := stop(); err != nil {
				t.Fatalf("process returned %v, want nil", err)
			}
		})
	}
}

// loggedListening returns the fields of the process's "listening" line.
func loggedListening(t *testing.T, logs string) map[string]string {
	t.Helper()
	for line := range strings.SplitSeq(logs, "\n") {
		var entry map[string]any
		if json.Unmarshal([]byte(line), &entry) != nil || entry["msg"] != "listening" {
			continue
		}
		out := map[string]string{}
		for _, k := range []string{"webhook", "probes", "metrics"} {
			out[k], _ = entry[k].(string)
		}
		return out
	}
	t.Fatalf("no \"listening\" line in the log:\n%s", logs)
	return nil
}

// A --listen-addresses-file the process cannot write is a start-up error
// that names the flag, and the ports it bound are released.
func TestListenAddressesFileUnwritable(t *testing.T) {
	flags := Flags{DisableHA: true, ListenAddressesFile: filepath.Join(t.TempDir(), "missing", "listen.json")}
	ctx, _, _ := fakeContext(t, flags)
	done := make(chan error, 1)
	go func() { done <- newProcess(ctx, "test").main(ctx, []Constructor{recordingController(&recorder{})}) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "--listen-addresses-file") || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("error = %v, want one naming --listen-addresses-file and wrapping fs.ErrNotExist", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("start-up error not returned within 30s")
	}
}

func TestWaitListenAddresses(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "listen.json")
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := WaitListenAddresses(ctx, path); err == nil || !strings.Contains(err.Error(), path+" not written") {
		t.Errorf("WaitListenAddresses before the file = %v, want an error naming it", err)
	}
	want := ListenAddresses{Webhook: "127.0.0.1:40001", Metrics: "[::]:40002"}
	go func() {
		time.Sleep(2 * listenAddressesPoll)
		if err := writeListenAddresses(path, want); err != nil {
			t.Error(err)
		}
	}()
	got, err := WaitListenAddresses(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WaitListenAddresses (-want +got):\n%s", diff)
	}
	if got.WebhookPort() != 40001 || got.ProbePort() != 0 {
		t.Errorf("ports = %d, %d; want 40001 and 0", got.WebhookPort(), got.ProbePort())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("files left beside %s: %d, want only it", path, len(entries))
	}
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadListenAddresses(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("ReadListenAddresses of a truncated file = %v, want an error naming it", err)
	}
}
