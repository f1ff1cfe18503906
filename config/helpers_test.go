package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// manifest is one object of one file, in file order.
type manifest struct {
	file string
	obj  *unstructured.Unstructured
}

func (m manifest) String() string {
	return fmt.Sprintf("%s: %s %s", m.file, m.obj.GetKind(), key(m.obj))
}

func key(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return ns + "/" + u.GetName()
	}
	return u.GetName()
}

// readManifests reads every object of every *.yaml file in dir but
// kustomization.yaml, the files in name order, as its kustomization lists
// them (TestKustomizationListsEveryFile) for kubectl apply -k.
func readManifests(t *testing.T, dir string) []manifest {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return filepath.Base(f) == kustomizationFile })
	slices.Sort(files)
	var out []manifest
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var obj map[string]any
			err := dec.Decode(&obj)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(obj) == 0 {
				continue // an empty document between separators
			}
			out = append(out, manifest{file: filepath.Base(f), obj: &unstructured.Unstructured{Object: obj}})
		}
	}
	if len(out) == 0 {
		t.Fatalf("no manifests in %s", dir)
	}
	return out
}

// find returns the one manifest of kind and name, failing t otherwise.
func find(t *testing.T, ms []manifest, kind, name string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, m := range ms {
		if m.obj.GetKind() == kind && m.obj.GetName() == name {
			found = append(found, m.obj)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d manifests of %s %s, want 1", len(found), kind, name)
	}
	return found[0]
}
