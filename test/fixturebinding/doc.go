// Package fixturebinding is a Binding kind for bindkit's own tests, apart
// from the examples users copy: its Do and Undo set one env var, and its
// spec switches on misbehaviours a framework must survive (a Do or Undo
// that panics on some subjects, a WithContext that panics, a Do that is
// not idempotent, a Do whose patch the API server refuses, a Do that
// changes its Binding).
//
// One Go type serves two kinds, FixtureBinding and OtherFixtureBinding
// (group fixtures.bindkit.dev), so a test can run two kinds in one
// process through sharedmain, as a user's controller with two Binding
// kinds does. Their CRDs are in config/ (CRDPath).
package fixturebinding
