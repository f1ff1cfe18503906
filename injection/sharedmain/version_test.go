package sharedmain

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBuildInfo(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "-buildmode", Value: "exe"}, {Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "0b55854c6e1d2a3b4c5d6e7f8091a2b3c4d5e6f7"}, {Key: "vcs.time", Value: "2026-11-29T06:45:41Z"}, {Key: "vcs.modified", Value: "true"}}
	tests := []struct {
		name string
		in   debug.BuildInfo
		want string
	}{{
		name: "bindkit's own example, from a checkout",
		in:   debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: bindkitModule, Version: "(devel)"}, Settings: vcs},
		want: "module: github.com/bindkit/bindkit (devel)\nbindkit: (devel)\n" +
			"revision: 0b55854c6e1d2a3b4c5d6e7f8091a2b3c4d5e6f7 (2026-11-29T06:45:41Z), modified\ngo: go1.26.8\n",
	}, {
		name: "an author's controller, installed at a version",
		in: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/mybinding", Version: "v1.2.0"},
			Deps: []*debug.Module{{Path: "k8s.io/api", Version: "v0.37.0"}, {Path: bindkitModule, Version: "v0.6.0"}}},
		want: "module: example.com/mybinding v1.2.0\nbindkit: v0.6.0\ngo: go1.26.8\n",
	}, {
		name: "bindkit replaced by a local copy",
		in: debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "example.com/mybinding", Version: "(devel)"},
			Deps: []*debug.Module{{Path: bindkitModule, Version: "v0.6.0", Replace: &debug.Module{Path: "../bindkit"}}}},
		want: "module: example.com/mybinding (devel)\nbindkit: v0.6.0 => ../bindkit\ngo: go1.26.8\n",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, buildInfoOf(&tc.in).String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	// The test binary's own: bindkit is its main module.
	if got := ReadBuildInfo(); got.Module != bindkitModule || !strings.HasPrefix(got.GoVersion, "go") {
		t.Errorf("ReadBuildInfo() = %+v", got)
	}
}
