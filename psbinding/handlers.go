package psbinding

import (
	"k8s.io/client-go/tools/cache"

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
