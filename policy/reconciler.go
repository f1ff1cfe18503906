package policy

import (
	"context"
	"errors"
	"fmt"

	"go.uber.org/zap"

	"github.com/bindkit/bindkit/controller"
)

// Object is one cluster-scoped object a Reconciler keeps programmed, or a
// set of them kept under one key (BindingSet).
//
// Ensure reads the object (from a cache, for speed), creates it when it is
// missing and restores its desired spec when it differs, and reports what it
// did. It must be idempotent: a call that finds the object as desired sends
// no request. It is called from one goroutine at a time per Object.
type Object interface {
	// Name is the object's metadata.name; it is also the key the
	// Reconciler is enqueued with.
	Name() string
	// Ensure programs the object and says whether it wrote.
	Ensure(ctx context.Context) (Action, error)
}

// Action is what Ensure did.
type Action string

// The actions Ensure reports.
const (
	Unchanged Action = "unchanged"
	Created   Action = "created"
	Restored  Action = "restored"
)

// Options configure a Reconciler. Objects is required; the zero Logger is
// zap.NewNop().
type Options struct {
	// Objects are the objects to keep programmed, each under its own name.
	Objects []Object
	// Logger logs each create and restore at Info.
	Logger *zap.Logger
}

// Reconciler keeps a list of Objects programmed while its replica leads. It
// is a controller.Reconciler and controller.LeaderAware: on promotion it
// enqueues every object's name, so a new leader heals what changed while
// no replica led.
type Reconciler struct {
	controller.LeaderAwareFuncs
	objects map[string]Object
	names   []string
	logger  *zap.Logger
}

var (
	_ controller.Reconciler  = (*Reconciler)(nil)
	_ controller.LeaderAware = (*Reconciler)(nil)
)

// NewReconciler validates opts into a Reconciler.
func NewReconciler(opts Options) (*Reconciler, error) {
	if len(opts.Objects) == 0 {
		return nil, errors.New("policy: Options.Objects: at least one object is required")
	}
	r := &Reconciler{objects: map[string]Object{}, logger: opts.Logger}
	if r.logger == nil {
		r.logger = zap.NewNop()
	}
	for i, o := range opts.Objects {
		if o == nil || o.Name() == "" {
			return nil, fmt.Errorf("policy: Options.Objects[%d]: an object with a name is required", i)
		}
		if _, dup := r.objects[o.Name()]; dup {
			return nil, fmt.Errorf("policy: Options.Objects[%d]: name %q is used twice", i, o.Name())
		}
		r.objects[o.Name()] = o
		r.names = append(r.names, o.Name())
	}
	r.PromoteFunc = func(enqueue func(string)) {
		for _, n := range r.names {
			enqueue(n)
		}
	}
	return r, nil
}

// Names returns the objects' names, in the order of Options.Objects.
func (r *Reconciler) Names() []string { return append([]string(nil), r.names...) }

// Reconcile implements controller.Reconciler: key is an object's name. A
// follower does nothing (the Impl reconciles the key again on promotion).
func (r *Reconciler) Reconcile(ctx context.Context, key string) error {
	o, ok := r.objects[key]
	if !ok || !r.IsLeader() {
		return nil
	}
	action, err := o.Ensure(ctx)
	if err != nil {
		return err
	}
	if action != Unchanged {
		r.logger.Info("admission policy object programmed", zap.String("name", key), zap.String("action", string(action)))
	}
	return nil
}
