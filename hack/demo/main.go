package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/bindkit/bindkit/test/demo"
	"github.com/bindkit/bindkit/test/testenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "demo failed: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("demo finished: the Binding took effect on existing and new Deployments and was undone on deletion")
}

func run() error {
	if _, err := os.Stat(demo.CRDPath); err != nil {
		return fmt.Errorf("run from the repository root (make demo): %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	fmt.Println("==> starting etcd and kube-apiserver on 127.0.0.1 (binaries from bin/, built by make tools)")
	start := time.Now()
	env, err := testenv.Start(ctx, testenv.Options{CRDPaths: []string{demo.CRDPath}, Workloads: true, Progress: indent{os.Stdout}})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("==> stopping the control plane")
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop control plane: %v\n", err)
		}
	}()
	fmt.Printf("==> control plane ready in %v\n", time.Since(start).Round(100*time.Millisecond))
	return demo.Run(ctx, os.Stdout, env, demo.Options{RepoRoot: root})
}

// indent prefixes the control plane's progress lines.
type indent struct{ w *os.File }

func (i indent) Write(p []byte) (int, error) {
	if _, err := fmt.Fprintf(i.w, "    %s", p); err != nil {
		return 0, err
	}
	return len(p), nil
}
