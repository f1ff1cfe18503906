package main

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

// TestConfigNamesAreMains: the webhook configuration config/ installs,
// after config/default's namePrefix, is the one main wires, with its
// webhook and path, and the RBAC grants it by that name.
func TestConfigNamesAreMains(t *testing.T) {
	var kustomization struct {
		NamePrefix string `json:"namePrefix"`
	}
	readYAML(t, "../config/default/kustomization.yaml", &kustomization)
	var cfg admissionregistrationv1.MutatingWebhookConfiguration
	readYAML(t, "../config/webhook/manifests.yaml", &cfg)
	type names struct{ Configuration, Webhook, Path string }
	got := names{Configuration: kustomization.NamePrefix + cfg.Name}
	if len(cfg.Webhooks) == 1 && cfg.Webhooks[0].ClientConfig.Service != nil && cfg.Webhooks[0].ClientConfig.Service.Path != nil {
		got.Webhook, got.Path = cfg.Webhooks[0].Name, *cfg.Webhooks[0].ClientConfig.Service.Path
	}
	want := names{WebhookConfigurationName, WebhookName, WebhookPath}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config/ and cmd/main.go name the webhook differently (-main +config):\n%s", diff)
	}
	role, err := os.ReadFile("../config/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !contains(string(role), `resourceNames: ["`+WebhookConfigurationName+`"]`) {
		t.Errorf("config/rbac/role.yaml does not grant the webhook configuration %s by name", WebhookConfigurationName)
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
