// Package jsonscan reads JSON without decoding it: it validates, measures
// nesting, finds members and estimates, from the Go type the JSON will be
// decoded into, how much heap the decoding will allocate. It allocates
// nothing per value, so input that would decode into far more memory than
// its size (a "bomb" of empty objects in a list of large structs, or of
// entries in a map) can be measured, and refused, before it is decoded.
//
// duck builds its workload scans on it; webhook estimates AdmissionReviews
// with it; psbinding finds an object's metadata with it.
package jsonscan
