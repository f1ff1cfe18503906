package v1alpha1_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/examples/githubbinding/pkg/apis/bindings/v1alpha1"
	"github.com/bindkit/bindkit/tracker"
)

func ExampleGithubBinding_Do() {
	b := &v1alpha1.GithubBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "gh"},
		Spec: v1alpha1.GithubBindingSpec{
			Subject: tracker.Reference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			Secret:  corev1.LocalObjectReference{Name: "gh-token"},
		},
	}
	wp := &duck.WithPod{}
	wp.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app"}}

	b.Do(context.Background(), wp)
	spec := wp.Spec.Template.Spec
	fmt.Println(spec.Volumes[0].Name, spec.Volumes[0].Secret.SecretName)
	fmt.Println(spec.Containers[0].VolumeMounts[0].MountPath, spec.Containers[0].VolumeMounts[0].ReadOnly)

	b.Undo(context.Background(), wp)
	fmt.Println(len(wp.Spec.Template.Spec.Volumes), len(wp.Spec.Template.Spec.Containers[0].VolumeMounts))
	// Output:
	// github-binding gh-token
	// /var/bindings/github true
	// 0 0
}
