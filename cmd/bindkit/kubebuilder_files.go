package main

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/bindkit/bindkit/bindingtest"
	"github.com/bindkit/bindkit/policy"
	"github.com/bindkit/bindkit/wiring"
)

// kubebuilderTemplates holds the files `bindkit kubebuilder create
// binding` writes into a project, as text/templates of kbData.
//
//go:embed kubebuilder
var kubebuilderTemplates embed.FS

// executeKB executes the template kubebuilder/name with d.
func executeKB(name string, d kbData) ([]byte, error) {
	text, err := kubebuilderTemplates.ReadFile("kubebuilder/" + name)
	if err != nil {
		return nil, err
	}
	t, err := template.New(name).Option("missingkey=error").Parse(string(text))
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := t.Execute(&out, d); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// createFromTemplates records each template's output at its path.
func createFromTemplates(e *edits, d kbData, files map[string]string) error {
	for rel, name := range files {
		content, err := executeKB(name, d)
		if err != nil {
			return err
		}
		if err := e.create(rel, content); err != nil {
			return err
		}
	}
	return nil
}

// writeAPI writes the kind's type (with Do and Undo to fill in), its
// contract test, and the group-version's groupversion_info.go when the
// project has none.
func writeAPI(e *edits, d *kbData) error {
	gv := path.Join(d.APIDir, "groupversion_info.go")
	existing, ok, err := e.read(gv)
	if err != nil {
		return err
	}
	if ok {
		// kubebuilder before 4.13 registered types with controller-runtime's
		// scheme.Builder, since with apimachinery's.
		d.ObjectSchemeBuilder = bytes.Contains(existing, []byte("scheme.Builder{"))
	} else if err := createFromTemplates(e, *d, map[string]string{gv: "groupversion_info.go.tmpl"}); err != nil {
		return err
	}
	return createFromTemplates(e, *d, map[string]string{
		path.Join(d.APIDir, d.Lower+"_types.go"):         "types.go.tmpl",
		path.Join(d.APIDir, d.Lower+"_contract_test.go"): "contract_test.go.tmpl",
	})
}

// writeController writes the kind's wiring (with its RBAC markers) and its
// specs in the package's envtest suite, writing the suite when the project
// has none, and registers the kind's types in the suite's scheme.
func writeController(e *edits, d kbData) error {
	if err := createFromTemplates(e, d, map[string]string{
		path.Join(d.ControllerDir, d.Lower+"_wiring.go"):      "wiring.go.tmpl",
		path.Join(d.ControllerDir, d.Lower+"_wiring_test.go"): "wiring_test.go.tmpl",
	}); err != nil {
		return err
	}
	suite := path.Join(d.ControllerDir, "suite_test.go")
	content, ok, err := e.read(suite)
	if err != nil {
		return err
	}
	if !ok {
		if content, err = executeKB("suite_test.go.tmpl", d); err != nil {
			return err
		}
		e.created[suite] = true
	} else {
		for _, name := range []string{"cfg", "ctx", "k8sClient"} {
			if !bytes.Contains(content, []byte(name+" ")) {
				return fmt.Errorf("%s has no %s: the specs bindkit writes use the suite's cfg, ctx and k8sClient, as kubebuilder's suite declares them", suite, name)
			}
		}
	}
	out, err := insertBeforeMarker(string(content), "+kubebuilder:scaffold:imports", fmt.Sprintf("%s %q", d.APIAlias, d.APIImport))
	if err == nil {
		out, err = insertBeforeMarker(out, "+kubebuilder:scaffold:scheme",
			fmt.Sprintf("err = %s.AddToScheme(scheme.Scheme)\nExpect(err).NotTo(HaveOccurred())\n", d.APIAlias))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", suite, err)
	}
	e.set(suite, []byte(out))
	return nil
}

// bindkitBlockMarker marks where cmd/main.go's bindkit block takes each
// kind.
const bindkitBlockMarker = "+bindkit:scaffold:kinds"

// editMain adds the kind to cmd/main.go: its API to the scheme, and to
// bindkit's block (added the first time, before kubebuilder's builder
// marker), which runs every kind inside the Manager
// (controllerruntime.Add).
func editMain(e *edits, d kbData) error {
	return e.edit("cmd/main.go", func(s string) (string, error) {
		var err error
		for _, imp := range []string{
			fmt.Sprintf("%s %q", d.APIAlias, d.APIImport),
			fmt.Sprintf("%q", d.ControllerImport),
			`bindkitcr "github.com/bindkit/bindkit/controllerruntime"`,
			`"github.com/bindkit/bindkit/wiring"`,
		} {
			if s, err = insertBeforeMarker(s, "+kubebuilder:scaffold:imports", imp); err != nil {
				return "", err
			}
		}
		if s, err = insertBeforeMarker(s, "+kubebuilder:scaffold:scheme", fmt.Sprintf("utilruntime.Must(%s.AddToScheme(scheme))", d.APIAlias)); err != nil {
			return "", err
		}
		if !strings.Contains(s, bindkitBlockMarker) {
			if s, err = insertBeforeMarker(s, "+kubebuilder:scaffold:builder", mainBlock); err != nil {
				return "", err
			}
		}
		s = leaderElectionNamespace(e, s)
		controller := path.Base(d.ControllerImport)
		kind := fmt.Sprintf(`%[1]sKind, err := %[2]s.New%[3]s()
if err != nil {
	setupLog.Error(err, "Failed to wire the Binding kind", "kind", %[3]q)
	os.Exit(1)
}
bindingKinds = append(bindingKinds, %[1]sKind)
`, strings.ToLower(d.Kind[:1])+d.Kind[1:], controller, d.Kind)
		return insertBeforeMarker(s, bindkitBlockMarker, kind)
	})
}

// leaderElectionLine sets the Manager's Lease namespace to bindkit's
// system namespace.
const leaderElectionLine = `// [BINDKIT] The Lease in the namespace the Manager runs in, as bindkit's
// SYSTEM_NAMESPACE: in a pod, config/default sets it to the pod's own;
// outside a cluster (--leader-elect against a remote control plane)
// controller-runtime finds no namespace of its own and refuses to start.
LeaderElectionNamespace: os.Getenv("SYSTEM_NAMESPACE"),
`

// leaderElectionNamespace adds leaderElectionLine to ctrl.Options after
// kubebuilder's LeaderElectionID, unless the Options name a namespace;
// without that line it warns.
func leaderElectionNamespace(e *edits, s string) string {
	if strings.Contains(s, "LeaderElectionNamespace") {
		return s
	}
	lines := strings.SplitAfter(s, "\n")
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "LeaderElectionID:") {
			indent := line[:len(line)-len(strings.TrimLeft(line, " \t"))]
			var add strings.Builder
			for _, l := range strings.SplitAfter(leaderElectionLine, "\n") {
				if l != "" {
					add.WriteString(indent + l)
				}
			}
			return strings.Join(lines[:i+1], "") + add.String() + strings.Join(lines[i+1:], "")
		}
	}
	e.warn("cmd/main.go: no LeaderElectionID in ctrl.Options: set LeaderElectionNamespace: os.Getenv(\"SYSTEM_NAMESPACE\") there by hand, so that --leader-elect works outside a cluster")
	return s
}

// mainBlock is bindkit's block in cmd/main.go.
const mainBlock = `// bindkit: the Binding kinds, run inside the Manager
// (controllerruntime.Add): their reconcilers (writing while the Manager
// leads), their admission on the Manager's webhook server, and the
// admission policies on their Bindings. SYSTEM_NAMESPACE names the
// namespace the Manager runs in (config/default sets it).
var bindingKinds []*wiring.Kind
// ` + bindkitBlockMarker + `
if err := bindkitcr.Add(mgr, bindkitcr.Options{Kinds: bindingKinds}); err != nil {
	setupLog.Error(err, "Failed to add the Binding kinds")
	os.Exit(1)
}
`

// writeBindkitConfig writes config/bindkit: the kind's webhook
// configuration, admission policies and aggregated roles, and the
// transformers that keep config/default's namePrefix, namespace and
// cert-manager CA injection off them.
func writeBindkitConfig(e *edits, d kbData) error {
	gvr := schema.GroupVersionResource{Group: d.QGroup, Version: d.Version, Resource: d.Plural}
	policies, err := wiring.AdmissionPoliciesFor(gvr, wiring.Options{})
	if err != nil {
		return err
	}
	policiesYAML, err := policy.Manifests(policies, bindingtest.ManifestsHeader(gvr.GroupResource().String()))
	if err != nil {
		return err
	}
	roles, err := aggregatedRolesBy("`bindkit kubebuilder create binding` for", d.QGroup, d.Plural, d.Kind, d.APIImport)
	if err != nil {
		return err
	}
	webhook, err := executeKB("webhook.yaml.tmpl", d)
	if err != nil {
		return err
	}
	transformers, err := fixedNames(append(policies, webhookConfigurationStub(d)), d)
	if err != nil {
		return err
	}
	for rel, content := range map[string][]byte{
		"config/bindkit/" + d.WebhookFile:                   webhook,
		"config/bindkit/" + d.PoliciesFile:                  policiesYAML,
		"config/bindkit/" + d.RolesFile:                     roles,
		"config/bindkit/transformers/" + d.TransformersFile: transformers,
	} {
		if err := e.create(rel, content); err != nil {
			return err
		}
	}
	if err := addKustomizeResources(e, "config/bindkit/kustomization.yaml", bindkitKustomizationHeader, d.WebhookFile, d.PoliciesFile, d.RolesFile); err != nil {
		return err
	}
	return addKustomizeResources(e, "config/bindkit/transformers/kustomization.yaml", transformersKustomizationHeader, d.TransformersFile)
}

const bindkitKustomizationHeader = `# bindkit's Binding kinds: each kind's webhook configuration, the
# admission policies on its Bindings (installed before the Manager first
# runs, so they hold from the install on) and the roles that aggregate its
# Bindings into Kubernetes' admin, edit and view. config/default includes
# it; bindkit kubebuilder create binding adds each kind.
`

const transformersKustomizationHeader = `# Run by config/default after its own transformations: bindkit's objects
# (config/bindkit's webhook configurations and admission policies) keep
# the names bindkit programs, out of namePrefix's reach; no namespace
# (they are cluster-scoped); and no cert-manager CA injection annotation:
# bindkit's admission controller writes their caBundle, the one writer.
`

// addKustomizeResources adds files to the resources of the kustomization
// at rel, creating it under header when missing.
func addKustomizeResources(e *edits, rel, header string, files ...string) error {
	content, ok, err := e.read(rel)
	if err != nil {
		return err
	}
	s := header + "resources:\n"
	if ok {
		s = string(content)
	} else {
		e.created[rel] = true
	}
	for _, f := range files {
		if hasLine(s, "- "+f) {
			continue
		}
		var found bool
		if s, found = insertAfterLine(s, "resources:", "- "+f); !found {
			return fmt.Errorf("%s: no resources list", rel)
		}
	}
	e.set(rel, []byte(s))
	return nil
}

// webhookConfigurationStub is the kind's webhook configuration as far as
// its transformer needs it: kind, name, labels.
func webhookConfigurationStub(d kbData) runtime.Object {
	u := map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
		"metadata": map[string]any{"name": d.WebhookConfiguration, "labels": map[string]any{"app.kubernetes.io/managed-by": "bindkit"}},
	}
	return &unstructured.Unstructured{Object: u}
}

// fixedNames writes the PatchTransformers that give each of objs back the
// metadata bindkit writes (name, labels, annotations; no namespace) after
// config/default's transformations.
func fixedNames(objs []runtime.Object, d kbData) ([]byte, error) {
	var out bytes.Buffer
	fmt.Fprintf(&out, "# Generated by `bindkit kubebuilder create binding` for %s: do not edit.\n", d.Kind)
	for _, o := range objs {
		m, err := meta.Accessor(o)
		if err != nil {
			return nil, err
		}
		kind := o.GetObjectKind().GroupVersionKind().Kind
		metadata := map[string]any{"name": m.GetName()}
		if l := m.GetLabels(); len(l) > 0 {
			metadata["labels"] = l
		}
		if a := m.GetAnnotations(); len(a) > 0 {
			metadata["annotations"] = a
		}
		patch, err := json.Marshal([]map[string]any{{"op": "replace", "path": "/metadata", "value": metadata}})
		if err != nil {
			return nil, err
		}
		t, err := yaml.Marshal(map[string]any{
			"apiVersion": "builtin",
			"kind":       "PatchTransformer",
			"metadata":   map[string]any{"name": strings.ToLower(kind) + "-" + m.GetName()},
			"target":     map[string]any{"group": "admissionregistration.k8s.io", "kind": kind, "name": m.GetName()},
			"patch":      string(patch),
			"options":    map[string]any{"allowNameChange": true},
		})
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(t)
	}
	return out.Bytes(), nil
}
