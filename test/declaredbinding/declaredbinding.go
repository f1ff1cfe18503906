package declaredbinding

import (
	"github.com/bindkit/bindkit/test/declaredbinding/v1alpha1"
	"github.com/bindkit/bindkit/wiring"
)

// CRDPath is the kind's CRD, relative to the repository root.
const CRDPath = "test/declaredbinding/config/300-declaredbinding.yaml"

// New wires DeclaredBindings with wiring's defaults, as a user's main
// does.
func New() (*wiring.Kind, error) {
	return wiring.New[v1alpha1.DeclaredBinding](v1alpha1.GroupVersionResource(), wiring.Options{})
}
