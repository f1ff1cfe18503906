package bindingtest

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/psbinding"
)

// caller runs a Binding's Do and Undo as the framework does: each call on
// a fresh copy of the Binding (the reconciler and the webhook read it from
// the API server, in whichever process and reconcile, and give each call
// a copy of its own), with its panic recovered.
type caller struct {
	ctx context.Context
	b   psbinding.Bindable
}

// fresh returns a new deep copy of the Binding.
func (c caller) fresh() psbinding.Bindable {
	if cp, ok := c.b.DeepCopyObject().(psbinding.Bindable); ok {
		return cp
	}
	return c.b // a DeepCopyObject of another type: the contract check still runs
}

// panicked is a panic of Do or Undo, with where in the author's code.
type panicked struct {
	call  string
	value any
	at    string // file:line of the innermost frame outside the runtime and this package
}

func (p *panicked) String() string {
	return fmt.Sprintf("%s panics: %v (at %s)", p.call, p.value, p.at)
}

// do runs Do of a fresh copy on wp, and reports a Do that changes its
// Binding; see call.
func (c *subjectCheck) do(wp *duck.WithPod) *panicked { return c.callFresh("Do", wp) }

// undo runs Undo of a fresh copy on wp, and reports an Undo that changes
// its Binding; see call.
func (c *subjectCheck) undo(wp *duck.WithPod) *panicked { return c.callFresh("Undo", wp) }

func (c *subjectCheck) callFresh(what string, wp *duck.WithPod) *panicked {
	p, changed := c.call(what, c.fresh(), wp)
	if len(changed) > 0 {
		c.changesBinding(what, changed)
	}
	return p
}

// call runs Do or Undo of b on wp and returns its panic, if any, and the
// fields of b it changed (bindingChanges), compared with a deep copy of b
// taken before.
func (c caller) call(what string, b psbinding.Bindable, wp *duck.WithPod) (p *panicked, changed []string) {
	before := b.DeepCopyObject()
	defer func() {
		if v := recover(); v != nil {
			p = &panicked{call: what, value: v, at: authorFrame()}
		}
		changed = bindingChanges(before, b)
	}()
	if what == "Do" {
		b.Do(c.ctx, wp)
	} else {
		b.Undo(c.ctx, wp)
	}
	return nil, nil
}

// authorFrame names the innermost frame of a panicking goroutine that is
// neither the runtime's nor this package's: where the author's code
// panicked.
func authorFrame() string {
	pcs := make([]uintptr, 32)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	for {
		f, more := frames.Next()
		kit := strings.Contains(f.Function, "/bindkit/bindingtest.") && !strings.HasSuffix(f.File, "_test.go")
		if !strings.HasPrefix(f.Function, "runtime.") && !kit && f.File != "" {
			return fmt.Sprintf("%s:%d in %s", filepath.Base(f.File), f.Line, f.Function[strings.LastIndex(f.Function, "/")+1:])
		}
		if !more {
			return "an unknown place"
		}
	}
}
