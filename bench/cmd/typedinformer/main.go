// Command typedinformer is the reference process of BenchmarkSubjectCache:
// client-go's typed informer over apps/v1 Deployments in every namespace,
// the cache a controller built on client-go or controller-runtime keeps
// for the workloads it watches, and nothing else.
//
// It reads --kubeconfig with client-go's defaults, prints "ready", waits for
// a line on stdin, then starts the informer and prints "synced <n>" once its
// cache holds the n Deployments it listed. It exits 0 on SIGTERM or SIGINT.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "path to a kubeconfig")
	flag.Parse()
	if err := run(*kubeconfig); err != nil {
		fmt.Fprintf(os.Stderr, "typedinformer: %v\n", err)
		os.Exit(1)
	}
}

func run(kubeconfig string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("wait for the go-ahead on stdin: %w", err)
	}
	factory := informers.NewSharedInformerFactory(kube, 0)
	inf := factory.Apps().V1().Deployments().Informer()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("cache did not sync: %w", context.Cause(ctx))
	}
	fmt.Printf("synced %d\n", len(inf.GetStore().ListKeys()))
	<-ctx.Done()
	factory.Shutdown()
	return nil
}
