package duck_test

import (
	"encoding/json"
	"testing"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/test/fixtures"
)

// BenchmarkScan measures Scan of a ~3 KB Deployment, the cost admission
// adds before decoding a matched object; BenchmarkDecode the decode.
func BenchmarkScan(b *testing.B) {
	raw, err := json.Marshal(fixtures.RealisticDeployment("ns", "web"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := duck.PodSpecable().Scan(raw, 100); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	raw, err := json.Marshal(fixtures.RealisticDeployment("ns", "web"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := duck.PodSpecable().Decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValid is encoding/json's validation of the same bytes, the
// floor a scan that reads every byte compares with.
func BenchmarkValid(b *testing.B) {
	raw, _ := json.Marshal(fixtures.RealisticDeployment("ns", "web"))
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if !json.Valid(raw) {
			b.Fatal("invalid")
		}
	}
}
