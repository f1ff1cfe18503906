package envtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

func TestAttachChecksWhatTheControlPlaneRuns(t *testing.T) {
	plane := description{KubeMinor: NewestMinor, ControllerManager: true, Controllers: DefaultControllers(), AuditLog: "/tmp/audit.log"}
	workloads := plane
	workloads.Workloads, workloads.Nodes, workloads.Controllers = true, 2, withWorkloadControllers(DefaultControllers())
	tests := []struct {
		name  string
		plane description
		opts  Options
		want  []string
	}{
		{name: "nothing asked", plane: plane},
		{name: "what it runs", plane: plane, opts: Options{ControllerManager: true, Audit: true}},
		{name: "less than it runs", plane: workloads, opts: Options{ControllerManager: true}},
		{name: "workloads", plane: workloads, opts: Options{Workloads: true}},
		{name: "another minor", plane: plane, opts: Options{KubeMinor: "1.36"}, want: []string{"Kubernetes 1.36 (it runs " + NewestMinor + ")"}},
		{
			name: "more than it runs", plane: plane, opts: Options{Workloads: true, WebhookClientAuth: true},
			want: []string{
				"workloads (Options.Workloads)", "webhook client authentication (Options.WebhookClientAuth)",
				"the controller deployment-controller", "the controller replicaset-controller", "the controller statefulset-controller",
				"the controller daemonset-controller", "the controller job-controller", "the controller cronjob-controller",
			},
		},
		{name: "no controller manager", plane: description{KubeMinor: NewestMinor}, opts: Options{ControllerManager: true}, want: []string{"kube-controller-manager (Options.ControllerManager)"}},
		{name: "another number of nodes", plane: workloads, opts: Options{Workloads: true, Nodes: 3}, want: []string{"3 nodes (it runs 2)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			if opts.KubeMinor == "" {
				opts.KubeMinor = NewestMinor // whatever BINDKIT_KUBE_MINOR says
			}
			opts, minor, err := opts.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			got := tt.plane.lacks(opts, minor)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("lacks (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAttachWithRealControlPlane: a test attached to a running control
// plane reaches it with its own directory, installs its CRDs there, and
// leaves it running when it stops; one that asks for more than it runs is
// told what is missing.
func TestAttachWithRealControlPlane(t *testing.T) {
	plane, err := Start(context.Background(), Options{Audit: true})
	switch {
	case errors.Is(err, ErrBinariesMissing) && !InCI():
		t.Skipf("integration test needs a control plane: %v", err)
	case err != nil:
		t.Fatal(err)
	}
	defer plane.Stop()
	path := filepath.Join(t.TempDir(), "plane.json")
	if err := plane.Describe(path); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("description %s: %v, mode %v; want it readable by its owner only (it holds the token)", path, err, info.Mode())
	}

	env, err := Attach(context.Background(), path, Options{Audit: true, CRDPaths: []string{"../config/300-githubbinding.yaml"}})
	if err != nil {
		t.Fatal(err)
	}
	if env.Dir == plane.Dir || env.Config.Host != plane.Config.Host || env.KubeMinor() != plane.KubeMinor() {
		t.Errorf("attached: dir %s host %s minor %s; want a dir of its own and the plane's host %s and minor %s",
			env.Dir, env.Config.Host, env.KubeMinor(), plane.Config.Host, plane.KubeMinor())
	}
	kube := kubernetes.NewForConfigOrDie(env.Config)
	crds, err := kube.Discovery().ServerResourcesForGroupVersion("bindings.bindkit.dev/v1alpha1")
	if err != nil || len(crds.APIResources) == 0 {
		t.Errorf("the attached tests' CRD is not served: %v", err)
	}
	if _, err := kube.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Errorf("list namespaces through the attached environment: %v", err)
	}
	if events, err := env.AuditEvents(); err != nil || len(events) == 0 {
		t.Errorf("audit events through the attached environment: %d, %v", len(events), err)
	}
	if diff := cmp.Diff(plane.PIDs(), env.PIDs()); diff != "" {
		t.Errorf("PIDs (-plane +attached):\n%s", diff)
	}
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range plane.PIDs() {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("process %d of the control plane after the attached environment stopped: %v", pid, err)
		}
	}
	if _, err := os.Stat(env.Dir); !os.IsNotExist(err) {
		t.Errorf("attached directory %s after Stop: %v, want it removed", env.Dir, err)
	}

	_, err = Attach(context.Background(), path, Options{Workloads: true})
	if err == nil || !strings.Contains(err.Error(), "workloads (Options.Workloads)") || !strings.Contains(err.Error(), ControlPlaneEnv) {
		t.Errorf("Attach asking for workloads = %v, want an error naming them and %s", err, ControlPlaneEnv)
	}
}
