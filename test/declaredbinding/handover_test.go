package declaredbinding_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/test/apiproxy"
	"github.com/bindkit/bindkit/test/declaredbinding/v1alpha1"
)

// TestRestartFromWebhookToPolicyRefusesNoCreate: a process admitting the
// kind by webhook is replaced, as a rolling update replaces a pod, by one
// admitting it by policy (the default), while a Job is created every
// 10 ms (a Job is bound at admission or never): no create is refused, and
// every Job is bound.
func TestRestartFromWebhookToPolicyRefusesNoCreate(t *testing.T) {
	r := newRig(t, "restart-")
	r.binding("win", "1")
	// A grace period, as a deployment's: the kube-apiserver's connections
	// to the old process close after their next answer, not under it.
	old := r.start(policy.ByWebhook, 2*time.Second)
	r.waitBound("the webhook to bind a Job", "1")
	c := r.startCreating()
	time.Sleep(500 * time.Millisecond)
	next := r.start(policy.ByPolicy, -1)
	old.stop(t)
	r.poll("the policy to take over", func() (string, error) {
		if !strings.Contains(next.logs.String(), "admission policy seen in force") {
			return "not seen in force yet", nil
		}
		n, err := r.webhookRules()
		if n > 0 {
			return "the webhook is still in the path", err
		}
		return "", err
	})
	time.Sleep(time.Second)
	c.end()
	c.mu.Lock()
	defer c.mu.Unlock()
	unbound := 0
	for _, j := range c.created {
		if xOf(j) != "1" {
			unbound++
			t.Errorf("Job %s created unbound", j.Name)
		}
	}
	t.Logf("%d Jobs created, %d unbound, %d refused", len(c.created), unbound, len(c.refused))
	for _, refusal := range c.refused {
		t.Errorf("create refused: %s", refusal)
	}
	if t.Failed() {
		t.Logf("new process's log:\n%s", next.logs.tail(60))
	}
}

// TestStopThenStartBetweenPathsRefusesNoCreate: the process is stopped,
// then the next one started (a Recreate update, or a restart with another
// --declarative-admission), from one admission path to the other, while a
// Job is created every 10 ms: no create is refused and every Job is bound,
// the one while no process runs too. The process stopping hands the kind
// to the policy before its webhook leaves the path (by webhook), or has
// (by policy), so each stop ends before its webhook's grace period (a
// minute here) does. Once more with the stopping process's writes of the
// policy's bindings held a second each by a proxy: the webhook leaves only
// once the policy is seen applied, however late the kube-apiserver has it.
func TestStopThenStartBetweenPathsRefusesNoCreate(t *testing.T) {
	for _, tc := range []struct {
		from, to     policy.Admission
		slowBindings bool
	}{
		{from: policy.ByWebhook, to: policy.ByPolicy},
		{from: policy.ByWebhook, to: policy.ByPolicy, slowBindings: true},
		{from: policy.ByPolicy, to: policy.ByWebhook},
	} {
		name := string(tc.from) + " to " + string(tc.to)
		if tc.slowBindings {
			name += ", the policy's bindings written slowly"
		}
		t.Run(name, func(t *testing.T) {
			r := newRig(t, "stopstart-")
			r.binding("win", "1")
			const grace = time.Minute
			if tc.slowBindings {
				proxy := apiproxy.Start(t, r.env.Config, t.TempDir())
				proxy.Add(&apiproxy.Rule{Delay: time.Second, Match: func(req apiproxy.Request) bool {
					return (req.Method == "POST" || req.Method == "PUT") && strings.Contains(req.Path, "/mutatingadmissionpolicybindings")
				}})
				r.kubeconfig = proxy.Kubeconfig
			}
			old := r.start(tc.from, grace)
			r.kubeconfig = r.env.KubeconfigPath
			r.waitBound("the first process to bind a Job", "1")
			if tc.from == policy.ByPolicy {
				r.waitPath(old, policy.ByPolicy)
			}
			c := r.startCreating()
			time.Sleep(500 * time.Millisecond)
			took := old.stop(t)
			t.Logf("the first process stopped in %v", took.Round(time.Millisecond))
			if took >= grace/2 {
				t.Errorf("the first process took %v to stop, with its webhook out of the path: its grace period (%v) was not cut short", took, grace)
			}
			if !strings.Contains(old.logs.String(), "webhook out of the kube-apiserver's path") {
				t.Errorf("the first process did not say its webhook left the path:\n%s", old.logs.tail(20))
			}
			time.Sleep(300 * time.Millisecond) // no process
			next := r.start(tc.to, -1)
			r.waitPath(next, tc.to)
			time.Sleep(time.Second)
			c.end()
			c.mu.Lock()
			defer c.mu.Unlock()
			unbound := 0
			for _, j := range c.created {
				if xOf(j) != "1" {
					unbound++
					t.Errorf("Job %s created unbound", j.Name)
				}
			}
			t.Logf("%d Jobs created, %d unbound, %d refused", len(c.created), unbound, len(c.refused))
			for _, refusal := range c.refused {
				t.Errorf("create refused: %s", refusal)
			}
			if t.Failed() {
				t.Logf("first process's log:\n%s\nnext process's log:\n%s", old.logs.tail(30), next.logs.tail(30))
			}
		})
	}
}

// waitPath waits until p's admission path alone is in the kube-apiserver's
// path: by policy, the policy seen in force and the webhook without rules;
// by webhook, the policy gone and the webhook with rules.
func (r *rig) waitPath(p *proc, path policy.Admission) {
	r.t.Helper()
	name := policy.MutatingPolicyName(v1alpha1.GroupVersionResource().GroupResource())
	r.poll("the process's path ("+string(path)+") alone", func() (string, error) {
		n, err := r.webhookRules()
		if err != nil {
			return "", err
		}
		_, err = r.kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(r.t.Context(), name, metav1.GetOptions{})
		switch {
		case path == policy.ByPolicy && !strings.Contains(p.logs.String(), "admission policy seen in force"):
			return "the policy not seen in force yet", nil
		case path == policy.ByPolicy && n > 0:
			return "the webhook is still in the path", nil
		case path == policy.ByWebhook && n == 0:
			return "the webhook has no rules", nil
		case path == policy.ByWebhook && !apierrors.IsNotFound(err):
			return fmt.Sprintf("the policy is still there (%v)", err), nil
		}
		return "", nil
	})
}
