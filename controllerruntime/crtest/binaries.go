package crtest

import (
	"os"

	"github.com/bindkit/bindkit/envtest"
)

// BinaryAssetsDirectory returns the directory holding etcd and
// kube-apiserver for controller-runtime's envtest.Environment
// (BinaryAssetsDirectory): $KUBEBUILDER_ASSETS when it is set, as a
// kubebuilder project's make test sets it; else where bindkit's envtest
// finds the binaries of the minor it runs (envtest.BinaryDir:
// $BINDKIT_BIN_DIR and $BINDKIT_KUBE_MINOR, the user cache `go tool
// bindkit controlplane` fills, the project's bin/, setup-envtest's store).
// Missing binaries are an error saying where it looked and how to get
// them.
func BinaryAssetsDirectory() (string, error) {
	if dir := os.Getenv(envtest.KubebuilderAssetsEnv); dir != "" {
		return dir, nil
	}
	return envtest.BinaryDir(envtest.Options{})
}
