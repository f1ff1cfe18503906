// Command githubbinding-profiled is the example controller's main
// (examples/githubbinding/cmd/controller) with a CPU profile that SIGUSR1
// starts and, sent again, stops. BenchmarkBind builds it instead of the
// example when BINDKIT_BENCH_CPUPROFILE is set, so that the profile covers
// exactly the timed part; nothing else differs, flags included.
//
// The profile is written to $BINDKIT_CPUPROFILE; once it is complete, an
// empty file of the same name with ".done" appended appears beside it.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/bindkit/bindkit/examples/githubbinding/pkg/reconciler/githubbinding"
	"github.com/bindkit/bindkit/injection/sharedmain"
)

func main() {
	if path := os.Getenv("BINDKIT_CPUPROFILE"); path != "" {
		toggles := make(chan os.Signal, 1)
		signal.Notify(toggles, syscall.SIGUSR1)
		go profile(path, toggles)
	}
	binding, err := githubbinding.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sharedmain.Main("githubbinding-controller", binding.Controller, binding.Webhook)
}

// profile runs the CPU profile between two toggles, once.
func profile(path string, toggles <-chan os.Signal) {
	<-toggles
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cpu profile: %v\n", err)
		return
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "cpu profile: %v\n", err)
		return
	}
	<-toggles
	pprof.StopCPUProfile()
	if err := f.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "cpu profile: %v\n", err)
		return
	}
	if err := os.WriteFile(path+".done", nil, 0o600); err != nil {
		fmt.Fprintf(os.Stderr, "cpu profile: %v\n", err)
	}
}
