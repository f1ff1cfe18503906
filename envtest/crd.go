package envtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs creates (or updates) the CustomResourceDefinitions in the YAML
// files at paths and waits until each is established and served by
// discovery. Documents of other kinds are an error.
func (e *Environment) InstallCRDs(ctx context.Context, paths ...string) error {
	client, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	disco, err := discovery.NewDiscoveryClientForConfig(e.Config)
	if err != nil {
		return fmt.Errorf("discovery client: %w", err)
	}
	var crds []*unstructured.Unstructured
	for _, path := range paths {
		docs, err := readCRDs(path)
		if err != nil {
			return err
		}
		crds = append(crds, docs...)
	}
	for _, crd := range crds {
		if err := applyCRD(ctx, client, crd); err != nil {
			return err
		}
	}
	for _, crd := range crds {
		if err := waitCRDReady(ctx, client, disco, crd); err != nil {
			return err
		}
	}
	return nil
}

func readCRDs(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read CRDs: %w", err)
	}
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var crds []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return crds, nil
			}
			return nil, fmt.Errorf("%s: decode YAML: %w", path, err)
		}
		if len(obj.Object) == 0 {
			continue // an empty document between separators
		}
		if gvk := obj.GroupVersionKind(); gvk.Group != crdGVR.Group || gvk.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("%s: document %q is a %s, not a CustomResourceDefinition", path, obj.GetName(), gvk)
		}
		crds = append(crds, obj)
	}
}

func applyCRD(ctx context.Context, client dynamic.Interface, crd *unstructured.Unstructured) error {
	_, err := client.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		existing, getErr := client.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
		if getErr != nil {
			return fmt.Errorf("CRD %s: %w", crd.GetName(), getErr)
		}
		crd = crd.DeepCopy()
		crd.SetResourceVersion(existing.GetResourceVersion())
		_, err = client.Resource(crdGVR).Update(ctx, crd, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("CRD %s: %w", crd.GetName(), err)
	}
	return nil
}

// waitCRDReady waits for the Established condition and for discovery to list
// every served version, since clients resolve resources through discovery.
func waitCRDReady(ctx context.Context, client dynamic.Interface, disco discovery.DiscoveryInterface, crd *unstructured.Unstructured) error {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got, err := client.Resource(crdGVR).Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			lastErr = err
			return false, nil
		}
		if !established(got) {
			lastErr = errors.New("not established yet")
			return false, nil
		}
		for _, v := range versions {
			version, _ := v.(map[string]any)
			if served, _ := version["served"].(bool); !served {
				continue
			}
			name, _ := version["name"].(string)
			if lastErr = servedByDiscovery(disco, group+"/"+name, plural); lastErr != nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not ready: %w (last: %v)", crd.GetName(), err, lastErr)
	}
	return nil
}

func established(crd *unstructured.Unstructured) bool {
	conditions, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conditions {
		cond, _ := c.(map[string]any)
		if cond["type"] == "Established" && cond["status"] == "True" {
			return true
		}
	}
	return false
}

func servedByDiscovery(disco discovery.DiscoveryInterface, groupVersion, plural string) error {
	list, err := disco.ServerResourcesForGroupVersion(groupVersion)
	if err != nil {
		return err
	}
	for _, r := range list.APIResources {
		if r.Name == plural {
			return nil
		}
	}
	return fmt.Errorf("%s not in discovery for %s yet", plural, groupVersion)
}
