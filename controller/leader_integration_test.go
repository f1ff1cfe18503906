package controller_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestLeaderHandoverWithRealAPIServer runs two replicas of one controller,
// each with its own elector on the same coordination.k8s.io/v1 Lease in a
// real kube-apiserver. Both reconcile every key, only the leader writes, and
// when the leader stops the other replica takes the lease, is promoted,
// re-enqueues what it owns and replays the key it skipped as a follower.
func TestLeaderHandoverWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(env.Config)
	ns := env.CreateNamespace(t, "controller-")
	const owned = "owned/config"

	// A leader's write is a real one: a ConfigMap labelled with the writer
	// and the key. Creates never conflict, so the test sees every write.
	replicaOf := func(identity string) *replica {
		r := newLeaderReconciler(owned)
		r.write = func(ctx context.Context, key string) error {
			_, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				GenerateName: "write-",
				Labels:       map[string]string{"writer": identity, "key": strings.ReplaceAll(key, "/", ".")},
			}}, metav1.CreateOptions{})
			return err
		}
		return startReplicaOf(t, kube, leaseConfig(ns, "bindkit-controller", identity), r)
	}
	a := replicaOf("replica-a")
	eventually(t, "replica-a to lead", a.impl.IsLeader)
	b := replicaOf("replica-b")

	// An informer event reaches both replicas: both reconcile, one writes.
	a.impl.EnqueueKey("ns/event")
	b.impl.EnqueueKey("ns/event")
	eventually(t, "both replicas to reconcile ns/event", func() bool {
		return len(a.r.state().Writes) == 2 && len(b.r.state().Skips) == 1
	})
	if diff := cmp.Diff(leaderState{Writes: []string{owned, "ns/event"}, Promoted: 1}, a.r.state()); diff != "" {
		t.Errorf("leader replica-a (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(leaderState{Skips: []string{"ns/event"}}, b.r.state()); diff != "" {
		t.Errorf("follower replica-b (-want +got):\n%s", diff)
	}
	if got := leaseHolder(ctx, t, kube, ns); got != "replica-a" {
		t.Errorf("Lease holder = %q, want replica-a", got)
	}

	// The leader's context ends: it releases the lease and replica-b is
	// promoted, enqueues what it owns and writes it, then writes the key it
	// skipped as a follower, which its Impl remembered.
	a.stop(t)
	if diff := cmp.Diff(leaderState{Writes: []string{owned, "ns/event"}, Promoted: 1, Demoted: 1}, a.r.state()); diff != "" {
		t.Errorf("stopped replica-a (-want +got):\n%s", diff)
	}
	eventually(t, "replica-b to write what it owns and what it skipped", func() bool { return len(b.r.state().Writes) == 2 })
	if diff := cmp.Diff(leaderState{Writes: []string{owned, "ns/event"}, Skips: []string{"ns/event"}, Promoted: 1}, b.r.state()); diff != "" {
		t.Errorf("new leader replica-b (-want +got):\n%s", diff)
	}
	if got := leaseHolder(ctx, t, kube, ns); got != "replica-b" {
		t.Errorf("Lease holder = %q, want replica-b", got)
	}

	list, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "writer"})
	if err != nil {
		t.Fatalf("list writes: %v", err)
	}
	var writes []string
	for _, cm := range list.Items {
		writes = append(writes, cm.Labels["writer"]+" "+cm.Labels["key"])
	}
	slices.Sort(writes)
	want := []string{"replica-a ns.event", "replica-a owned.config", "replica-b ns.event", "replica-b owned.config"}
	if diff := cmp.Diff(want, writes); diff != "" {
		t.Errorf("writes stored in the API server (-want +got):\n%s", diff)
	}
}

func leaseHolder(ctx context.Context, t *testing.T, kube kubernetes.Interface, ns string) string {
	t.Helper()
	lease, err := kube.CoordinationV1().Leases(ns).Get(ctx, "bindkit-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Lease %s/bindkit-controller: %v", ns, err)
	}
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	return *lease.Spec.HolderIdentity
}
