package sharedmain

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/bindkit/bindkit/webhook"
)

// A knative-shaped main stores webhook.Options in the context; what no flag
// covers is kept, and a flag that overrides a value the caller gave says so.
func TestWebhookOptionsFromTheContextAreKept(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	ctx := webhook.WithOptions(context.Background(), webhook.Options{ServiceName: "githubbinding-webhook", SecretName: "githubbinding-certs", Port: 9443})
	f := DefaultFlags()
	got := webhookOptions(ctx, f, zap.New(core))
	if diff := cmp.Diff([]any{"githubbinding-webhook", "githubbinding-certs", f.WebhookPort}, []any{got.ServiceName, got.SecretName, got.Port}); diff != "" {
		t.Errorf("ServiceName, SecretName, Port (-want +got):\n%s", diff)
	}
	if n := logs.FilterMessageSnippet("--webhook-port").Len() + logs.FilterField(zap.String("flag", "--webhook-port")).Len(); n == 0 {
		var msgs []string
		for _, e := range logs.All() {
			msgs = append(msgs, e.Message)
		}
		t.Errorf("no warning that --webhook-port overrides the context's port; logged: %s", strings.Join(msgs, "; "))
	}
}
