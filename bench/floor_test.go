package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/duck"
)

// floorPatch is what a floor sends for one Deployment: its name and the
// JSON patch.
type floorPatch struct {
	namespace, name string
	body            []byte
}

// bindkitPatch computes, with bindkit's own duck code, the JSON patch the
// BaseReconciler sends to bind d: Do on the Deployment's pod template, the
// duck.BoundAnnotation record of by at generation, the difference as
// operations (Shape.CreatePatch), guarded by duck.Guard against d as the
// server stored it, encoded with duck.MarshalPatch. The floors send these
// bytes, computed with the timer stopped, so that a floor is exactly the N
// writes bindkit makes and nothing else.
func bindkitPatch(d *appsv1.Deployment, do func(*duck.WithPod), by duck.BoundBy, generation int64) (floorPatch, error) {
	name := fmt.Sprintf("apps/v1 Deployment %s/%s", d.Namespace, d.Name)
	raw, err := json.Marshal(d)
	if err != nil {
		return floorPatch{}, fmt.Errorf("%s: encode: %w", name, err)
	}
	shape := duck.Shapes{}.For(schema.GroupKind{Group: "apps", Kind: "Deployment"})
	before, err := shape.Decode(raw)
	if err != nil {
		return floorPatch{}, fmt.Errorf("%s: %w", name, err)
	}
	after := before.DeepCopy()
	do(after)
	duck.MarkBound(after, by, generation)
	ops, err := shape.CreatePatch(before, after)
	if err != nil {
		return floorPatch{}, fmt.Errorf("%s: create patch: %w", name, err)
	}
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return floorPatch{}, fmt.Errorf("%s: decode: %w", name, err)
	}
	guarded, err := duck.Guard(obj, ops)
	if err != nil {
		return floorPatch{}, fmt.Errorf("%s: %w", name, err)
	}
	body, err := duck.MarshalPatch(guarded)
	if err != nil {
		return floorPatch{}, fmt.Errorf("%s: %w", name, err)
	}
	return floorPatch{namespace: d.Namespace, name: d.Name, body: body}, nil
}

// bindkitPatches is bindkitPatch for each of deps.
func bindkitPatches(deps []*appsv1.Deployment, do func(*duck.WithPod), by duck.BoundBy, generation int64) ([]floorPatch, error) {
	out := make([]floorPatch, len(deps))
	for i, d := range deps {
		p, err := bindkitPatch(d, do, by, generation)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// sendPatches is the floor: each JSON patch through the typed client-go
// clientset, workers at a time, with nothing else around it.
func sendPatches(ctx context.Context, kube kubernetes.Interface, patches []floorPatch, workers int) error {
	sem := make(chan struct{}, workers)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, p := range patches {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_, err := kube.AppsV1().Deployments(p.namespace).Patch(ctx, p.name, types.JSONPatchType, p.body, metav1.PatchOptions{})
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("apps/v1 Deployment %s/%s: patch: %w", p.namespace, p.name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d patches failed, first: %w", len(errs), len(patches), errs[0])
	}
	return nil
}
