package controllerruntime

import (
	"errors"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// bindkit's zap lines reach a Manager's logr.Logger: info at V(0), debug
// at V(1) (dropped at verbosity 0), errors through Error, names and
// fields kept.
func TestZapFromLogr(t *testing.T) {
	var lines []string
	l := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) }, funcr.Options{Verbosity: 0})
	z := zapFromLogr(l.WithName("bindkit")).With(zap.String("kind", "GithubBinding"))
	z.Info("started", zap.Int("controllers", 2))
	z.Debug("not shown")
	z.Named("webhook").Error("failed", zap.Error(errors.New("boom")))
	want := []string{
		`bindkit "level"=0 "msg"="started" "controllers"=2 "kind"="GithubBinding"`,
		`bindkit/webhook "msg"="failed" "error"="boom" "kind"="GithubBinding"`,
	}
	if diff := cmp.Diff(want, lines); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

// A Manager whose logr.Logger is zap underneath (controller-runtime's
// log/zap) hands bindkit its zap.Logger.
func TestZapFromLogrUnderlying(t *testing.T) {
	core, seen := observer.New(zap.InfoLevel)
	z := zap.New(core)
	got := zapFromLogr(logr.New(underlying{z}))
	got.Info("direct")
	if seen.Len() != 1 || got != z {
		t.Errorf("got a new logger (%d entries seen), want the underlying one", seen.Len())
	}
}

// underlying is a logr sink that exposes a zap.Logger, as zapr's does.
type underlying struct{ z *zap.Logger }

func (u underlying) GetUnderlying() *zap.Logger     { return u.z }
func (underlying) Init(logr.RuntimeInfo)            {}
func (underlying) Enabled(int) bool                 { return true }
func (underlying) Info(int, string, ...any)         {}
func (underlying) Error(error, string, ...any)      {}
func (u underlying) WithValues(...any) logr.LogSink { return u }
func (u underlying) WithName(string) logr.LogSink   { return u }
