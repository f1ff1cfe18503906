package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/bindkit/bindkit/bindingtest"
)

// checkManifestsCall is how a test keeps a kind's admission policies in
// config/ (bindingtest.CheckManifests); testFunc finds the tests.
var (
	checkManifestsCall = []byte("bindingtest.CheckManifests(")
	testFunc           = regexp.MustCompile(`(?m)^func (Test\w*)\(`)
)

// manifestTests finds, below dir, the tests that call
// bindingtest.CheckManifests: by package directory, their names.
func manifestTests(dir string) (map[string][]string, error) {
	found := map[string][]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != dir && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil || !bytes.Contains(src, checkManifestsCall) {
			return err
		}
		// The test functions whose body holds the call: each function's
		// text runs from its func line to the next.
		starts := testFunc.FindAllSubmatchIndex(src, -1)
		for i, m := range starts {
			end := len(src)
			if i+1 < len(starts) {
				end = starts[i+1][0]
			}
			if bytes.Contains(src[m[0]:end], checkManifestsCall) {
				pkg := filepath.Dir(path)
				found[pkg] = append(found[pkg], string(src[m[2]:m[3]]))
			}
		}
		return nil
	})
	return found, err
}

// runManifestTests runs the tests that keep admission policies in
// config/ (see manifestTests), writing the files, or, with check, failing
// when one is stale.
func runManifestTests(ctx context.Context, dir string, check bool, stdout, stderr io.Writer) error {
	tests, err := manifestTests(dir)
	if err != nil {
		return err
	}
	for _, pkg := range slices.Sorted(func(yield func(string) bool) {
		for k := range tests {
			if !yield(k) {
				return
			}
		}
	}) {
		rel, err := filepath.Rel(dir, pkg)
		if err != nil {
			return err
		}
		run := "^(" + strings.Join(tests[pkg], "|") + ")$"
		cmd := exec.CommandContext(ctx, "go", "test", "-count=1", "-run", run, "./"+filepath.ToSlash(rel))
		cmd.Dir = dir
		cmd.Env = os.Environ()
		if !check {
			cmd.Env = append(cmd.Env, bindingtest.UpdateManifestsEnv+"=1")
		}
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			stderr.Write(out.Bytes())
			return fmt.Errorf("admission policies in config/ (go test -run '%s' ./%s): %w", run, filepath.ToSlash(rel), err)
		}
		fmt.Fprintf(stdout, "admission policies current (%s in ./%s)\n", strings.Join(tests[pkg], ", "), filepath.ToSlash(rel))
	}
	return nil
}
