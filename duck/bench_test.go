package duck_test

import (
	"encoding/json"
	"testing"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/bindkit/bindkit/duck"
)

// BenchmarkCreatePatch measures the admission path's diff on a realistic
// Deployment of about 3 KB of JSON.
func BenchmarkCreatePatch(b *testing.B) {
	raw := mustJSON(b, realisticDeployment())
	before, err := duck.PodSpecable().Decode(raw)
	if err != nil {
		b.Fatal(err)
	}
	changed := before.DeepCopy()
	spec := &changed.Spec.Template.Spec
	addEnv(&spec.Containers[0], "GITHUB_TOKEN", "t")
	spec.Containers[0].VolumeMounts = append(spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "bound", MountPath: "/bound"})
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "bound", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}})

	cases := []struct {
		name    string
		after   *duck.WithPod
		wantOps int
	}{
		{"no-change", before.DeepCopy(), 0},
		{"env+volume+mount", changed, 3},
	}
	b.Logf("deployment JSON: %d bytes", len(raw))
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ops, err := duck.CreatePatch(before, c.after)
				if err != nil || len(ops) != c.wantOps {
					b.Fatalf("CreatePatch = %d ops, %v; want %d ops", len(ops), err, c.wantOps)
				}
			}
		})
	}
	// The obvious alternative, for comparison: marshal both duck objects and
	// let jsonpatch diff the documents.
	for _, c := range cases {
		b.Run("baseline-marshal+jsonpatch/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				x, _ := json.Marshal(before)
				y, _ := json.Marshal(c.after)
				if _, err := jsonpatch.CreatePatch(x, y); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
