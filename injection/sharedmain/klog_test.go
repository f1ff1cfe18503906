package sharedmain

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// klogLine is what a test compares of one routed klog line.
type klogLine struct {
	Logger, Message string
	Level           zapcore.Level
	Fields          map[string]any
}

// routedLines returns the entries of logs whose message starts with
// prefix (other tests' client-go lines may arrive meanwhile).
func routedLines(logs *observer.ObservedLogs, prefix string) []klogLine {
	var out []klogLine
	for _, e := range logs.All() {
		if !strings.HasPrefix(e.Message, prefix) {
			continue
		}
		fields := e.ContextMap()
		if len(fields) == 0 {
			fields = nil
		}
		out = append(out, klogLine{Logger: e.LoggerName, Message: e.Message, Level: e.Level, Fields: fields})
	}
	return out
}

// TestKlogRoutesIntoZap logs through klog the ways client-go does (its
// traditional calls, structured calls, a contextual logger) and checks
// what arrives in the process's zap logger: named klog, at info for V(0)
// and debug for V(1) to V(4), nothing beyond V(4), objects by name only,
// the level followed as it changes, and nothing once detached.
func TestKlogRoutesIntoZap(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	level := zap.NewAtomicLevelAt(zapcore.InfoLevel)
	detach := routeKlog(zap.New(core), level)
	defer detach()

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "system", Name: "webhook-certs"},
		Data: map[string][]byte{"server-key.pem": []byte("PRIVATE KEY")}}
	klog.Infof("klogtest: attempting to acquire leader lease %s", "system/ctl")
	klog.V(2).Infof("klogtest: at V(2) while at info")
	klog.InfoS("klogtest: structured", "secret", secret, "ref", klog.KRef("ns", "web"), "count", 3)
	klog.ErrorS(errors.New("boom"), "klogtest: failed", "resource", "leases")
	level.SetLevel(zapcore.DebugLevel)
	klog.V(4).InfoS("klogtest: at V(4) while at debug")
	klog.V(6).InfoS("klogtest: at V(6), a request URL")
	klog.FromContext(context.Background()).WithName("reflector").WithValues("type", "*v1.Pod").Info("klogtest: contextual")

	want := []klogLine{
		{Logger: "klog", Message: "klogtest: attempting to acquire leader lease system/ctl", Level: zapcore.InfoLevel},
		{Logger: "klog", Message: "klogtest: structured", Level: zapcore.InfoLevel,
			Fields: map[string]any{"secret": "system/webhook-certs", "ref": "ns/web", "count": int64(3)}},
		{Logger: "klog", Message: "klogtest: failed", Level: zapcore.ErrorLevel,
			Fields: map[string]any{"resource": "leases", "error": "boom"}},
		{Logger: "klog", Message: "klogtest: at V(4) while at debug", Level: zapcore.DebugLevel},
		{Logger: "klog.reflector", Message: "klogtest: contextual", Level: zapcore.InfoLevel,
			Fields: map[string]any{"type": "*v1.Pod"}},
	}
	if diff := cmp.Diff(want, routedLines(logs, "klogtest: ")); diff != "" {
		t.Errorf("routed klog lines (-want +got):\n%s", diff)
	}

	detach()
	klog.Infof("klogtest: after detach")
	if got := routedLines(logs, "klogtest: after"); len(got) != 0 {
		t.Errorf("lines after detach reached the detached logger: %+v", got)
	}
}
