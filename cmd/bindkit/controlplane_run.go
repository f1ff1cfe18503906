package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/envtest"
)

// localInstall is what `bindkit controlplane -run` installs of a kind's
// config/ for a controller run on the developer's machine: the namespace
// it runs in, the CRDs, the admission policies and aggregated roles, and
// the webhook configuration pointed at 127.0.0.1. The controller's own
// Deployment, Service, Secret and RBAC stay out: the controller runs as
// the developer, outside the cluster.
type localInstall struct {
	objects []*unstructured.Unstructured
	// systemNamespace is config/'s Namespace, where the controller keeps
	// its certificates and lease.
	systemNamespace string
	crds, policies  int
	webhook         bool
}

// localKinds are the kinds of config/ a local run installs; a
// MutatingWebhookConfiguration is rewritten (pointLocal).
var localKinds = []string{
	"Namespace", "CustomResourceDefinition",
	"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
	"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding",
	"MutatingWebhookConfiguration",
}

// readLocalInstall reads the YAML files of dir (not its subdirectories)
// and keeps what a local run installs, the webhook configuration pointed
// at https://127.0.0.1:port.
func readLocalInstall(dir string, port int) (*localInstall, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s holds no YAML file: -config names the kind's config/ directory", dir)
	}
	slices.Sort(files)
	in := &localInstall{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if err := in.add(obj, port); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
		}
	}
	if in.crds == 0 {
		return nil, fmt.Errorf("%s holds no CustomResourceDefinition: run bindkit generate first", dir)
	}
	return in, nil
}

// add keeps obj if a local run installs it.
func (in *localInstall) add(obj *unstructured.Unstructured, port int) error {
	kind := obj.GetKind()
	switch {
	case len(obj.Object) == 0 || !slices.Contains(localKinds, kind):
		return nil
	case kind == "Namespace":
		in.systemNamespace = obj.GetName()
	case kind == "CustomResourceDefinition":
		in.crds++
	case kind == "MutatingWebhookConfiguration":
		local, err := pointLocal(obj, port)
		if err != nil {
			return err
		}
		obj, in.webhook = local, true
	default:
		in.policies++
	}
	in.objects = append(in.objects, obj)
	return nil
}

// pointLocal returns the webhook configuration obj with every webhook
// reached at https://127.0.0.1:port on its Service's path, which the
// kube-apiserver can call, with no CA bundle yet: the controller writes
// it once its certificate exists.
func pointLocal(obj *unstructured.Unstructured, port int) (*unstructured.Unstructured, error) {
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, cfg); err != nil {
		return nil, err
	}
	for i := range cfg.Webhooks {
		cc := &cfg.Webhooks[i].ClientConfig
		u := url.URL{Scheme: "https", Host: "127.0.0.1:" + strconv.Itoa(port)}
		if cc.Service != nil && cc.Service.Path != nil {
			u.Path = *cc.Service.Path
		}
		s := u.String()
		cc.Service, cc.URL, cc.CABundle = nil, &s, nil
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cfg)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: content}, nil
}

// apply server-side applies the objects in order, waiting for each CRD to
// be served before the policies that name its resource.
func (in *localInstall) apply(ctx context.Context, env *envtest.Environment) error {
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	for _, obj := range in.objects {
		if obj.GetKind() == "CustomResourceDefinition" {
			if err := applyCRD(ctx, env, obj); err != nil {
				return err
			}
		}
	}
	mapper := duck.NewRESTMapper(discovery.NewDiscoveryClientForConfigOrDie(env.Config))
	for _, obj := range in.objects {
		if obj.GetKind() == "CustomResourceDefinition" {
			continue
		}
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		body, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		if _, err := dyn.Resource(mapping.Resource).Patch(ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "bindkit-controlplane"}); err != nil {
			return fmt.Errorf("apply %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
	}
	return nil
}

// applyCRD installs one CRD and waits until it is served, through a file
// envtest reads (it knows how to wait for a CRD's names).
func applyCRD(ctx context.Context, env *envtest.Environment, crd *unstructured.Unstructured) error {
	data, err := json.Marshal(crd)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(env.Dir, "crd-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return env.InstallCRDs(ctx, f.Name())
}

// waitWritable returns once an object of each installed CRD's kind can be
// created: for seconds after a CRD is created, the kube-apiserver refuses
// its kind's writes with 503 while a MutatingAdmissionPolicy (every
// bindkit kind's requested-by record) matches them, and the author's first
// kubectl apply after the instructions would meet that. A server-side
// dry run of an empty object probes it: refused as invalid, the kind is
// writable. env's clients retry the 503 for 30 s each time; it waits up to
// 2 minutes in all.
func (in *localInstall) waitWritable(ctx context.Context, env *envtest.Environment) error {
	dyn, err := dynamic.NewForConfig(env.Config)
	if err != nil {
		return err
	}
	for _, crd := range in.objects {
		if crd.GetKind() != "CustomResourceDefinition" {
			continue
		}
		gvr, gvk, namespaced, err := crdKind(crd)
		if err != nil {
			return fmt.Errorf("CustomResourceDefinition %s: %w", crd.GetName(), err)
		}
		probe := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind,
			"metadata": map[string]any{"generateName": "bindkit-probe-"}}}
		client := dyn.Resource(gvr).Namespace(map[bool]string{true: in.systemNamespace}[namespaced])
		err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := client.Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return !apierrors.IsServiceUnavailable(err), nil
		})
		if err != nil {
			return fmt.Errorf("%s not writable within 2 minutes of its CustomResourceDefinition: %w", gvk.Kind, err)
		}
	}
	return nil
}

// crdKind reads a CRD's resource and kind at its storage version, and
// whether it is namespaced.
func crdKind(crd *unstructured.Unstructured) (schema.GroupVersionResource, schema.GroupVersionKind, bool, error) {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	scope, _, _ := unstructured.NestedString(crd.Object, "spec", "scope")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		v, _ := v.(map[string]any)
		if storage, _ := v["storage"].(bool); storage {
			name, _ := v["name"].(string)
			gv := schema.GroupVersion{Group: group, Version: name}
			return gv.WithResource(plural), gv.WithKind(kind), scope == "Namespaced", nil
		}
	}
	return schema.GroupVersionResource{}, schema.GroupVersionKind{}, false, errors.New("no storage version in spec.versions")
}

// runLocal is `bindkit controlplane -run`: a control plane of minor with
// dir's kind installed, until ctx ends, and how to run the kind's
// controller against it.
func runLocal(ctx context.Context, minor, dir string, port int, workloads bool, stdout io.Writer) error {
	in, err := readLocalInstall(dir, port)
	if err != nil {
		return err
	}
	start := time.Now()
	fmt.Fprintf(stdout, "==> starting Kubernetes %s (etcd, kube-apiserver, kube-controller-manager%s)\n", minor, map[bool]string{true: ", kube-scheduler and kwok's nodes"}[workloads])
	env, err := envtest.Start(ctx, envtest.Options{KubeMinor: minor, ControllerManager: true, Workloads: workloads,
		Controllers: append(envtest.DefaultControllers(), "clusterrole-aggregation-controller")})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(stdout, "==> stopping the control plane")
		if err := env.Stop(); err != nil {
			fmt.Fprintf(stdout, "stop: %v\n", err)
		}
	}()
	if err := in.apply(ctx, env); err != nil {
		return fmt.Errorf("install %s: %w", dir, err)
	}
	if in.systemNamespace == "" {
		in.systemNamespace = "bindkit-system"
		kube := kubernetes.NewForConfigOrDie(env.Config)
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: in.systemNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	if err := in.waitWritable(ctx, env); err != nil {
		return fmt.Errorf("install %s: %w", dir, err)
	}
	fmt.Fprint(stdout, in.instructions(env, dir, port, time.Since(start)))
	<-ctx.Done()
	return nil
}

// instructions say what is running and how to run a controller against it.
func (in *localInstall) instructions(env *envtest.Environment, dir string, port int, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "==> Kubernetes %s ready in %s, with %s installed: %d CRD(s), %d admission polic(ies)", env.Version.GitVersion, took.Round(100*time.Millisecond), dir, in.crds, in.policies)
	if in.webhook {
		fmt.Fprintf(&b, ", the webhook configuration pointed at https://127.0.0.1:%d", port)
	}
	fmt.Fprintf(&b, ".\n\nIn another shell, run your controller against it:\n\n")
	fmt.Fprintf(&b, "    export KUBECONFIG=%s\n", env.KubeconfigPath)
	fmt.Fprintf(&b, "    SYSTEM_NAMESPACE=%s go run ./cmd/controller --webhook-address=127.0.0.1 --webhook-port=%d --webhook-ip-sans=127.0.0.1 --metrics-address=127.0.0.1:0 --probe-port=0\n\n", in.systemNamespace, port)
	b.WriteString("then kubectl apply your workloads and Bindings (KUBECONFIG as above). Ctrl-C here stops the control plane and removes everything.\n")
	return b.String()
}
