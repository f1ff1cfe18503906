// Package declaredbinding wires the DeclaredBinding kind (package v1alpha1),
// a declarative kind for bindkit's own tests whose users write what it
// adds in the Binding (declarative.InBinding), apart from the examples
// users copy. Its CRD, generated with declarative.Spec's validation rules,
// is in config/ (CRDPath).
package declaredbinding
