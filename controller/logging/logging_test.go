package logging_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/bindkit/bindkit/controller/logging"
)

func TestFromContext(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	stored := zap.New(core).With(zap.String("controller", "demo"))

	tests := []struct {
		name string
		ctx  context.Context
		want []string // messages that reach the observer
	}{
		{name: "no logger is a no-op", ctx: context.Background(), want: nil},
		{name: "nil logger is a no-op", ctx: logging.WithLogger(context.Background(), nil), want: nil},
		{name: "stored logger is returned", ctx: logging.WithLogger(context.Background(), stored), want: []string{"hello"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs.TakeAll()
			logger := logging.FromContext(tt.ctx)
			if logger == nil {
				t.Fatal("FromContext returned nil")
			}
			logger.Info("hello")
			var got []string
			for _, e := range logs.TakeAll() {
				got = append(got, e.Message)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSugaredFromContext(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	stored := zap.New(core).With(zap.String("controller", "demo"))

	logging.SugaredFromContext(context.Background()).Infof("dropped %d", 1) // no logger: a no-op, not a nil
	logging.SugaredFromContext(logging.WithLogger(context.Background(), stored)).Infow("bound", "subject", "web")
	logging.SugaredFromContext(logging.WithLogger(context.Background(), stored)).Infof("bound %d subjects", 3)

	type line struct {
		Message string
		Fields  map[string]any
	}
	var got []line
	for _, e := range logs.All() {
		got = append(got, line{e.Message, e.ContextMap()})
	}
	want := []line{
		{"bound", map[string]any{"controller": "demo", "subject": "web"}},
		{"bound 3 subjects", map[string]any{"controller": "demo"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}
