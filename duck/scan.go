package duck

import (
	"reflect"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/internal/jsonscan"
)

// ErrTooDeep is wrapped by the error of a scan or decode that met JSON
// nested deeper than its limit.
var ErrTooDeep = jsonscan.ErrTooDeep

// MaxDepth is the nesting Decode accepts, the limit of encoding/json and of
// the kube-apiserver's decoder.
const MaxDepth = jsonscan.MaxDepth

// ObjectStats describes a workload's JSON as Scan measured it, before any of
// it is decoded. Counts are of the pod template the workload's Shape finds.
type ObjectStats struct {
	// Depth is the deepest nesting of objects and arrays; the object itself
	// is at depth 1.
	Depth int
	// Containers, InitContainers and EphemeralContainers are the lengths of
	// those lists of the pod spec.
	Containers, InitContainers, EphemeralContainers int
	// Volumes is the length of the pod spec's volumes.
	Volumes int
	// MaxEnv is the longest env or envFrom list of any one container.
	MaxEnv int
	// MaxVolumeMounts is the longest volumeMounts list of any one container.
	MaxVolumeMounts int
	// DecodedBytes estimates, from above, the heap that Decode allocates for
	// the object: the Go values of the fields WithPod knows, with room for
	// slices grown while decoding. Fields WithPod does not know cost nothing.
	DecodedBytes int64
}

// The jsonscan counts ObjectStats reads.
const (
	countContainers = iota + 1
	countInitContainers
	countEphemeralContainers
	countVolumes
	countEnv
	countVolumeMounts
)

// Scan reads a workload's JSON without decoding it and returns its
// ObjectStats. It allocates nothing per field, so an object that would
// decode into far more memory than its size (a "bomb" of empty containers,
// say) can be measured, and refused, cheaply. It fails as Decode would on
// JSON that is malformed, nested deeper than maxDepth (wrapping ErrTooDeep),
// not an object, or holds a field WithPod knows twice, and on a path to the
// pod template that runs through something other than an object. A missing
// template is not an error for Scan.
func (s Shape) Scan(raw []byte, maxDepth int) (ObjectStats, error) {
	if err := s.validate(); err != nil {
		return ObjectStats{}, err
	}
	res, err := s.scan(raw, maxDepth)
	return res.stats, err
}

// scanResult is what a scan learned: the stats and where the template is.
type scanResult struct {
	stats    ObjectStats
	template []byte // the template's JSON; nil when absent or null
}

func (s Shape) scan(raw []byte, maxDepth int) (scanResult, error) {
	res, err := jsonscan.Scan(raw, s.scanRoot(), maxDepth)
	if err != nil {
		return scanResult{}, err
	}
	c := res.Counts
	return scanResult{
		stats: ObjectStats{
			Depth:               res.Depth,
			Containers:          c[countContainers],
			InitContainers:      c[countInitContainers],
			EphemeralContainers: c[countEphemeralContainers],
			Volumes:             c[countVolumes],
			MaxEnv:              c[countEnv],
			MaxVolumeMounts:     c[countVolumeMounts],
			DecodedBytes:        res.Bytes,
		},
		template: res.Marked,
	}, nil
}

// metaJSON is an object's metadata as Decode reads it: managedFields are
// skipped, as the informers drop them. They are nothing a Binding reads
// or patches, and often a quarter of an object from the API server.
type metaJSON struct {
	metav1.ObjectMeta `json:",inline"`
	// Shadows ObjectMeta's, being shallower.
	ManagedFields skipJSON `json:"managedFields,omitempty"`
}

// skipJSON decodes any JSON value into nothing.
type skipJSON struct{}

func (*skipJSON) UnmarshalJSON([]byte) error { return nil }

// withPodJSON is the JSON form of a PodSpecable workload as Decode reads it.
type withPodJSON struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metaJSON    `json:"metadata,omitempty"`
	Spec            WithPodSpec `json:"spec,omitempty"`
}

// podJSON is the JSON form of a Pod as the Pod shape decodes it.
type podJSON struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metaJSON       `json:"metadata,omitempty"`
	Spec            corev1.PodSpec `json:"spec,omitempty"`
}

// topJSON is the part of a workload a TemplateAt shape decodes besides
// the template.
type topJSON struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metaJSON `json:"metadata,omitempty"`
}

// scanTypes are the type trees of the built-in shapes, computed once.
type scanTypes struct {
	withPod, pod, top, template *jsonscan.Type
}

var builtScanTypes = sync.OnceValue(func() *scanTypes {
	b := jsonscan.NewBuilder()
	ts := &scanTypes{
		withPod:  b.TypeOf(reflect.TypeFor[withPodJSON]()),
		pod:      b.TypeOf(reflect.TypeFor[podJSON]()),
		top:      b.TypeOf(reflect.TypeFor[topJSON]()),
		template: b.TypeOf(reflect.TypeFor[corev1.PodTemplateSpec]()),
	}
	spec := b.TypeOf(reflect.TypeFor[corev1.PodSpec]()).Fields
	spec["containers"].Count = countContainers
	spec["initContainers"].Count = countInitContainers
	spec["ephemeralContainers"].Count = countEphemeralContainers
	spec["volumes"].Count = countVolumes
	for _, t := range []reflect.Type{reflect.TypeFor[corev1.Container](), reflect.TypeFor[corev1.EphemeralContainer]()} {
		fields := b.TypeOf(t).Fields
		fields["env"].Count = countEnv
		fields["envFrom"].Count = countEnv
		fields["volumeMounts"].Count = countVolumeMounts
	}
	// WithPod's spec and template lead to the template; marked on copies so
	// the marks stay on WithPod's tree.
	root := ts.withPod.CloneFields()
	specField := root.Fields["spec"]
	specField.Object, specField.Where = true, "spec"
	specField.Type = specField.Type.CloneFields()
	tmpl := specField.Type.Fields["template"]
	tmpl.Object, tmpl.Mark, tmpl.Where = true, true, "spec.template"
	ts.withPod = root
	return ts
})

// pathTypes caches the type tree of each TemplateAt shape, by pointer.
var pathTypes sync.Map // string -> *jsonscan.Type

// scanRoot returns the type tree the shape decodes the object into.
func (s Shape) scanRoot() *jsonscan.Type {
	ts := builtScanTypes()
	switch s.kind {
	case kindSpecTemplate:
		return ts.withPod
	case kindRoot:
		return ts.pod
	}
	if t, ok := pathTypes.Load(s.pointer); ok {
		return t.(*jsonscan.Type)
	}
	// Objects along the path are not decoded into Go values of their own;
	// only the template at its end is.
	root := ts.top.CloneFields()
	next := root
	for i, seg := range s.path {
		f := &jsonscan.Field{Index: len(next.Fields), Object: true, Where: strings.Join(s.path[:i+1], ".")}
		if i == len(s.path)-1 {
			f.Type, f.Mark = ts.template, true
		} else {
			f.Type = &jsonscan.Type{Kind: jsonscan.Struct, Fields: map[string]*jsonscan.Field{}}
		}
		if old, ok := next.Fields[seg]; ok {
			f.Index = old.Index // a path through metadata replaces it
		}
		next.Fields[seg] = f
		next = f.Type
	}
	t, _ := pathTypes.LoadOrStore(s.pointer, root)
	return t.(*jsonscan.Type)
}
