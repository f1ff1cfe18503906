package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/bindkit/bindkit/test/testenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "controlplane: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	opts := testenv.Options{ControllerManager: true, Audit: true, WebhookClientAuth: true, Progress: indent{os.Stdout}}
	var out string
	flag.StringVar(&opts.KubeMinor, "minor", os.Getenv(testenv.KubeMinorEnv), "Kubernetes minor to run (default: $"+testenv.KubeMinorEnv+", else the newest)")
	flag.BoolVar(&opts.Workloads, "workloads", false, "also run kube-scheduler and kwok's fake nodes, for the packages whose tests run pods")
	flag.StringVar(&out, "o", "", "where to write the control plane's description (default: a file in the temporary directory named after the minor)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	start := time.Now()
	fmt.Println("==> starting the control plane (binaries from bin/, built by make tools)")
	env, err := testenv.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("==> stopping the control plane")
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "controlplane: stop: %v\n", err)
		}
	}()
	if out == "" {
		out = testenv.DescriptionPath(env.KubeMinor())
	}
	if err := env.Describe(out); err != nil {
		return err
	}
	defer os.Remove(out)
	fmt.Printf("==> Kubernetes %s ready in %v; in another shell:\n\n", env.Version.GitVersion, time.Since(start).Round(100*time.Millisecond))
	fmt.Printf("    export %s=%s\n", testenv.ControlPlaneEnv, out)
	fmt.Printf("    export %s=%s\n", testenv.KubeMinorEnv, env.KubeMinor())
	fmt.Println("    go test -race -count=1 ./psbinding     # any package's integration tests, attached to this control plane")
	fmt.Println("\n    Ctrl-C here stops it.")
	<-ctx.Done()
	return nil
}

// indent prefixes the control plane's progress lines.
type indent struct{ w *os.File }

func (i indent) Write(p []byte) (int, error) {
	if _, err := fmt.Fprintf(i.w, "    %s", p); err != nil {
		return 0, err
	}
	return len(p), nil
}
