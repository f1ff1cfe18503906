package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// kubebuilderLayout is the project layout `bindkit kubebuilder` edits:
// kubebuilder's go/v4 plugin's.
const kubebuilderLayout = "go.kubebuilder.io/v4"

// kubebuilderPluginKey is the key under which PROJECT records the Binding
// kinds `bindkit kubebuilder create binding` added (PROJECT's plugins
// section, which kubebuilder keeps for plugins it does not know).
const kubebuilderPluginKey = "bindings.bindkit.dev/v1-alpha"

// kbProject is a kubebuilder project's PROJECT file: the fields read, and
// the whole document, written back with the kind added.
type kbProject struct {
	Domain      string   `json:"domain"`
	Repo        string   `json:"repo"`
	ProjectName string   `json:"projectName"`
	Layout      []string `json:"layout"`
	MultiGroup  bool     `json:"multigroup"`
	Resources   []struct {
		Group   string `json:"group"`
		Version string `json:"version"`
		Kind    string `json:"kind"`
	} `json:"resources"`

	header []byte
	doc    map[string]any
}

// readKubebuilderProject reads dir/PROJECT and checks it is a go/v4
// project.
func readKubebuilderProject(dir string) (*kbProject, error) {
	data, err := os.ReadFile(filepath.Join(dir, "PROJECT"))
	if err != nil {
		return nil, fmt.Errorf("%w (run it at the root of a kubebuilder project, where kubebuilder init wrote PROJECT)", err)
	}
	p := &kbProject{}
	if err := yaml.Unmarshal(data, p); err != nil {
		return nil, fmt.Errorf("PROJECT: %w", err)
	}
	if err := yaml.Unmarshal(data, &p.doc); err != nil {
		return nil, fmt.Errorf("PROJECT: %w", err)
	}
	for _, line := range bytes.SplitAfter(data, []byte("\n")) {
		if !bytes.HasPrefix(line, []byte("#")) {
			break
		}
		p.header = append(p.header, line...)
	}
	if !slices.Contains(p.Layout, kubebuilderLayout) {
		return nil, fmt.Errorf("PROJECT: layout %v: bindkit edits %s projects (kubebuilder init's default)", p.Layout, kubebuilderLayout)
	}
	if p.Repo == "" || p.ProjectName == "" {
		return nil, errors.New("PROJECT: no repo or projectName")
	}
	return p, nil
}

// addResource records kind d in PROJECT's resources (its API, as
// kubebuilder create api --controller=false records one) and in bindkit's
// plugin section, and writes the file back under its header.
func (p *kbProject) addResource(dir string, d kbData) error {
	resources, _ := p.doc["resources"].([]any)
	p.doc["resources"] = append(resources, map[string]any{
		"api":     map[string]any{"crdVersion": "v1", "namespaced": true},
		"domain":  p.Domain,
		"group":   d.Group,
		"kind":    d.Kind,
		"path":    d.APIImport,
		"version": d.Version,
	})
	plugins, _ := p.doc["plugins"].(map[string]any)
	if plugins == nil {
		plugins = map[string]any{}
	}
	mine, _ := plugins[kubebuilderPluginKey].(map[string]any)
	if mine == nil {
		mine = map[string]any{}
	}
	kinds, _ := mine["resources"].([]any)
	mine["resources"] = append(kinds, map[string]any{
		"domain": p.Domain, "group": d.Group, "version": d.Version, "kind": d.Kind,
		"webhookConfiguration": d.WebhookConfiguration,
	})
	plugins[kubebuilderPluginKey] = mine
	p.doc["plugins"] = plugins
	out, err := yaml.Marshal(p.doc)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "PROJECT"), append(append([]byte{}, p.header...), out...), 0o644)
}

// kbData is what the kubebuilder templates are executed with: the names
// of one Binding kind in one project.
type kbData struct {
	// ProjectName, Repo and Domain are PROJECT's.
	ProjectName, Repo, Domain string
	// Group is the group as kubebuilder's flags name it (region); QGroup
	// the API group (region.example.com).
	Group, QGroup string
	// Version, Kind, Lower (the kind in lower case), Plural (the
	// resource).
	Version, Kind, Lower, Plural string
	// APIDir is the API package's directory (api/v1, or api/region/v1 in
	// a multigroup project), APIImport its import path, APIAlias the name
	// main.go imports it under (regionv1), APIPackage its package name.
	APIDir, APIImport, APIAlias, APIPackage string
	// ControllerDir, ControllerImport and ControllerPackage are
	// internal/controller's (internal/controller/region when multigroup).
	ControllerDir, ControllerImport, ControllerPackage string
	// WebhookConfiguration and WebhookPath are wiring.New's defaults for
	// the kind.
	WebhookConfiguration, WebhookPath string
	// The kind's files in config/bindkit, and its CRD's in config/crd.
	WebhookFile, PoliciesFile, RolesFile, TransformersFile, CRDFile string
	// ConfigDirFromAPI and ConfigDirFromController are the arguments of
	// filepath.Join that lead from the API package and the controller
	// package to config/.
	ConfigDirFromAPI, ConfigDirFromController string
	// ObjectSchemeBuilder: the group-version's SchemeBuilder is
	// controller-runtime's scheme.Builder (Register takes objects), as
	// kubebuilder before 4.13 wrote it, not runtime.SchemeBuilder.
	ObjectSchemeBuilder bool
}

var (
	kbGroupPattern   = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
	kbVersionPattern = regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)
)

// newKBData validates group, version, kind and plural for project p into
// kbData.
func newKBData(p *kbProject, group, version, kind, plural string) (kbData, error) {
	switch {
	case group == "":
		return kbData{}, errors.New("-group is required, as for kubebuilder create api (region: the API group region.<domain>)")
	case !kbGroupPattern.MatchString(group):
		return kbData{}, fmt.Errorf("-group %q: want a DNS label, e.g. region", group)
	case version == "":
		return kbData{}, errors.New("-version is required, e.g. v1")
	case !kbVersionPattern.MatchString(version):
		return kbData{}, fmt.Errorf("-version %q: want a Kubernetes API version, e.g. v1, v1alpha1", version)
	case kind == "":
		return kbData{}, errors.New("-kind is required: the Binding's kind, e.g. RegionBinding")
	case !kindPattern.MatchString(kind):
		return kbData{}, fmt.Errorf("-kind %q: want an upper-case letter, then letters and digits, e.g. RegionBinding", kind)
	}
	for _, r := range p.Resources {
		if r.Group == group && r.Version == version && r.Kind == kind {
			return kbData{}, fmt.Errorf("PROJECT already has %s/%s %s", group, version, kind)
		}
	}
	lower := strings.ToLower(kind)
	if plural == "" {
		plural = pluralize(lower)
	}
	qgroup := group
	if p.Domain != "" {
		qgroup = group + "." + p.Domain
	}
	d := kbData{
		ProjectName: p.ProjectName, Repo: p.Repo, Domain: p.Domain,
		Group: group, QGroup: qgroup, Version: version, Kind: kind, Lower: lower, Plural: plural,
		APIDir: path.Join("api", version), APIPackage: version,
		APIAlias:      strings.ReplaceAll(group, "-", "") + version,
		ControllerDir: "internal/controller", ControllerPackage: "controller",
		WebhookConfiguration: plural + "." + qgroup,
		WebhookPath:          "/" + plural,
		WebhookFile:          lower + "_webhook.yaml",
		PoliciesFile:         lower + "_admission_policies.yaml",
		RolesFile:            lower + "_roles.yaml",
		TransformersFile:     lower + ".yaml",
		CRDFile:              "bases/" + qgroup + "_" + plural + ".yaml",
		ConfigDirFromAPI:     `"..", "..", "config"`, ConfigDirFromController: `"..", "..", "config"`,
	}
	if p.MultiGroup {
		d.APIDir = path.Join("api", group, version)
		d.ControllerDir = path.Join("internal", "controller", group)
		d.ControllerPackage = strings.ReplaceAll(group, "-", "")
		d.ConfigDirFromAPI, d.ConfigDirFromController = `"..", "..", "..", "config"`, `"..", "..", "..", "config"`
	}
	d.APIImport = path.Join(p.Repo, d.APIDir)
	d.ControllerImport = path.Join(p.Repo, d.ControllerDir)
	return d, nil
}

// pluralize is the plural of a lower-case kind, as kubebuilder writes
// most: -s, -es after s, x, z, ch and sh, -ies after a consonant and y.
func pluralize(lower string) string {
	switch {
	case strings.HasSuffix(lower, "s"), strings.HasSuffix(lower, "x"), strings.HasSuffix(lower, "z"),
		strings.HasSuffix(lower, "ch"), strings.HasSuffix(lower, "sh"):
		return lower + "es"
	case strings.HasSuffix(lower, "y") && len(lower) > 1 && !strings.ContainsRune("aeiou", rune(lower[len(lower)-2])):
		return lower[:len(lower)-1] + "ies"
	}
	return lower + "s"
}
