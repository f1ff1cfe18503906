// Package api keeps bindkit's exported API on record, as Go keeps its own
// in api/*.txt: a file per package under api/ at the repository's root
// lists every exported name with its type, one line each, sorted, and
// TestAPI fails when a package's API and its file differ, so that every
// change to the API is deliberate and visible in review. The packages are
// the framework's (the module's, but commands, examples, rigs and
// internal packages) and the controller-runtime adapter module's.
//
// After changing the API on purpose, regenerate the files and review
// their diff with the change:
//
//	go test ./test/api -update
//
// (make api runs the same.) The lines are read from the export data the
// go command writes for each package (go list -export), with go/types:
// what a caller of the package sees, whatever file declares it.
package api
