package psbinding

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/tracker"
)

// SubjectEventHandler tells the tracker about every subject event, for the
// duck informers' EnqueueInformerFactory. An update reports the old object
// as well as the new one: a subject relabelled out of a selector matches
// its Binding only by its old labels, and that Binding must reconcile to
// unbind it. onError, if set, hears of objects the tracker cannot read.
func SubjectEventHandler(t tracker.Interface, onError func(error)) cache.ResourceEventHandler {
	changed := func(obj any) {
		if err := t.OnChanged(obj); err != nil && onError != nil {
			onError(err)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: changed,
		UpdateFunc: func(oldObj, newObj any) {
			changed(oldObj)
			changed(newObj)
		},
		DeleteFunc: changed,
	}
}

// SubjectEventOptions configure NewSubjectEventHandler. Every field but
// OnError is required.
type SubjectEventOptions struct {
	// Tracker finds the Bindings that track a subject.
	Tracker tracker.Interface
	// Notify is told of each Binding a status-only update concerns: the
	// tracker's own callback (enqueue the Binding).
	Notify func(tracker.Observer)
	// RollingOut reports whether the Binding an observer stands for has a
	// rollout in progress (BaseReconciler.RollingOut).
	RollingOut func(tracker.Observer) bool
	// OnError, if set, hears of objects the tracker cannot read.
	OnError func(error)
}

// NewSubjectEventHandler is SubjectEventHandler for a reconciler that
// reads a subject's status only while a rollout of one of its Bindings is
// in progress: an update that changes nothing else a reconcile reads (a
// new resourceVersion with the same UID, generation, labels, annotations
// and deletion timestamp, as a workload controller's status write makes)
// notifies only the Bindings tracking the subject that opts.RollingOut
// reports, and for the others costs one tracker lookup. Every other event
// is passed on as SubjectEventHandler passes it, a resync (the same
// resourceVersion) included. It fails, naming the field, when a required
// field is unset.
func NewSubjectEventHandler(opts SubjectEventOptions) (cache.ResourceEventHandler, error) {
	var missing []string
	for name, ok := range map[string]bool{"Tracker": opts.Tracker != nil, "Notify": opts.Notify != nil, "RollingOut": opts.RollingOut != nil} {
		if !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return nil, fmt.Errorf("psbinding: SubjectEventOptions needs %s", strings.Join(missing, ", "))
	}
	all := SubjectEventHandler(opts.Tracker, opts.OnError)
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { all.OnAdd(obj, false) },
		UpdateFunc: func(oldObj, newObj any) {
			if !statusOnly(oldObj, newObj) {
				all.OnUpdate(oldObj, newObj)
				return
			}
			observers, err := opts.Tracker.GetObservers(newObj)
			if err != nil {
				if opts.OnError != nil {
					opts.OnError(err)
				}
				return
			}
			for _, o := range observers {
				if opts.RollingOut(o) {
					opts.Notify(o)
				}
			}
		},
		DeleteFunc: all.OnDelete,
	}, nil
}

// statusOnly reports whether an update of a subject changes nothing a
// reconcile reads but the subject's status: a new resourceVersion, and
// the same UID, generation, labels, annotations and deletion timestamp.
// In the slim subject cache the annotations are the records only, so a
// change of any other annotation counts as status-only there; elsewhere
// it does not.
func statusOnly(oldObj, newObj any) bool {
	o, err1 := meta.Accessor(oldObj)
	n, err2 := meta.Accessor(newObj)
	return err1 == nil && err2 == nil &&
		o.GetResourceVersion() != n.GetResourceVersion() &&
		o.GetUID() == n.GetUID() && o.GetGeneration() == n.GetGeneration() &&
		equality.Semantic.DeepEqual(o.GetDeletionTimestamp(), n.GetDeletionTimestamp()) &&
		maps.Equal(o.GetLabels(), n.GetLabels()) && maps.Equal(o.GetAnnotations(), n.GetAnnotations())
}

// BindingEventHandler calls enqueue for every Binding added or deleted, and
// for every update that a reconcile must act on: a new generation (the
// spec changed), a deletion timestamp, finalizers, labels or annotations.
// An update of the status alone is not passed on: the reconciler writes
// the status itself, and a reconcile per status write would turn every
// failing Binding into a loop that no backoff slows down.
func BindingEventHandler(enqueue func(obj any)) cache.ResourceEventHandler {
	return bindingEvents{next: cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, newObj any) { enqueue(newObj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			enqueue(obj)
		},
	}, finalizers: true}
}

// IndexEventHandler passes on to h the Binding events that can change what
// admission does: adds, deletes, and updates of the generation, the
// deletion timestamp, labels or annotations, and of the part of the status
// admission reads: whether the rollout of the Binding's generation is
// complete (duck.RolloutStatus.Complete), so that a paced generation
// whose rollout completed reaches subjects created afterwards at once,
// and one halted after it completed reaches none from the moment the halt
// is written. Other updates of the status (a wave's progress, conditions)
// or of the finalizers alone, which the reconciler writes for every
// Binding it binds, are not: the admission index is rebuilt from all the
// Bindings on each event passed on, so with a thousand Bindings every
// event skipped saves a rebuild over all of them. An object that is not a
// Bindable is passed on whenever it changes. Give it to a GetListAll in
// place of the handler it would register.
func IndexEventHandler(h cache.ResourceEventHandler) cache.ResourceEventHandler {
	return bindingEvents{next: h, rollout: true}
}

// bindingEvents passes adds and deletes on to next, and the updates that
// change a Binding's generation, deletion timestamp, labels, annotations,
// or, when finalizers is set, finalizers, or, when rollout is set,
// whether its rollout is complete (rolloutChanged).
type bindingEvents struct {
	next                cache.ResourceEventHandler
	finalizers, rollout bool
}

func (e bindingEvents) OnAdd(obj any, isInInitialList bool) { e.next.OnAdd(obj, isInInitialList) }
func (e bindingEvents) OnDelete(obj any)                    { e.next.OnDelete(obj) }

func (e bindingEvents) OnUpdate(oldObj, newObj any) {
	o, err1 := meta.Accessor(oldObj)
	n, err2 := meta.Accessor(newObj)
	if err1 != nil || err2 != nil || o.GetGeneration() != n.GetGeneration() ||
		!equality.Semantic.DeepEqual(o.GetDeletionTimestamp(), n.GetDeletionTimestamp()) ||
		(e.finalizers && !slices.Equal(o.GetFinalizers(), n.GetFinalizers())) ||
		!maps.Equal(o.GetLabels(), n.GetLabels()) || !maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
		(e.rollout && rolloutChanged(oldObj, newObj)) {
		e.next.OnUpdate(oldObj, newObj)
	}
}

// rolloutChanged reports whether an update changes what admission reads
// of a Binding's status (admitter.holdsBack): whether the rollout of its
// generation is complete. An object that is not a Bindable, whose status
// cannot be read, counts as changed.
func rolloutChanged(oldObj, newObj any) bool {
	o, ok1 := oldObj.(Bindable)
	n, ok2 := newObj.(Bindable)
	return !ok1 || !ok2 || rolloutCompleteOf(o) != rolloutCompleteOf(n)
}

// rolloutCompleteOf reports whether b's status records the rollout of its
// generation complete.
func rolloutCompleteOf(b Bindable) bool {
	rec, ok := b.GetBindingStatus().(duck.RolloutRecorder)
	return ok && rec.GetRollout().Complete(b.GetGeneration())
}

// PromoteAll returns a LeaderAwareFuncs.PromoteFunc that enqueues every
// Binding listAll lists, so a new leader re-checks what a follower skipped.
func PromoteAll(listAll ListAll, onError func(error)) func(enqueue func(key string)) {
	return func(enqueue func(string)) {
		bindings, err := listAll()
		if err != nil {
			if onError != nil {
				onError(err)
			}
			return
		}
		for _, b := range bindings {
			enqueue(b.GetNamespace() + "/" + b.GetName())
		}
	}
}
