package declarative

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

// TestOneSourceMarkersNameEverySource: the CEL rules that say a volume,
// and an env entry's valueFrom, have exactly one source (Spec's markers,
// which bindkit generate writes into a CRD) name every source the API
// types have: a source they missed could be set beside another, and the
// pod the kube-apiserver then builds at admission would be invalid.
func TestOneSourceMarkersNameEverySource(t *testing.T) {
	src, err := os.ReadFile("spec.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		message, variable string
		of                reflect.Type
	}{
		{"a volume needs exactly one source", "v", reflect.TypeFor[corev1.VolumeSource]()},
		{"valueFrom needs exactly one source", "e.valueFrom", reflect.TypeFor[corev1.EnvVarSource]()},
	} {
		t.Run(tc.message, func(t *testing.T) {
			var rule string
			for _, line := range strings.Split(string(src), "\n") {
				if strings.Contains(line, `message="`+tc.message+`"`) {
					rule = line
				}
			}
			if rule == "" {
				t.Fatalf("no marker with message %q in spec.go", tc.message)
			}
			var named []string
			for _, m := range regexp.MustCompile(`has\(`+regexp.QuoteMeta(tc.variable)+`\.(\w+)\)`).FindAllStringSubmatch(rule, -1) {
				named = append(named, m[1])
			}
			var want []string
			for i := range tc.of.NumField() {
				name, _, _ := strings.Cut(tc.of.Field(i).Tag.Get("json"), ",")
				want = append(want, name)
			}
			slices.Sort(named)
			slices.Sort(want)
			if diff := cmp.Diff(want, named); diff != "" {
				t.Errorf("sources the rule names (-%v's fields +named):\n%s", tc.of, diff)
			}
		})
	}
}
