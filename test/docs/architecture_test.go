package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/bindkit/bindkit"

// root is the repository's root, from this package's directory.
const root = "../.."

// notAPI are the module's directories whose packages are rigs, examples
// and deployment files, above every floor of the table.
var notAPI = []string{"examples/", "test/", "hack/", "bench/", "config"}

// TestArchitecturePackageTable: ARCHITECTURE.md's table names every
// package of the module but the rigs and examples, once, and no package
// imports one on a higher floor than its own.
func TestArchitecturePackageTable(t *testing.T) {
	floors := architectureFloors(t)
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, filepath.Join(root, "...")).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(strings.TrimPrefix(fields[0], module), "/")
		if pkg == "" || slices.ContainsFunc(notAPI, func(p string) bool { return strings.HasPrefix(pkg, p) }) {
			continue
		}
		floor, ok := floors[pkg]
		if !ok {
			t.Errorf("ARCHITECTURE.md's package table does not name %s", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			dep, ok := strings.CutPrefix(imp, module+"/")
			if !ok {
				continue
			}
			if f, ok := floors[dep]; ok && f > floor {
				t.Errorf("%s (floor %d) imports %s (floor %d): dependencies point down; move one of them or change ARCHITECTURE.md", pkg, floor, dep, f)
			}
		}
	}
}

// architectureFloors reads ARCHITECTURE.md's package table: each package
// in backquotes in a row's second cell, by the floor in its first.
func architectureFloors(t *testing.T) map[string]int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "<!-- package table: checked by test/docs -->\n")
	table, _, ok2 := strings.Cut(table, "<!-- end of package table -->")
	if !ok || !ok2 {
		t.Fatal("ARCHITECTURE.md has no package table between its markers")
	}
	floors := map[string]int{}
	for _, row := range strings.Split(table, "\n") {
		cells := strings.Split(row, "|")
		if len(cells) < 4 {
			continue
		}
		floor, err := strconv.Atoi(strings.TrimSpace(cells[1]))
		if err != nil {
			continue // the header and its rule
		}
		for _, part := range strings.Split(cells[2], "`") {
			if p := strings.TrimSpace(part); p != "" && p != "," {
				if _, dup := floors[p]; dup {
					t.Errorf("ARCHITECTURE.md names %s twice", p)
				}
				floors[p] = floor
			}
		}
	}
	if len(floors) < 10 {
		t.Fatalf("ARCHITECTURE.md's package table names %d packages: %v", len(floors), floors)
	}
	return floors
}
