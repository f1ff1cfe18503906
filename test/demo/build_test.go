package demo

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// TestSharedBuildsBuildOncePerPackage: with SharedBuildsEnv set, the
// processes (here goroutines, each with a lock of its own) that ask for one
// package get one build, even once its sources change; unset, each call
// builds.
func TestSharedBuildsBuildOncePerPackage(t *testing.T) {
	module := t.TempDir()
	writeMain := func(word string) {
		t.Helper()
		files := map[string]string{
			"go.mod":  "module example.com/hello\n\ngo 1.26\n",
			"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"" + word + "\") }\n",
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(module, name), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	run := func(binary string) string {
		t.Helper()
		out, err := exec.Command(binary).Output()
		if err != nil {
			t.Fatalf("run %s: %v", binary, err)
		}
		return string(bytes.TrimSpace(out))
	}
	writeMain("first")
	t.Setenv(SharedBuildsEnv, t.TempDir())
	out := t.TempDir()

	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() {
			errs[i] = BuildPackage(context.Background(), module, ".", filepath.Join(out, "hello-"+string(rune('a'+i))))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("build %d: %v", i, err)
		}
	}
	writeMain("second")
	if err := BuildPackage(context.Background(), module, ".", filepath.Join(out, "hello-d")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"hello-a", "hello-b", "hello-c", "hello-d"} {
		if got := run(filepath.Join(out, name)); got != "first" {
			t.Errorf("%s prints %q, want %q (the run's one build)", name, got, "first")
		}
	}

	t.Setenv(SharedBuildsEnv, "")
	if err := BuildPackage(context.Background(), module, ".", filepath.Join(out, "hello-e")); err != nil {
		t.Fatal(err)
	}
	if got := run(filepath.Join(out, "hello-e")); got != "second" {
		t.Errorf("unshared build prints %q, want %q", got, "second")
	}
}
