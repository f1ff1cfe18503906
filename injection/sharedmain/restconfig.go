package sharedmain

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// restConfig finds the API server: --kubeconfig, else $KUBECONFIG, else the
// in-cluster service account; --server overrides the URL of any of them.
// ~/.kube/config is deliberately not read: a process in a pod must not pick
// up a developer's cluster by accident. The clients' rate limits come from
// --kube-api-qps and --kube-api-burst, whatever the source.
func restConfig(f Flags) (*rest.Config, error) {
	cfg, err := findServer(f)
	if err != nil {
		return nil, err
	}
	applyClientFlags(cfg, f.withDefaults())
	return cfg, nil
}

func findServer(f Flags) (*rest.Config, error) {
	env := os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	if f.Kubeconfig == "" && env == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no --kubeconfig, no $KUBECONFIG and not in a cluster: %w", err)
		}
		if f.Server != "" {
			cfg.Host = f.Server
		}
		return cfg, nil
	}
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: f.Kubeconfig}
	if f.Kubeconfig == "" {
		rules.Precedence = filepath.SplitList(env)
	}
	overrides := &clientcmd.ConfigOverrides{}
	overrides.ClusterInfo.Server = f.Server
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		where := f.Kubeconfig
		if where == "" {
			where = "$KUBECONFIG " + env
		}
		return nil, fmt.Errorf("kubeconfig %s: %w", where, err)
	}
	if cfg.Host == "" {
		return nil, errors.New("kubeconfig names no server; set --server")
	}
	return cfg, nil
}

// userAgent names the process to the API server: the component, then
// bindkit and the platform, as client-go's default names the binary. The
// API server attributes writes that set no field manager to the part
// before the first "/".
func userAgent(component string) string {
	return component + "/bindkit (" + runtime.GOOS + "/" + runtime.GOARCH + ")"
}
