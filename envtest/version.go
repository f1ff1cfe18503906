package envtest

import (
	"fmt"
	"strings"

	"k8s.io/client-go/discovery"
)

// checkVersion records the kube-apiserver's /version in e.Version and fails
// unless its minor is minor, so a bin directory holding another release
// cannot pass for the one asked for.
func (e *Environment) checkVersion(minor string) error {
	disco, err := discovery.NewDiscoveryClientForConfig(e.Config)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	info, err := disco.ServerVersion()
	if err != nil {
		return fmt.Errorf("kube-apiserver /version: %w", err)
	}
	e.Version = *info
	if info.Major == "" {
		return fmt.Errorf("kube-apiserver reports no version (%s): it was built without the version stamps `make tools` adds; rebuild it with `make tools`", info.GitVersion)
	}
	// Some builds report the minor with a suffix ("36+").
	if got := info.Major + "." + strings.TrimSuffix(info.Minor, "+"); got != minor {
		return fmt.Errorf("kube-apiserver reports %s (%s), not Kubernetes %s; check the binaries in the bin directory or set %s", got, info.GitVersion, minor, KubeMinorEnv)
	}
	return nil
}

// KubeMinor returns the kube-apiserver's minor, such as "1.36".
func (e *Environment) KubeMinor() string {
	return e.Version.Major + "." + strings.TrimSuffix(e.Version.Minor, "+")
}
