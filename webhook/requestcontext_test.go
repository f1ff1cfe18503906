package webhook

import (
	"context"
	"errors"
	"testing"
	"time"
)

type parentKey struct{}

// TestAdmissionContext checks that the context a controller gets behaves
// as the composition it replaces, WithDryRun(withRequestState(
// context.WithDeadline(parent, deadline), st), dryRun): its deadline, its
// end (by the deadline, by the parent, by the request's answer), its
// values, context.Cause and AfterFunc, whichever is asked for first.
func TestAdmissionContext(t *testing.T) {
	s := newTestServer(t, Options{}, allowAll("/a"))
	parentDeadline := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name        string
		hasDeadline bool
		in          time.Duration // the request's deadline from now
		parentEnds  bool          // the parent has an earlier deadline
	}{
		{"no deadline", false, 0, false},
		{"deadline", true, time.Minute, false},
		{"deadline passed", true, -time.Second, false},
		{"parent's deadline earlier", true, 2 * time.Hour, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, first := range []string{"Deadline", "Done", "Err", "Value", "Cause", "AfterFunc", "stop"} {
				parent := context.WithValue(context.Background(), parentKey{}, "p")
				var stopParent context.CancelFunc = func() {}
				if tc.parentEnds {
					parent, stopParent = context.WithDeadline(parent, parentDeadline)
				}
				deadline := time.Now().Add(tc.in)
				c := s.newAdmissionContext(parent, deadline, tc.hasDeadline)
				c.dryRun = true
				want := parent
				stopWant := context.CancelFunc(func() {})
				if tc.hasDeadline {
					want, stopWant = context.WithDeadline(parent, deadline)
				}
				want = WithDryRun(withRequestState(want, &c.state), true)
				switch first { // asked first, before the comparisons below
				case "Deadline":
					c.Deadline()
				case "Done":
					c.Done()
				case "Err":
					c.Err()
				case "Value":
					c.Value(parentKey{})
				case "Cause":
					context.Cause(c)
				case "AfterFunc":
					context.AfterFunc(c, func() {})()
				case "stop":
					c.stop()
					stopWant()
				}
				gd, gok := c.Deadline()
				wd, wok := want.Deadline()
				if !gd.Equal(wd) || gok != wok {
					t.Errorf("%s first: Deadline %v %v, want %v %v", first, gd, gok, wd, wok)
				}
				if g, w := c.Err(), want.Err(); !errors.Is(g, w) || (g == nil) != (w == nil) {
					t.Errorf("%s first: Err %v, want %v", first, g, w)
				}
				if g, w := context.Cause(c), context.Cause(want); !errors.Is(g, w) || (g == nil) != (w == nil) {
					t.Errorf("%s first: Cause %v, want %v", first, g, w)
				}
				if g := c.Value(parentKey{}); g != "p" {
					t.Errorf("%s first: parent's value %v", first, g)
				}
				if !IsDryRun(c) || stateFrom(c) != &c.state || ObjectLimitsFrom(c) != s.opts.ObjectLimits {
					t.Errorf("%s first: IsDryRun %v, state %p (want %p)", first, IsDryRun(c), stateFrom(c), &c.state)
				}
				if g, w := closed(c.Done()), closed(want.Done()); g != w {
					t.Errorf("%s first: Done closed %v, want %v", first, g, w)
				}
				ran := make(chan struct{})
				context.AfterFunc(c, func() { close(ran) })
				c.stop()
				stopWant()
				stopParent()
				if !tc.hasDeadline && !tc.parentEnds {
					continue // nothing ends the parent here
				}
				select {
				case <-c.Done():
				case <-time.After(10 * time.Second):
					t.Fatalf("%s first: not done after stop", first)
				}
				<-ran
				if g, w := c.Err(), want.Err(); !errors.Is(g, w) {
					t.Errorf("%s first: Err after stop %v, want %v", first, g, w)
				}
				// A context first used after stop is ended too.
				late := s.newAdmissionContext(parent, deadline, tc.hasDeadline)
				late.stop()
				if late.Err() == nil {
					t.Errorf("%s first: a context used first after stop has not ended", first)
				}
			}
		})
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestAdmissionContextDeadlineFires checks that the deadline's context,
// made lazily, still ends at the deadline.
func TestAdmissionContextDeadlineFires(t *testing.T) {
	s := newTestServer(t, Options{}, allowAll("/a"))
	c := s.newAdmissionContext(context.Background(), time.Now().Add(20*time.Millisecond), true)
	defer c.stop()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("deadline did not end the context")
	}
	if !errors.Is(c.Err(), context.DeadlineExceeded) || !errors.Is(context.Cause(c), context.DeadlineExceeded) {
		t.Errorf("Err %v, Cause %v, want DeadlineExceeded", c.Err(), context.Cause(c))
	}
}
