package duck

import "k8s.io/apimachinery/pkg/runtime/schema"

// Shapes finds the Shape of a workload kind. Its zero value knows the
// built-in shapes: batch CronJob is CronJob, core Pod is Pod, and every other
// kind is PodSpecable. With returns a copy that knows one more kind; a
// Shapes is never changed in place, so it is safe to share between
// goroutines.
type Shapes struct {
	byKind map[schema.GroupKind]Shape
}

// With returns a copy of s in which gk has shape, overriding a built-in or
// an earlier With for the same kind.
func (s Shapes) With(gk schema.GroupKind, shape Shape) Shapes {
	m := make(map[schema.GroupKind]Shape, len(s.byKind)+1)
	for k, v := range s.byKind {
		m[k] = v
	}
	m[gk] = shape
	return Shapes{byKind: m}
}

// For returns the shape of kind gk.
func (s Shapes) For(gk schema.GroupKind) Shape {
	if shape, ok := s.byKind[gk]; ok {
		return shape
	}
	switch gk {
	case schema.GroupKind{Group: "batch", Kind: "CronJob"}:
		return CronJob()
	case schema.GroupKind{Group: "", Kind: "Pod"}:
		return Pod()
	}
	return PodSpecable()
}
