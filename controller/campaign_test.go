package controller

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/zap"
)

// TestCampaignOrdersCallbacks covers the orders in which client-go may run
// OnStartedLeading (on its own goroutine) and OnStoppedLeading.
func TestCampaignOrdersCallbacks(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()

	tests := []struct {
		name  string
		steps func(c *campaign)
		want  []string
	}{{
		name:  "started then stopped",
		steps: func(c *campaign) { c.started(live); c.stopped() },
		want:  []string{"promote", "demote"},
	}, {
		name:  "started after its term ended promotes nothing",
		steps: func(c *campaign) { c.stopped(); c.started(ended) },
		want:  nil,
	}, {
		name:  "started twice promotes once",
		steps: func(c *campaign) { c.started(live); c.started(live); c.stopped(); c.stopped() },
		want:  []string{"promote", "demote"},
	}, {
		name:  "close demotes a leader",
		steps: func(c *campaign) { c.started(live); c.close() },
		want:  []string{"promote", "demote"},
	}, {
		name:  "started after close promotes nothing",
		steps: func(c *campaign) { c.close(); c.started(live) },
		want:  nil,
	}, {
		name:  "a new term after a lost one promotes again",
		steps: func(c *campaign) { c.started(live); c.stopped(); c.started(live); c.close() },
		want:  []string{"promote", "demote", "promote", "demote"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			r := &struct {
				ReconcilerFunc
				LeaderAwareFuncs
			}{ReconcilerFunc: func(context.Context, string) error { return nil }}
			r.PromoteFunc = func(func(string)) { got = append(got, "promote") }
			r.DemoteFunc = func() { got = append(got, "demote") }
			impl := NewImpl(r, nil, "campaign")
			c := &campaign{impls: []*Impl{impl}, logger: zap.NewNop()}
			tt.steps(c)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}
