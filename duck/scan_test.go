package duck_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/bindkit/bindkit/duck"
)

// bomb is a Deployment whose pod spec holds n copies of item in list.
func bomb(list, item string, n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"ns"},"spec":{"template":{"spec":{"`)
	b.WriteString(list)
	b.WriteString(`":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(item)
	}
	b.WriteString(`]}}}}`)
	return b.Bytes()
}

func TestScanStats(t *testing.T) {
	d := realisticDeployment()
	d.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "init", Env: make([]corev1.EnvVar, 7)}}
	d.Spec.Template.Spec.Containers[1].VolumeMounts = make([]corev1.VolumeMount, 5)
	tests := []struct {
		name  string
		shape duck.Shape
		raw   []byte
		want  duck.ObjectStats
	}{{
		name:  "realistic deployment",
		shape: duck.PodSpecable(),
		raw:   mustJSON(t, d),
		want:  duck.ObjectStats{Depth: 10, Containers: 2, InitContainers: 1, Volumes: 3, MaxEnv: 7, MaxVolumeMounts: 5},
	}, {
		name:  "cronjob",
		shape: duck.CronJob(),
		raw:   mustJSON(t, cronJobDoc(t)),
		want:  duck.ObjectStats{Depth: 12, Containers: 2, InitContainers: 1, Volumes: 3, MaxEnv: 4, MaxVolumeMounts: 2},
	}, {
		name:  "pod",
		shape: duck.Pod(),
		raw:   mustJSON(t, podDoc(t)),
		want:  duck.ObjectStats{Depth: 8, Containers: 2, InitContainers: 1, Volumes: 3, MaxEnv: 4, MaxVolumeMounts: 2},
	}, {
		name:  "custom path",
		shape: duck.TemplateAt("spec", "workload", "template"),
		raw:   mustJSON(t, customDoc(t)),
		want:  duck.ObjectStats{Depth: 11, Containers: 2, InitContainers: 1, Volumes: 3, MaxEnv: 4, MaxVolumeMounts: 2},
	}, {
		name:  "lists elsewhere are not the template's",
		shape: duck.TemplateAt("spec", "workload", "template"),
		raw:   []byte(`{"spec":{"containers":[{},{}],"workload":{"template":{"spec":{"containers":[{"env":[{}]}]}}}}}`),
		want:  duck.ObjectStats{Depth: 9, Containers: 1, MaxEnv: 1},
	}, {
		name:  "a container bomb is counted",
		shape: duck.PodSpecable(),
		raw:   bomb("containers", "{}", 100000),
		want:  duck.ObjectStats{Depth: 6, Containers: 100000},
	}, {
		name:  "keys match case-sensitively",
		shape: duck.PodSpecable(),
		raw:   []byte(`{"spec":{"template":{"spec":{"Containers":[{}],"containers":[{}, {}]}}}}`),
		want:  duck.ObjectStats{Depth: 6, Containers: 2},
	}, {
		name:  "escaped keys are unescaped",
		shape: duck.PodSpecable(),
		raw:   []byte(`{"sp\u0065c":{"template":{"spec":{"contain\u0065rs":[{}]}}}}`),
		want:  duck.ObjectStats{Depth: 6, Containers: 1},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.shape.Scan(tt.raw, 100)
			if err != nil {
				t.Fatal(err)
			}
			if got.DecodedBytes <= 0 {
				t.Errorf("DecodedBytes = %d, want an estimate", got.DecodedBytes)
			}
			got.DecodedBytes = 0
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Scan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestScanErrors(t *testing.T) {
	tests := []struct {
		name    string
		shape   duck.Shape
		raw     string
		depth   int
		wantErr string
		tooDeep bool
	}{
		{"empty", duck.PodSpecable(), ``, 100, "empty JSON: want an object", false},
		{"array", duck.PodSpecable(), `[]`, 100, "JSON is an array, not an object", false},
		{"truncated", duck.PodSpecable(), `{"spec":{`, 100, "invalid JSON at offset 9: unexpected end", false},
		{"trailing data", duck.PodSpecable(), `{} {}`, 100, `invalid JSON at offset 3: invalid character '{' after the object`, false},
		{"bad literal", duck.PodSpecable(), `{"a":nul}`, 100, "invalid JSON at offset 5: invalid literal, want null", false},
		{"bad number", duck.PodSpecable(), `{"a":01}`, 100, `invalid JSON at offset 6: invalid character '1' after a value`, false},
		{"control character", duck.PodSpecable(), "{\"a\":\"\x01\"}", 100, `invalid JSON at offset 6: invalid control character '\x01' in string`, false},
		{"bad escape", duck.PodSpecable(), `{"a":"\q"}`, 100, `invalid JSON at offset 7: invalid escape \q in string`, false},
		{"duplicate known field", duck.PodSpecable(), `{"metadata":{},"metadata":{}}`, 100, `invalid JSON at offset 15: duplicate field "metadata"`, false},
		{"duplicate label is a map key, not a field", duck.PodSpecable(), `{"metadata":{"labels":{"a":"1","a":"2"}}}`, 100, "", false},
		{"duplicate unknown field", duck.PodSpecable(), `{"x":1,"x":2}`, 100, "", false},
		{"template not an object", duck.PodSpecable(), `{"spec":{"template":"x"}}`, 100, "spec.template is a string, not an object", false},
		{"parent not an object", duck.CronJob(), `{"spec":{"jobTemplate":[]}}`, 100, "spec.jobTemplate is an array, not an object", false},
		{"too deep", duck.PodSpecable(), `{"a":[[[{"b":[]}]]]}`, 5, "at offset 13: JSON nested too deep: more than 5 levels", true},
		{"deep enough", duck.PodSpecable(), `{"a":[[[{"b":[]}]]]}`, 6, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.shape.Scan([]byte(tt.raw), tt.depth)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Scan: %v", err)
				}
				return
			}
			if err == nil || err.Error() != tt.wantErr {
				t.Fatalf("Scan error = %v, want %q", err, tt.wantErr)
			}
			if errors.Is(err, duck.ErrTooDeep) != tt.tooDeep {
				t.Errorf("errors.Is(err, ErrTooDeep) = %v, want %v", !tt.tooDeep, tt.tooDeep)
			}
		})
	}
}

// liveHeap returns the heap that each result of f keeps alive, averaged
// over n calls after a first that warms caches up.
func liveHeap(n int, f func() any) uint64 {
	f()
	var before, after runtime.MemStats
	kept := make([]any, n)
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range kept {
		kept[i] = f()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return (after.HeapAlloc - before.HeapAlloc) / uint64(n)
}

func labels(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":""`, i)
	}
	return b.String()
}

// TestScanEstimateBoundsDecode checks DecodedBytes against what decoding
// really keeps alive: never less, so a budget built on it holds, and for
// ordinary objects not wildly more, so it refuses nothing real.
func TestScanEstimateBoundsDecode(t *testing.T) {
	tests := []struct {
		name     string
		raw      []byte
		maxRatio float64 // estimate / live heap, at most
	}{
		{"realistic", mustJSON(t, realisticDeployment()), 3},
		{"container bomb", bomb("containers", "{}", 20000), 3},
		{"volume bomb", bomb("volumes", "{}", 20000), 3},
		{"env bomb", bomb("containers", `{"env":[{},{},{},{},{},{},{},{}]}`, 2000), 3},
		{"toleration bomb", bomb("tolerations", "{}", 20000), 3},
		{"string bomb", []byte(`{"spec":{"template":{"spec":{"containers":[{"args":[` + strings.Repeat(`"",`, 20000) + `""]}]}}}}`), 3},
		{"label bomb", []byte(`{"metadata":{"labels":{` + strings.Repeat(`"":"",`, 1) + `"a":"b"}},"spec":{"template":{"metadata":{"labels":{` + labels(20000) + `}}}}}`), 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := duck.PodSpecable().Scan(tt.raw, 100)
			if err != nil {
				t.Fatal(err)
			}
			n := max(1, 200000/len(tt.raw))
			live := liveHeap(n, func() any {
				w, err := duck.PodSpecable().Decode(tt.raw)
				if err != nil {
					t.Fatal(err)
				}
				return w
			})
			ratio := float64(st.DecodedBytes) / float64(max(live, 1))
			t.Logf("raw %d bytes, estimate %d, live after decode %d (%.2fx)", len(tt.raw), st.DecodedBytes, live, ratio)
			if uint64(st.DecodedBytes) < live {
				t.Errorf("estimate %d is below the %d bytes decoding keeps alive", st.DecodedBytes, live)
			}
			if ratio > tt.maxRatio {
				t.Errorf("estimate is %.1fx what decoding keeps alive, more than %.1fx", ratio, tt.maxRatio)
			}
		})
	}
}

// FuzzScan checks that Scan accepts what the decoder accepts and refuses
// what it refuses, and never panics.
func FuzzScan(f *testing.F) {
	f.Add(mustJSON(f, realisticDeployment()))
	f.Add([]byte(`{"spec":{"template":{"spec":{"containers":[{"env":[{"name":"a\u00e9\ud83d\ude00"}]}]}}}}`))
	f.Add([]byte(`{"a":-0.5e+10,"b":[true,false,null],"c":{"d":""}}`))
	f.Add([]byte(`{"metadata":{"labels":{"a":"1"}},"metadata":{}}`))
	f.Add([]byte("{\"a\":\"\xff\"}"))
	f.Add([]byte(`{"a":1}x`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, err := duck.PodSpecable().Scan(raw, duck.MaxDepth)
		var v any
		valid := json.Unmarshal(raw, &v) == nil
		_, isObject := v.(map[string]any)
		switch {
		case err == nil && !(valid && isObject):
			t.Fatalf("Scan accepted what encoding/json refuses or is no object: %q", raw)
		case err != nil && valid && isObject:
			msg := err.Error()
			if !strings.Contains(msg, "duplicate field") && !strings.Contains(msg, "not an object") {
				t.Fatalf("Scan refused a valid object: %v: %q", err, raw)
			}
		}
	})
}
