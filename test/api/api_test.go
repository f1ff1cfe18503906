package api

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "write the API files of api/ from the packages as they are")

// root is the repository's root, from this package's directory; api/ is
// there.
const root = "../.."

// modules are the modules whose API is on record: the framework, and the
// controller-runtime adapter (a module of its own), each with the prefix
// of its packages' files in api/.
var modules = []struct{ dir, module string }{
	{".", "github.com/bindkit/bindkit"},
	{"controllerruntime", "github.com/bindkit/bindkit/controllerruntime"},
}

// notAPI are the package directories of a module whose exported names are
// no one's API: commands, examples, rigs, tools and internal packages.
var notAPI = []string{"cmd", "examples", "test", "hack", "bench", "internal"}

// fileOf is the API file of the package at import path, relative to root:
// api/<its directory in the repository>.txt.
func fileOf(path string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(path, "github.com/bindkit/bindkit"), "/")
	return filepath.Join("api", filepath.FromSlash(rel)+".txt")
}

// header is the first line of every API file.
const header = "# The exported API of %s, one declaration a line (test/api). Regenerate after a deliberate change: go test ./test/api -update\n"

// TestAPI: every package's exported API is what its file in api/ says,
// and every file in api/ is a package's. A failure lists what changed;
// a deliberate change regenerates the files (-update, see the package
// doc) and shows them in review.
func TestAPI(t *testing.T) {
	var pkgs []Package
	for _, m := range modules {
		loaded, err := Load(filepath.Join(root, m.dir), func(path string) bool { return isAPI(m.module, path) }, "./...")
		if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, loaded...)
	}
	if len(pkgs) < 15 {
		t.Fatalf("the API of %d packages, want the framework's: %v", len(pkgs), pkgs)
	}
	want := map[string]bool{}
	total := 0
	for _, pkg := range pkgs {
		file := fileOf(pkg.Path)
		want[file] = true
		total += len(pkg.Lines)
		text := fmt.Sprintf(header, pkg.Path) + strings.Join(pkg.Lines, "\n") + "\n"
		if *update {
			if err := os.MkdirAll(filepath.Dir(filepath.Join(root, file)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, file), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Errorf("%s has an exported API and no %s: run go test ./test/api -update and review it", pkg.Path, file)
			continue
		}
		if added, removed := diff(recorded(string(data)), pkg.Lines); len(added)+len(removed) > 0 {
			t.Errorf("the exported API of %s is not what %s records:\n%s\n"+
				"If the change is deliberate, regenerate the file (go test ./test/api -update), say so in CHANGELOG.md and review the file's diff with the change.",
				pkg.Path, file, describe(added, removed))
		}
	}
	t.Logf("%d exported declarations in %d packages", total, len(pkgs))
	stale(t, want)
}

// isAPI says whether the package at import path, of module, is API.
func isAPI(module, path string) bool {
	rel, ok := strings.CutPrefix(path, module)
	if !ok {
		return false
	}
	rel = strings.TrimPrefix(rel, "/")
	return !slices.ContainsFunc(notAPI, func(dir string) bool { return rel == dir || strings.HasPrefix(rel, dir+"/") })
}

// stale reports (with -update: removes) the files of api/ no package
// has.
func stale(t *testing.T, want map[string]bool) {
	t.Helper()
	err := filepath.WalkDir(filepath.Join(root, "api"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		switch {
		case want[rel]:
		case *update:
			return os.Remove(path)
		default:
			t.Errorf("%s is the API of no package with exported names: remove it (go test ./test/api -update)", rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// recorded are the lines of an API file but its comments.
func recorded(text string) []string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

// diff returns the lines of got not in want, and those of want not in got.
func diff(want, got []string) (added, removed []string) {
	for _, l := range got {
		if !slices.Contains(want, l) {
			added = append(added, l)
		}
	}
	for _, l := range want {
		if !slices.Contains(got, l) {
			removed = append(removed, l)
		}
	}
	return added, removed
}

func describe(added, removed []string) string {
	var b strings.Builder
	for _, l := range removed {
		b.WriteString("  - " + l + "\n")
	}
	for _, l := range added {
		b.WriteString("  + " + l + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}
