package envtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/bindkit/bindkit/internal/processwide"
)

// InCI reports whether the process runs under CI (CI=true), where a missing
// control plane fails integration tests instead of skipping them.
func InCI() bool { return os.Getenv("CI") == "true" }

// Shared is one control plane for all the tests of a package. Its zero value
// starts with default Options; set Options before Main to change them.
type Shared struct {
	Options Options

	once sync.Once
	env  *Environment
	err  error
}

// Main runs the package's tests, stops the control plane if a test started
// one (one it attached to keeps running), and exits. Call it from
// TestMain.
func (s *Shared) Main(m *testing.M) { Main(m, s) }

// Main runs the package's tests, stops every control plane of planes that
// a test started, and exits: for a package with more than one Shared.
func Main(m *testing.M, planes ...*Shared) {
	// Tests run injection/sharedmain.Run while their own clients work:
	// client-go's process-wide logger and metric hooks are set before
	// either starts, as a process's main sets them before its first client.
	processwide.Install()
	code := m.Run()
	for _, s := range planes {
		if err := s.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "envtest: stop control plane: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// Env returns the package's control plane, starting it on first use, or,
// when the environment variable ControlPlaneEnv names a running control
// plane's description, attaching to that one (Attach). When the binaries
// are missing it skips t with instructions, or fails t under CI=true; any
// other start failure fails t.
func (s *Shared) Env(t testing.TB) *Environment {
	t.Helper()
	env, err := s.Start()
	switch {
	case err == nil:
		return env
	case errors.Is(err, ErrBinariesMissing) && !InCI():
		t.Skipf("integration test needs a control plane: %v", err)
	default:
		t.Fatalf("start control plane: %v", err)
	}
	return nil
}

// Start returns the package's control plane, starting it on first use, or
// the error that kept it from starting (wrapping ErrBinariesMissing when
// the binaries are not there), for a caller that reports a missing control
// plane in its own words. Every call returns what the first did.
func (s *Shared) Start() (*Environment, error) {
	s.once.Do(func() {
		if path := os.Getenv(ControlPlaneEnv); path != "" {
			s.env, s.err = Attach(context.Background(), path, s.Options)
			return
		}
		s.env, s.err = Start(context.Background(), s.Options)
	})
	return s.env, s.err
}

func (s *Shared) stop() error {
	if s.env == nil {
		return nil
	}
	return s.env.Stop()
}
