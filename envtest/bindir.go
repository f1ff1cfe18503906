package envtest

// BinaryDir returns the directory holding the binaries Start would run
// with opts (etcd and kube-apiserver, and kube-controller-manager,
// kube-scheduler as opts ask), of the minor it would run, found where
// Start finds them: opts.BinDir or $BINDKIT_BIN_DIR (v<minor> below it
// for an older minor), else the CacheDir, then ExistingBinaryDirs. It
// is what controller-runtime's envtest takes as BinaryAssetsDirectory,
// so a controller-runtime test runs on the control plane bindkit's own
// tests find (package controllerruntime/crtest uses it). Missing
// binaries are an error wrapping ErrBinariesMissing, as from
// CheckBinaries.
func BinaryDir(opts Options) (string, error) {
	r, err := resolve(opts)
	if err != nil {
		return "", err
	}
	return r.binDir, nil
}
