package fixturebinding_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/test/fixturebinding"
)

// With 600 namespaces holding Bindings (more than the 500 the selector
// once named), the webhook's namespaceSelector still names only them: with
// the controller stopped and failurePolicy Fail, a Deployment create in a
// namespace without Bindings succeeds, one in a namespace with a Binding
// is refused.
func TestBlastRadiusAt600NamespacesWithRealAPIServer(t *testing.T) {
	const n = 600
	r := newRig(t)
	ctx := context.Background()
	namespaces := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range namespaces {
		namespaces[i] = r.env.CreateNamespace(t, fmt.Sprintf("radius-%03d-", i))
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := r.tryBinding(fixturebinding.Kind, namespaces[i], "b", "web"); err != nil {
				t.Errorf("binding in %s: %v", namespaces[i], err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	free := r.env.CreateNamespace(t, "radius-free-")
	name := fixturebinding.GVR(fixturebinding.Kind).GroupResource().String()
	var named int
	poll(t, "the namespaceSelector names every namespace holding a Binding", 3*time.Minute, func() bool {
		cfg, err := r.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
		if err != nil || cfg.Webhooks[0].NamespaceSelector == nil {
			return false
		}
		for _, e := range cfg.Webhooks[0].NamespaceSelector.MatchExpressions {
			if e.Key == corev1.LabelMetadataName && e.Operator == metav1.LabelSelectorOpIn {
				named = len(e.Values)
				return !slices.Contains(e.Values, free) && !slices.ContainsFunc(namespaces, func(ns string) bool { return !slices.Contains(e.Values, ns) })
			}
		}
		return false
	})
	t.Logf("the namespaceSelector names %d namespaces", named)
	// The kube-apiserver loads the configuration some time after it is
	// written; until then a create there would succeed with the webhook down.
	r.waitAdmission(namespaces[n-1], "probe", map[string]string{"app": "web"}, boundBy(fixturebinding.Kind, "b"))

	r.stop() // the webhook no longer answers
	if _, err := r.deployment(free, "web", map[string]string{"app": "web"}); err != nil {
		t.Errorf("create in a namespace without Bindings, with the webhook down: %v", err)
	}
	_, err := r.deployment(namespaces[n-1], "web", map[string]string{"app": "web"})
	if err == nil || !strings.Contains(err.Error(), name) {
		t.Errorf("create in a namespace with a Binding, with the webhook down and failurePolicy Fail: got %v, want a refusal by webhook %s", err, name)
	}
	// The only subject: the one created where no Binding is.
	r.audit(free)
}
