package testenv

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/bindkit/bindkit/envtest"
)

// Aliases of package envtest.
type (
	// Options configure Start; see envtest.Options.
	Options = envtest.Options
	// Environment is a running control plane; see envtest.Environment.
	Environment = envtest.Environment
	// AuditEvent is an event of the kube-apiserver's audit log.
	AuditEvent = envtest.AuditEvent
	// ServingCert is a throw-away CA and serving certificate.
	ServingCert = envtest.ServingCert
)

// Constants of package envtest.
const (
	BinDirEnv               = envtest.BinDirEnv
	KubeMinorEnv            = envtest.KubeMinorEnv
	NewestMinor             = envtest.NewestMinor
	WebhookClientCommonName = envtest.WebhookClientCommonName
	ControlPlaneEnv         = envtest.ControlPlaneEnv
)

// ErrBinariesMissing is envtest.ErrBinariesMissing.
var ErrBinariesMissing = envtest.ErrBinariesMissing

// Start is envtest.Start with the repository's bin/ as the default BinDir.
func Start(ctx context.Context, opts Options) (*Environment, error) {
	return envtest.Start(ctx, withRepoBinDir(opts))
}

// DescriptionPath is envtest.DescriptionPath.
func DescriptionPath(minor string) string { return envtest.DescriptionPath(minor) }

// NewServingCert is envtest.NewServingCert.
func NewServingCert(hosts ...string) (*ServingCert, error) { return envtest.NewServingCert(hosts...) }

// InCI is envtest.InCI.
func InCI() bool { return envtest.InCI() }

// SupportedMinors is envtest.SupportedMinors.
func SupportedMinors() []string { return envtest.SupportedMinors() }

// DefaultControllers is envtest.DefaultControllers.
func DefaultControllers() []string { return envtest.DefaultControllers() }

// Shared is envtest.Shared with the repository's bin/ as the default
// BinDir. Set Options before Main.
type Shared struct {
	Options Options

	once   sync.Once
	shared envtest.Shared
}

func (s *Shared) inner() *envtest.Shared {
	s.once.Do(func() { s.shared.Options = withRepoBinDir(s.Options) })
	return &s.shared
}

// Main is envtest.Shared.Main.
func (s *Shared) Main(m *testing.M) { Main(m, s) }

// Env is envtest.Shared.Env.
func (s *Shared) Env(t testing.TB) *Environment {
	t.Helper()
	return s.inner().Env(t)
}

// Main is envtest.Main for the Shared of this package.
func Main(m *testing.M, planes ...*Shared) {
	inner := make([]*envtest.Shared, len(planes))
	for i, s := range planes {
		inner[i] = s.inner()
	}
	envtest.Main(m, inner...)
}

// RepoBinDir returns bin/ of the bindkit repository above the working
// directory, where `make tools` builds the control plane.
func RepoBinDir() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin"), nil
}

// withRepoBinDir sets opts.BinDir to RepoBinDir unless it or
// BINDKIT_BIN_DIR is set, or no repository is found.
func withRepoBinDir(opts Options) Options {
	if opts.BinDir != "" || os.Getenv(BinDirEnv) != "" {
		return opts
	}
	if dir, err := RepoBinDir(); err == nil {
		opts.BinDir = dir
	}
	return opts
}

// modulePath identifies the repository root while walking up from the
// working directory.
const modulePath = "github.com/bindkit/bindkit"

// moduleRoot walks up from the working directory to the directory whose
// go.mod declares the bindkit module.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isBindkitModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of " + modulePath + " above the working directory")
		}
		dir = parent
	}
}

func isBindkitModule(goMod string) bool {
	f, err := os.Open(goMod)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); strings.HasPrefix(line, "module ") {
			return strings.TrimSpace(strings.TrimPrefix(line, "module ")) == modulePath
		}
	}
	return false
}
