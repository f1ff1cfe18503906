package admission_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"

	"github.com/bindkit/bindkit/certificates"
	"github.com/bindkit/bindkit/psbinding"
	"github.com/bindkit/bindkit/test/faults"
)

// writes counts the writes to the webhook configuration, from a watch.
type writes struct {
	mu     sync.Mutex
	events []string // "type resourceVersion"
}

func (w *writes) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.events)
}

func (w *writes) since(n int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.events[n:])
}

func watchWrites(t *testing.T, h *faults.Harness) *writes {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	selector := fields.OneTermEqualSelector("metadata.name", faults.ConfigName).String()
	configs := h.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	// From the list's version: only writes after now are events.
	list, err := configs.List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	w, err := configs.Watch(ctx, metav1.ListOptions{FieldSelector: selector, ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	out := &writes{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Added || ev.Type == watch.Modified || ev.Type == watch.Deleted {
				cfg, _ := ev.Object.(*admissionregistrationv1.MutatingWebhookConfiguration)
				out.mu.Lock()
				out.events = append(out.events, fmt.Sprintf("%s %s", ev.Type, cfg.GetResourceVersion()))
				out.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return out
}

// owned is what bindkit owns in its webhook, for comparison.
type owned struct {
	Rules    []admissionregistrationv1.RuleWithOperations
	URL      string
	CABundle []byte
	Selector []metav1.LabelSelectorRequirement
	// OwnPatches is psbinding.OwnPatchesCondition's expression.
	OwnPatches string
}

func ownedOf(wh admissionregistrationv1.MutatingWebhook) owned {
	o := owned{Rules: wh.Rules, CABundle: wh.ClientConfig.CABundle}
	for _, c := range wh.MatchConditions {
		if c.Name == psbinding.OwnPatchesCondition {
			o.OwnPatches = c.Expression
		}
	}
	if wh.ClientConfig.URL != nil {
		o.URL = *wh.ClientConfig.URL
	}
	if wh.NamespaceSelector != nil {
		o.Selector = wh.NamespaceSelector.MatchExpressions
	}
	return o
}

// TestConfigurationRestoredWithRealAPIServer: the controller binary keeps
// its MutatingWebhookConfiguration programmed. An administrator's edit of
// what bindkit owns (a rule added, the path and caBundle changed, its
// selector dropped) is undone within seconds, while what the administrator
// owns (failurePolicy, timeoutSeconds, matchConditions but bindkit's, a selector
// requirement of their own) stays. Deleted and re-applied from config/'s
// YAML, the configuration is programmed again within seconds. Once
// settled, nothing writes to it.
// adminConditions are the webhook's match conditions but bindkit's.
func adminConditions(wh admissionregistrationv1.MutatingWebhook) []admissionregistrationv1.MatchCondition {
	var out []admissionregistrationv1.MatchCondition
	for _, c := range wh.MatchConditions {
		if c.Name != psbinding.OwnPatchesCondition {
			out = append(out, c)
		}
	}
	return out
}

func TestConfigurationRestoredWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	h := faults.Start(t, env, repoRoot)
	ns := h.Namespace("heal-")
	h.Binding(ns, "heal", "heal", "")
	h.WaitAdmissionBinds(ns, "heal")
	configs := h.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations()
	ctx := context.Background()
	programmed, err := h.Configuration()
	if err != nil {
		t.Fatal(err)
	}
	want := ownedOf(programmed.Webhooks[0])
	if want.OwnPatches == "" {
		t.Errorf("programmed webhook has no %s match condition: %v", psbinding.OwnPatchesCondition, programmed.Webhooks[0].MatchConditions)
	}
	settle := func(what string) {
		t.Helper()
		w := watchWrites(t, h)
		time.Sleep(5 * time.Second)
		if extra := w.since(0); len(extra) > 0 {
			t.Errorf("%s: %d writes to the configuration in the 5s after it settled, want 0: %v", what, len(extra), extra)
		}
	}
	settle("programmed")

	// 1. The administrator edits.
	w := watchWrites(t, h)
	edited := programmed.DeepCopy()
	wh := &edited.Webhooks[0]
	wh.Rules = append(wh.Rules, admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	})
	wh.ClientConfig.URL = ptr.To(fmt.Sprintf("https://127.0.0.1:%d/elsewhere", h.Port))
	foreign, err := certificates.GenerateCA("someone else's CA", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	wh.ClientConfig.CABundle = foreign.CertPEM
	admins := metav1.LabelSelectorRequirement{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"frozen"}}
	wh.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{admins}}
	wh.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
	wh.TimeoutSeconds = ptr.To[int32](5)
	wh.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "not-kube-system-sa", Expression: `!request.userInfo.username.startsWith("system:serviceaccount:kube-system:")`}}
	if _, err := configs.Update(ctx, edited, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantEdited := want
	wantEdited.Selector = append(slices.Clone(want.Selector), admins)
	restored := h.Eventually("edit undone", 30*time.Second, func() (string, error) {
		got, err := h.Configuration()
		if err != nil {
			return err.Error(), nil
		}
		return cmp.Diff(wantEdited, ownedOf(got.Webhooks[0])), nil
	})
	got, err := h.Configuration()
	if err != nil {
		t.Fatal(err)
	}
	type adminOwned struct {
		FailurePolicy   admissionregistrationv1.FailurePolicyType
		TimeoutSeconds  int32
		MatchConditions []admissionregistrationv1.MatchCondition
	}
	if diff := cmp.Diff(adminOwned{admissionregistrationv1.Ignore, 5, wh.MatchConditions},
		adminOwned{*got.Webhooks[0].FailurePolicy, *got.Webhooks[0].TimeoutSeconds, adminConditions(got.Webhooks[0])}); diff != "" {
		t.Errorf("what the administrator owns after the repair (-want +got):\n%s", diff)
	}
	editWrites := w.count()
	t.Logf("edit undone in %.2fs, with %d writes (the edit included)", restored.Seconds(), editWrites)
	settle("after the edit")

	// 2. Deleted, then re-applied from config/.
	if err := configs.Delete(ctx, faults.ConfigName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	w = watchWrites(t, h)
	reapplied := h.InstallConfiguration()
	yamlPolicy, yamlTimeout := *reapplied.Webhooks[0].FailurePolicy, *reapplied.Webhooks[0].TimeoutSeconds
	restored = h.Eventually("re-applied configuration programmed", 30*time.Second, func() (string, error) {
		got, err := h.Configuration()
		if err != nil {
			return err.Error(), nil
		}
		return cmp.Diff(want, ownedOf(got.Webhooks[0])), nil
	})
	got, err = h.Configuration()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(adminOwned{yamlPolicy, yamlTimeout, nil},
		adminOwned{*got.Webhooks[0].FailurePolicy, *got.Webhooks[0].TimeoutSeconds, adminConditions(got.Webhooks[0])}); diff != "" {
		t.Errorf("what the re-applied YAML set (-want +got):\n%s", diff)
	}
	t.Logf("re-applied configuration programmed in %.2fs, with %d writes (the create included)", restored.Seconds(), w.count())
	settle("after the re-apply")
	h.WaitAdmissionBinds(ns, "heal")
	h.Audit(ns)
}
