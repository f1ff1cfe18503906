package sharedmain

import (
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
)

// ErrVersion is what ParseFlags returns for --version: Main then prints
// the binary's BuildInfo to stdout and exits 0, as it exits 0 for -h.
var ErrVersion = errors.New("version requested")

// bindkitModule is the framework's module path.
const bindkitModule = "github.com/bindkit/bindkit"

// BuildInfo is what a binary tells of its build (--version), read from
// the build information the go command embeds (runtime/debug.ReadBuildInfo).
type BuildInfo struct {
	// Module is the main module's path, and Version its version: a
	// release ("v0.6.0") or pseudo-version when the binary was built from
	// a module version (go install ...@version), and when the go command
	// stamped one from the repository's tags; "(devel)" otherwise.
	Module, Version string
	// Bindkit is the version of github.com/bindkit/bindkit the binary was
	// built with: Version when bindkit is the main module (its own
	// examples), the dependency's version otherwise.
	Bindkit string
	// Revision is the VCS commit the binary was built from, Time its
	// commit time, and Modified whether the working tree had changes;
	// empty when the go command stamped none (built outside a checkout,
	// or with -buildvcs=false).
	Revision, Time string
	Modified       bool
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string
}

// ReadBuildInfo returns the running binary's BuildInfo; its fields are
// empty where the build recorded nothing (a binary built without module
// support).
func ReadBuildInfo() BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return BuildInfo{}
	}
	return buildInfoOf(bi)
}

// buildInfoOf picks what BuildInfo shows out of the go command's record.
func buildInfoOf(bi *debug.BuildInfo) BuildInfo {
	out := BuildInfo{Module: bi.Main.Path, Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if bi.Main.Path == bindkitModule {
		out.Bindkit = bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == bindkitModule {
			out.Bindkit = d.Version
			if d.Replace != nil {
				out.Bindkit += " => " + strings.TrimSpace(d.Replace.Path+" "+d.Replace.Version)
			}
		}
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			out.Revision = s.Value
		case "vcs.time":
			out.Time = s.Value
		case "vcs.modified":
			out.Modified = s.Value == "true"
		}
	}
	return out
}

// String is b as --version prints it, one "key: value" line each, the
// lines of what the build did not record left out:
//
//	module: github.com/bindkit/bindkit v0.6.0
//	bindkit: v0.6.0
//	revision: 0b55854c... (2026-11-29T06:45:41Z)
//	go: go1.26.8
func (b BuildInfo) String() string {
	var s strings.Builder
	line := func(key, format string, args ...any) {
		fmt.Fprintf(&s, "%s: "+format+"\n", append([]any{key}, args...)...)
	}
	if b.Module != "" {
		line("module", "%s %s", b.Module, b.Version)
	}
	if b.Bindkit != "" {
		line("bindkit", "%s", b.Bindkit)
	}
	if b.Revision != "" {
		rev := b.Revision
		if b.Time != "" {
			rev += " (" + b.Time + ")"
		}
		if b.Modified {
			rev += ", modified"
		}
		line("revision", "%s", rev)
	}
	if b.GoVersion != "" {
		line("go", "%s", b.GoVersion)
	}
	return s.String()
}
