package main

import (
	"fmt"
	"strconv"
	"strings"
)

// editKustomize adds the kind to kubebuilder's kustomizations: its CRD to
// config/crd, config/bindkit and bindkit's transformers to
// config/default, the RoleBinding of the Manager's namespaced Role (the
// markers' namespace=system rules) to config/rbac, and, the first time,
// what kubebuilder create webhook enables for a webhook: config/webhook's
// Service, config/certmanager's Certificate, the patch that mounts it,
// the replacements that name the Service in it. It leaves out
// kubebuilder's CA injection replacements: bindkit writes its webhook
// configurations' caBundle itself.
func editKustomize(e *edits, d kbData) error {
	if err := addCRD(e, d); err != nil {
		return err
	}
	if err := writeWebhookInfra(e, d); err != nil {
		return err
	}
	if _, err := e.createIfMissing("config/rbac/bindkit_role_binding.yaml", []byte(fmt.Sprintf(bindkitRoleBinding, d.ProjectName))); err != nil {
		return err
	}
	if err := e.edit("config/rbac/kustomization.yaml", func(s string) (string, error) {
		out, ok := insertAfterLine(s, "resources:", "- bindkit_role_binding.yaml")
		if !ok {
			return "", fmt.Errorf("no resources list")
		}
		return out, nil
	}); err != nil {
		return err
	}
	return e.edit("config/default/kustomization.yaml", func(s string) (string, error) {
		return editDefault(e, s)
	})
}

// bindkitRoleBinding grants the Manager the namespaced Role make manifests
// writes from the markers with namespace=system (the certificate's Secret,
// bindkit's ConfigMap); kubebuilder's role_binding.yaml grants the
// ClusterRole.
const bindkitRoleBinding = `# Grants the Manager's ServiceAccount the Role make manifests writes into
# role.yaml from the +kubebuilder:rbac markers with namespace=system:
# reading the webhook certificate's Secret and bindkit's ConfigMap in the
# Manager's own namespace.
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  labels:
    app.kubernetes.io/name: %s
    app.kubernetes.io/managed-by: kustomize
  name: bindkit-manager-rolebinding
  namespace: system
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: manager-role
subjects:
- kind: ServiceAccount
  name: controller-manager
  namespace: system
`

// addCRD lists the kind's CRD in config/crd (writing the kustomization
// when the project has no API yet).
func addCRD(e *edits, d kbData) error {
	const marker = "+kubebuilder:scaffold:crdkustomizeresource"
	if _, err := e.createIfMissing("config/crd/kustomization.yaml", []byte("# The project's CRDs, as make manifests writes them into bases/.\nresources:\n# "+marker+"\n")); err != nil {
		return err
	}
	return e.edit("config/crd/kustomization.yaml", func(s string) (string, error) {
		return insertBeforeMarker(s, marker, "- "+d.CRDFile)
	})
}

// writeWebhookInfra writes what kubebuilder create webhook would for the
// Manager's webhook server, where the project lacks it.
func writeWebhookInfra(e *edits, d kbData) error {
	for rel, name := range map[string]string{
		"config/webhook/kustomization.yaml":                "webhook_kustomization.yaml.tmpl",
		"config/webhook/manifests.yaml":                    "webhook_manifests.yaml.tmpl",
		"config/webhook/service.yaml":                      "webhook_service.yaml.tmpl",
		"config/certmanager/kustomization.yaml":            "certmanager_kustomization.yaml.tmpl",
		"config/certmanager/kustomizeconfig.yaml":          "certmanager_kustomizeconfig.yaml.tmpl",
		"config/certmanager/issuer.yaml":                   "certmanager_issuer.yaml.tmpl",
		"config/certmanager/certificate-webhook.yaml":      "certmanager_certificate-webhook.yaml.tmpl",
		"config/certmanager/certificate-metrics.yaml":      "certmanager_certificate-metrics.yaml.tmpl",
		"config/default/manager_webhook_patch.yaml":        "default_manager_webhook_patch.yaml.tmpl",
		"config/default/manager_bindkit_patch.yaml":        "default_manager_bindkit_patch.yaml.tmpl",
		"config/network-policy/allow-webhook-traffic.yaml": "networkpolicy_allow-webhook-traffic.yaml.tmpl",
	} {
		content, err := executeKB("infra/"+name, d)
		if err != nil {
			return err
		}
		if _, err := e.createIfMissing(rel, content); err != nil {
			return err
		}
	}
	if _, ok, err := e.read("config/network-policy/kustomization.yaml"); err != nil || !ok {
		return err
	}
	return e.edit("config/network-policy/kustomization.yaml", func(s string) (string, error) {
		out, _ := insertAfterLine(s, "resources:", "- allow-webhook-traffic.yaml")
		return out, nil
	})
}

// defaultSections are the commented sections of kubebuilder's
// config/default/kustomization.yaml that a webhook needs (what kubebuilder
// create webhook uncomments), but the CA injection: the CRDs, the
// webhook Service, the certificate, the patch mounting it, and the
// replacements naming the Service in the certificate.
var defaultSections = []string{
	"#- ../crd",
	"#- ../webhook",
	"#- ../certmanager",
	"#patches:",
	"#- path: manager_webhook_patch.yaml\n#  target:\n#    kind: Deployment",
	"#replacements:",
	`# - source: # Uncomment the following block if you have any webhook
#     kind: Service
#     version: v1
#     name: webhook-service
#     fieldPath: .metadata.name # Name of the service
#   targets:
#     - select:
#         kind: Certificate
#         group: cert-manager.io
#         version: v1
#         name: serving-cert
#       fieldPaths:
#         - .spec.dnsNames.0
#         - .spec.dnsNames.1
#       options:
#         delimiter: '.'
#         index: 0
#         create: true
# - source:
#     kind: Service
#     version: v1
#     name: webhook-service
#     fieldPath: .metadata.namespace # Namespace of the service
#   targets:
#     - select:
#         kind: Certificate
#         group: cert-manager.io
#         version: v1
#         name: serving-cert
#       fieldPaths:
#         - .spec.dnsNames.0
#         - .spec.dnsNames.1
#       options:
#         delimiter: '.'
#         index: 1
#         create: true`,
}

// editDefault enables defaultSections in config/default's kustomization,
// and adds config/bindkit, the SYSTEM_NAMESPACE patch and bindkit's
// transformers.
func editDefault(e *edits, s string) (string, error) {
	for _, section := range defaultSections {
		var done bool
		if s, done = uncomment(s, section); !done {
			first, _, _ := strings.Cut(section, "\n")
			e.warn("config/default/kustomization.yaml: found neither %q nor its uncommented form: enable it by hand (kubebuilder create webhook enables the same)", first)
		}
	}
	var ok bool
	if s, ok = insertAfterLine(s, "- ../manager", "# [BINDKIT] bindkit's Binding kinds: webhook configurations, admission\n# policies, aggregated roles.\n- ../bindkit"); !ok {
		return "", fmt.Errorf("no %q resource to add ../bindkit after", "- ../manager")
	}
	if s, ok = insertAfterLine(s, "patches:", "# [BINDKIT] SYSTEM_NAMESPACE, the namespace bindkit's Binding kinds run in.\n- path: manager_bindkit_patch.yaml"); !ok {
		return "", fmt.Errorf("no patches list to add manager_bindkit_patch.yaml to")
	}
	const transformers = "# [BINDKIT] After the transformations above: bindkit's objects keep the\n# names bindkit programs, no namespace, and no cert-manager CA injection\n# (bindkit writes their caBundle). See config/bindkit/transformers.\n"
	if hasLine(s, "- ../bindkit/transformers") {
		return s, nil
	}
	if hasLine(s, "transformers:") {
		s, _ = insertAfterLine(s, "transformers:", "- ../bindkit/transformers")
		return s, nil
	}
	return strings.TrimRight(s, "\n") + "\n\n" + transformers + "transformers:\n- ../bindkit/transformers\n", nil
}

// editMakefile makes kubebuilder's Makefile run bindkit's controller-gen
// (so make manifests writes the CRD bindkit generate would) unless it
// pins a newer one, which it keeps (a downgrade would undo the user's
// choice, and newer releases write the same markers), and its test
// target honour a KUBEBUILDER_ASSETS already set (no download: make test
// runs offline with the binaries there).
func editMakefile(e *edits) error {
	return e.edit("Makefile", func(s string) (string, error) {
		for _, r := range []struct{ from, to, what string }{{
			"CONTROLLER_TOOLS_VERSION ?= ", "CONTROLLER_TOOLS_VERSION ?= " + ControllerToolsVersion,
			"controller-gen " + ControllerToolsVersion + " (bindkit's): set CONTROLLER_TOOLS_VERSION",
		}, {
			"test: manifests generate fmt vet setup-envtest", "test: manifests generate fmt vet $(if $(KUBEBUILDER_ASSETS),,setup-envtest)",
			"make test without setup-envtest when KUBEBUILDER_ASSETS is set",
		}, {
			`KUBEBUILDER_ASSETS="$(shell "$(ENVTEST)" use $(ENVTEST_K8S_VERSION) --bin-dir "$(LOCALBIN)" -p path)"`,
			`KUBEBUILDER_ASSETS="$(or $(KUBEBUILDER_ASSETS),$(shell "$(ENVTEST)" use $(ENVTEST_K8S_VERSION) --bin-dir "$(LOCALBIN)" -p path))"`,
			"make test using a KUBEBUILDER_ASSETS already set",
		}} {
			if strings.Contains(s, r.to) {
				continue
			}
			i := strings.Index(s, r.from)
			if i < 0 {
				e.warn("Makefile: no %q: do by hand: %s", r.from, r.what)
				continue
			}
			end := i + len(r.from)
			if strings.HasSuffix(r.from, "?= ") {
				end = i + strings.Index(s[i:], "\n")
				if pinned := strings.TrimSpace(s[i+len(r.from) : end]); !olderRelease(pinned, ControllerToolsVersion) {
					continue // the project's own, as new as bindkit's or newer: kept
				}
			}
			s = s[:i] + r.to + s[end:]
		}
		return s, nil
	})
}

// olderRelease reports whether the release version a (v1.2.3) is older
// than b; a version it cannot read counts as older, so that bindkit's
// known release replaces it.
func olderRelease(a, b string) bool {
	pa, okA := releaseParts(a)
	pb, okB := releaseParts(b)
	if !okA || !okB {
		return true
	}
	for i := range pa {
		if pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}
	return false
}

// releaseParts reads vMAJOR.MINOR.PATCH.
func releaseParts(v string) ([3]int, bool) {
	var parts [3]int
	fields := strings.Split(strings.TrimPrefix(v, "v"), ".")
	if len(fields) != 3 {
		return parts, false
	}
	for i, f := range fields {
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return parts, false
		}
		parts[i] = n
	}
	return parts, true
}
