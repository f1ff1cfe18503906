package policy

import (
	"bytes"
	"encoding/json"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// Manifests writes objs as YAML, one document each, for kubectl apply,
// under header (each of its lines a comment), leaving out what an object
// to create has no value in (creationTimestamp, status).
func Manifests(objs []runtime.Object, header string) ([]byte, error) {
	var out bytes.Buffer
	for _, line := range strings.Split(header, "\n") {
		out.WriteString(strings.TrimRight("# "+line, " ") + "\n")
	}
	for _, o := range objs {
		raw, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		delete(m, "status")
		if meta, ok := m["metadata"].(map[string]any); ok {
			delete(meta, "creationTimestamp")
		}
		y, err := yaml.Marshal(m)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(y)
	}
	return out.Bytes(), nil
}
