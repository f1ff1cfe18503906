package config

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/reconciler/githubbinding"
	"github.com/bindkit/bindkit/webhook"
)

func str(t *testing.T, obj *unstructured.Unstructured, fields ...string) string {
	t.Helper()
	s, _, err := unstructured.NestedString(obj.Object, fields...)
	if err != nil {
		t.Fatalf("%s %s: %v: %v", obj.GetKind(), key(obj), fields, err)
	}
	return s
}

// TestNamesMatchTheCode proves the YAML names what the binary looks for:
// a mismatch here is a controller that never finds its Secret, Service or
// webhook configuration.
func TestNamesMatchTheCode(t *testing.T) {
	ms := readManifests(t, ".")
	crd := find(t, ms, "CustomResourceDefinition", v1alpha1.Resource+"."+v1alpha1.GroupName)
	mwc := find(t, ms, "MutatingWebhookConfiguration", githubbinding.WebhookConfigurationName)
	webhooks, _, _ := unstructured.NestedSlice(mwc.Object, "webhooks")
	if len(webhooks) != 1 {
		t.Fatalf("webhook configuration has %d webhooks, want 1", len(webhooks))
	}
	wh := &unstructured.Unstructured{Object: webhooks[0].(map[string]any)}
	deployment := find(t, ms, "Deployment", "githubbinding-controller")
	containers, _, _ := unstructured.NestedSlice(deployment.Object, "spec", "template", "spec", "containers")
	container := &unstructured.Unstructured{Object: containers[0].(map[string]any)}
	env, _, _ := unstructured.NestedSlice(container.Object, "env")
	envField, _, _ := unstructured.NestedString(env[0].(map[string]any), "valueFrom", "fieldRef", "fieldPath")

	got := map[string]string{
		"crd group":             str(t, crd, "spec", "group"),
		"crd kind":              str(t, crd, "spec", "names", "kind"),
		"secret":                find(t, ms, "Secret", webhook.DefaultSecretName).GetNamespace(),
		"service":               find(t, ms, "Service", webhook.DefaultServiceName).GetNamespace(),
		"webhook name":          str(t, wh, "name"),
		"webhook service":       str(t, wh, "clientConfig", "service", "name"),
		"webhook service ns":    str(t, wh, "clientConfig", "service", "namespace"),
		"webhook path":          str(t, wh, "clientConfig", "service", "path"),
		"webhook failurePolicy": str(t, wh, "failurePolicy"),
		"webhook sideEffects":   str(t, wh, "sideEffects"),
		"deployment namespace":  deployment.GetNamespace(),
		"system namespace env":  str(t, &unstructured.Unstructured{Object: env[0].(map[string]any)}, "name") + "=" + envField,
	}
	want := map[string]string{
		"crd group":             v1alpha1.GroupName,
		"crd kind":              v1alpha1.Kind,
		"secret":                "bindkit-system",
		"service":               "bindkit-system",
		"webhook name":          githubbinding.WebhookConfigurationName,
		"webhook service":       webhook.DefaultServiceName,
		"webhook service ns":    "bindkit-system",
		"webhook path":          githubbinding.WebhookPath,
		"webhook failurePolicy": "Fail",
		"webhook sideEffects":   "None",
		"deployment namespace":  "bindkit-system",
		"system namespace env":  "SYSTEM_NAMESPACE=metadata.namespace",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("names in config/ (-code +yaml):\n%s", diff)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) != 1 || versions[0].(map[string]any)["name"] != v1alpha1.Version {
		t.Errorf("CRD versions = %v, want only %s", versions, v1alpha1.Version)
	}
}

// kustomizationFile is the kustomize base of a config directory.
const kustomizationFile = "kustomization.yaml"

// TestKustomizationListsEveryFile: `kubectl apply -k config/` applies what
// `kubectl apply -f` of each file would, in the same order, and sets the
// Deployment's image by name.
func TestKustomizationListsEveryFile(t *testing.T) {
	var k struct {
		Resources []string `json:"resources"`
		Images    []struct {
			Name string `json:"name"`
		} `json:"images"`
	}
	data, err := os.ReadFile(kustomizationFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(&k); err != nil {
		t.Fatalf("%s: %v", kustomizationFile, err)
	}
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return f == kustomizationFile })
	slices.Sort(files)
	if diff := cmp.Diff(files, k.Resources); diff != "" {
		t.Errorf("%s resources (-files +listed):\n%s", kustomizationFile, diff)
	}
	deployment, err := os.ReadFile("700-deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(k.Images) != 1 || !strings.Contains(string(deployment), "image: "+k.Images[0].Name+":") {
		t.Errorf("%s images %v: want the one image of 700-deployment.yaml", kustomizationFile, k.Images)
	}
}
