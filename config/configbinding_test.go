package config

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/bindkit/bindkit/examples/configbinding/pkg/apis/bindings/v1alpha1"
)

// TestConfigBindingCRDWithRealAPIServer installs the second example's CRD,
// which lives beside that example, and checks what its schema adds:
// environment-variable keys.
func TestConfigBindingCRDWithRealAPIServer(t *testing.T) {
	env := controlPlane.Env(t)
	ctx := t.Context()
	if err := env.InstallCRDs(ctx, "../examples/configbinding/config/300-configbinding.yaml"); err != nil {
		t.Fatalf("install CRD: %v", err)
	}
	kube := kubernetes.NewForConfigOrDie(env.Config)
	nsObj, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "configbinding-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	client := dynamic.NewForConfigOrDie(env.Config).Resource(v1alpha1.GroupVersionResource()).Namespace(nsObj.Name)
	tests := []struct {
		name    string
		data    map[string]any
		wantErr string
	}{
		{name: "environment variable names", data: map[string]any{"LOG_LEVEL": "debug", "_x1": "y"}},
		{name: "a key that is no variable name", data: map[string]any{"LOG-LEVEL": "debug"}, wantErr: "valid environment variable names"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": v1alpha1.SchemeGroupVersion.String(),
				"kind":       v1alpha1.Kind,
				"metadata":   map[string]any{"name": "cfg"},
				"spec": map[string]any{
					"subject": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
					"data":    tc.data,
				},
			}}
			_, err := client.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("rejected: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error = %v, want a rejection naming %q", err, tc.wantErr)
			}
		})
	}
}
