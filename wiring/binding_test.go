package wiring_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/bindkit/bindkit/controller"
	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/injection"
	"github.com/bindkit/bindkit/injection/injectiontest"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/wiring"
)

func TestNewDefaultsTheNames(t *testing.T) {
	b, err := wiring.New[v1alpha1.GithubBinding](v1alpha1.GroupVersionResource(), wiring.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{b.ControllerName, b.WebhookConfigurationName, b.WebhookName, b.WebhookPath}
	want := []string{"githubbindings", "githubbindings.bindings.bindkit.dev", "githubbindings.bindings.bindkit.dev", "/githubbindings"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if b.GVR != v1alpha1.GroupVersionResource() {
		t.Errorf("GVR = %v", b.GVR)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	gvr := v1alpha1.GroupVersionResource()
	tests := []struct {
		name string
		gvr  schema.GroupVersionResource
		opts wiring.Options
		want []string // substrings of the error, one per problem
	}{{
		name: "no group",
		gvr:  schema.GroupVersionResource{Version: "v1", Resource: "envbindings"},
		want: []string{`resource "/v1, Resource=envbindings": group, version and resource are all required`},
	}, {
		name: "every name wrong at once",
		gvr:  gvr,
		opts: wiring.Options{WebhookConfigurationName: "Not_A_Name", WebhookName: "short.name", WebhookPath: "githubbindings", ControllerName: " x"},
		want: []string{`Options.WebhookConfigurationName "Not_A_Name"`, `Options.WebhookName "short.name"`, `Options.WebhookPath "githubbindings"`, `Options.ControllerName " x"`},
	}, {
		name: "selector mode and concurrency",
		gvr:  gvr,
		opts: wiring.Options{SelectorMode: 7, PatchConcurrency: -1},
		want: []string{"Options.SelectorMode 7", "Options.PatchConcurrency -1"},
	}, {
		name: "rollout policy",
		gvr:  gvr,
		opts: wiring.Options{Rollout: &psbinding.RolloutPolicy{MaxChanging: intstr.FromString("ten"), Deadline: -time.Second}},
		want: []string{`Options.Rollout: MaxChanging "ten": want a count or a percentage`, "Deadline -1s"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := wiring.New[v1alpha1.GithubBinding](tc.gvr, tc.opts)
			if err == nil {
				t.Fatal("New accepted the options")
			}
			if !strings.HasPrefix(err.Error(), "wiring: GithubBinding (") {
				t.Errorf("error %q does not name the kind", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestNewControllerAndWebhookThroughFakes runs both constructors New
// returns over the injection fakes: the controller binds an existing
// Deployment and the webhook's admission controller is routed where the
// names say.
func TestNewControllerAndWebhookThroughFakes(t *testing.T) {
	var subResourcesImpl *controller.Impl
	b, err := wiring.New[v1alpha1.GithubBinding](v1alpha1.GroupVersionResource(), wiring.Options{
		SubResources: func(_ context.Context, impl *controller.Impl) psbinding.SubResourcesReconcilerInterface {
			subResourcesImpl = impl
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, fakes := injectiontest.NewContextWithOptions(t, injectiontest.Options{Resources: []injectiontest.Resource{githubBindings}},
		newGithubBinding("shop", "gh", "web"), newDeployment("shop", "web"), installedConfig(b.WebhookConfigurationName))
	ctx = injection.WithSystemNamespace(ctx, "bindkit-system")

	impl := b.Controller(ctx, nil)
	web := b.Webhook(ctx, nil)
	if subResourcesImpl != impl {
		t.Error("SubResources was not given the controller's Impl")
	}
	r, ok := impl.Reconciler().(*psbinding.BaseReconciler)
	if !ok {
		t.Fatalf("controller reconciles with %T, want *psbinding.BaseReconciler", impl.Reconciler())
	}
	ac, ok := wiring.Admission(web)
	if !ok {
		t.Fatalf("webhook reconciles with %T, want *psbinding.AdmissionReconciler", web.Reconciler())
	}
	if diff := cmp.Diff([]string{b.ControllerName, b.WebhookConfigurationName, b.WebhookPath}, []string{impl.Name(), web.Name(), ac.Path()}); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	fakes.Start(t)

	var promoted []string
	r.Promote(func(key string) { promoted = append(promoted, key) })
	if diff := cmp.Diff([]string{"shop/gh"}, promoted); diff != "" {
		t.Errorf("keys enqueued on promotion (-want +got):\n%s", diff)
	}
	if err := r.Reconcile(ctx, "shop/gh"); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	u, err := fakes.Dynamic.Resource(appsv1.SchemeGroupVersion.WithResource("deployments")).Namespace("shop").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Containers[0].VolumeMounts; len(got) != 1 || got[0].MountPath != v1alpha1.MountPath {
		t.Errorf("Deployment's mounts after reconcile = %+v, want the Binding's", got)
	}
	if bound := duck.BoundOf(d.Annotations); len(bound) != 1 {
		t.Errorf("Deployment's %s = %v, want the Binding", duck.BoundAnnotation, bound)
	}
}
