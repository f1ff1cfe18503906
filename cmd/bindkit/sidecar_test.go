package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNewContractFindsAuthorsMistakes is a new author's SidecarBinding (a
// sidecar container plus an emptyDir mounted in every container, with two
// required spec fields) in a module `bindkit new` scaffolds outside the
// repository: with its type file written (type, Example, Do and Undo) and
// nothing else edited, the generated tests pass; and each of three usual
// mistakes in Do or Undo fails the generated contract test with one
// failure that names the cause, at the test's line.
func TestNewContractFindsAuthorsMistakes(t *testing.T) {
	skipWithoutControlPlane(t)
	checkout, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "sidecarbinding")
	var stdout, stderr bytes.Buffer
	args := []string{"new", "-module", "example.com/sidecarbinding", "-kind", "SidecarBinding", "-dir", dir, "-replace", checkout}
	if err := run(t.Context(), args, &stdout, &stderr); err != nil {
		t.Fatalf("bindkit %s: %v\n%s%s", strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	typeFile, err := os.ReadFile("testdata/sidecar/types.go.txt")
	if err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile("testdata/sidecar/good.txt")
	if err != nil {
		t.Fatal(err)
	}
	goIn := func(args ...string) (string, error) {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	write := func(doUndo string) {
		t.Helper()
		src := strings.Replace(string(typeFile), "//DO-UNDO\n", doUndo, 1)
		if err := os.WriteFile(filepath.Join(dir, "apis", "v1alpha1", "types.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := goIn("tool", "bindkit", "generate"); err != nil {
			t.Fatalf("go tool bindkit generate: %v\n%s", err, out)
		}
	}

	write(string(good))
	out, err := goIn("test", "-count=1", "-v", "./...")
	if strings.Contains(out, "--- SKIP:") && os.Getenv("CI") != "true" {
		t.Skipf("the generated tests skipped (no control plane):\n%s", out)
	}
	if err != nil {
		t.Fatalf("the generated tests fail on a correct SidecarBinding: %v\n%s", err, out)
	}
	for _, want := range []string{"--- PASS: TestContract ", "--- PASS: TestWithRealAPIServer "} {
		if !strings.Contains(out, want) {
			t.Errorf("go test ./...: no %q:\n%s", want, out)
		}
	}

	mistakes := []struct {
		name, old, new string
		want           []string
	}{{
		name: "Do deletes, then appends the sidecar",
		old: `	if i := slices.IndexFunc(spec.Containers, isSidecar); i >= 0 {
		spec.Containers[i].Image = b.Spec.Image
	} else {
		spec.Containers = append(spec.Containers, corev1.Container{Name: sidecarName, Image: b.Spec.Image})
	}
`,
		new: `	spec.Containers = append(slices.DeleteFunc(spec.Containers, isSidecar), corev1.Container{Name: sidecarName, Image: b.Spec.Image})
`,
		want: []string{"Do drops what the API server fills in", "terminationMessagePath"},
	}, {
		name: "Undo forgets the volume",
		old: `	if spec.Volumes = slices.DeleteFunc(spec.Volumes, isVolume); len(spec.Volumes) == 0 {
		spec.Volumes = nil
	}
`,
		want: []string{"Undo after Do does not restore", "add template/spec/volumes/"},
	}, {
		name: "Do appends the volume every time",
		old: `	if !slices.ContainsFunc(spec.Volumes, isVolume) {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: volumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
`,
		new: `	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: volumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
`,
		want: []string{"Do is not idempotent", "add template/spec/volumes/"},
	}, {
		name: "Example leaves a required field empty",
		old:  `"registry.example/sidecar:1"`, new: `""`,
		want: []string{"is not a valid Binding", "spec.image"},
	}}
	for _, m := range mistakes {
		t.Run(m.name, func(t *testing.T) {
			src := string(good)
			if !strings.Contains(src+string(typeFile), m.old) {
				t.Fatalf("the SidecarBinding has no %q", m.old)
			}
			src = strings.Replace(src, m.old, m.new, 1)
			orig := typeFile
			typeFile = []byte(strings.Replace(string(typeFile), m.old, m.new, 1))
			defer func() { typeFile = orig }()
			write(src)
			out, err := goIn("test", "-count=1", "-run", "TestContract", "./apis/v1alpha1")
			if err == nil {
				t.Fatalf("the contract test passes:\n%s", out)
			}
			failures := strings.Count(out, "contract_test.go:")
			if failures != 1 {
				t.Errorf("%d failures reported at contract_test.go, want 1:\n%s", failures, out)
			}
			for _, w := range m.want {
				if !strings.Contains(out, w) {
					t.Errorf("the failure does not say %q:\n%s", w, out)
				}
			}
			if n := strings.Count(out, "\n"); n > 30 {
				t.Errorf("%d lines of output, want a short report:\n%s", n, out)
			}
			t.Logf("go test output (%d lines):\n%s", strings.Count(out, "\n"), out)
		})
	}
}
