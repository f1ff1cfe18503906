package duck

import (
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The kube-apiserver fills in some fields of a pod template that a
// workload leaves unset (k8s.io/kubernetes pkg/apis/core/v1 defaults): a
// ConfigMap volume's defaultMode, a container's terminationMessagePath,
// a port's protocol, ... A Do that sets a volume or container as a whole,
// as a declarative.Spec does, leaves them unset again on every run, and a
// patch that removed them would be undone by the server at once: the
// reconciler would patch the subject forever. So CreatePatch treats a
// field that after leaves unset, and that before holds at its server
// default, as unchanged: unset means "the server's default", which is
// what the subject already has.
//
// isDefault reports whether v, the non-empty value of a field of parent,
// is the value the kube-apiserver would fill in for it.
type isDefault func(parent, v reflect.Value) bool

// serverDefaults lists, by struct type and JSON field name, the fields of
// a pod template the kube-apiserver defaults (every minor bindkit
// supports). Fields whose default depends on more than their struct
// (a Pod's requests copied from its limits) are left out: their removal
// is patched as before.
var serverDefaults = map[reflect.Type]map[string]isDefault{
	reflect.TypeFor[corev1.Container](): {
		"imagePullPolicy":          pullPolicyDefault,
		"terminationMessagePath":   is(corev1.TerminationMessagePathDefault),
		"terminationMessagePolicy": is(corev1.TerminationMessageReadFile),
	},
	reflect.TypeFor[corev1.ContainerPort](): {"protocol": is(corev1.ProtocolTCP)},
	reflect.TypeFor[corev1.Probe](): {
		"timeoutSeconds": is(int32(1)), "periodSeconds": is(int32(10)),
		"successThreshold": is(int32(1)), "failureThreshold": is(int32(3)),
	},
	reflect.TypeFor[corev1.HTTPGetAction]():       {"path": is("/"), "scheme": is(corev1.URISchemeHTTP)},
	reflect.TypeFor[corev1.GRPCAction]():          {"service": is("")},
	reflect.TypeFor[corev1.ObjectFieldSelector](): {"apiVersion": is("v1")},
	reflect.TypeFor[corev1.SecretVolumeSource](): {
		"defaultMode": is(int32(corev1.SecretVolumeSourceDefaultMode)),
	},
	reflect.TypeFor[corev1.ConfigMapVolumeSource](): {
		"defaultMode": is(int32(corev1.ConfigMapVolumeSourceDefaultMode)),
	},
	reflect.TypeFor[corev1.DownwardAPIVolumeSource](): {
		"defaultMode": is(int32(corev1.DownwardAPIVolumeSourceDefaultMode)),
	},
	reflect.TypeFor[corev1.ProjectedVolumeSource](): {
		"defaultMode": is(int32(corev1.ProjectedVolumeSourceDefaultMode)),
	},
	reflect.TypeFor[corev1.HostPathVolumeSource]():          {"type": is(corev1.HostPathUnset)},
	reflect.TypeFor[corev1.ServiceAccountTokenProjection](): {"expirationSeconds": is(int64(3600))},
	reflect.TypeFor[corev1.PodSpec](): {
		"dnsPolicy":                     is(corev1.DNSClusterFirst),
		"restartPolicy":                 is(corev1.RestartPolicyAlways),
		"terminationGracePeriodSeconds": is(int64(corev1.DefaultTerminationGracePeriodSeconds)),
		"schedulerName":                 is(corev1.DefaultSchedulerName),
		"securityContext":               func(_, v reflect.Value) bool { return v.Elem().IsZero() },
		// The deprecated alias the server keeps equal to serviceAccountName.
		"serviceAccount": func(spec, v reflect.Value) bool { return v.String() == spec.FieldByName("ServiceAccountName").String() },
	},
}

// is returns an isDefault for a fixed default: the field's value, through
// a pointer if it is one, equals want.
func is[T comparable](want T) isDefault {
	return func(_, v reflect.Value) bool {
		if v.Kind() == reflect.Pointer {
			v = v.Elem()
		}
		got, ok := v.Interface().(T)
		return ok && got == want
	}
}

// pullPolicyDefault: Always for an image tagged latest or not tagged at all
// (nor pinned by digest), IfNotPresent otherwise, as the kube-apiserver
// decides from the container's image.
func pullPolicyDefault(container, v reflect.Value) bool {
	image := container.FieldByName("Image").String()
	want := corev1.PullIfNotPresent
	if imageTag(image) == "latest" {
		want = corev1.PullAlways
	}
	return corev1.PullPolicy(v.String()) == want
}

// imageTag returns an image reference's tag: "latest" when it has neither
// a tag nor a digest.
func imageTag(image string) string {
	name, digest, _ := strings.Cut(image, "@")
	last := name[strings.LastIndex(name, "/")+1:]
	if _, tag, ok := strings.Cut(last, ":"); ok {
		return tag
	}
	if digest != "" {
		return ""
	}
	return "latest"
}

// defaultedUnset reports whether the member f goes from a (held by
// before) to b (left empty by after, the struct parent) only because
// after leaves to the server a field that before holds at the value the
// server fills into after. The default is after's: where a list's element
// at one index is another entry after than before, what stays is what the
// server would give the new entry.
func defaultedUnset(f *fieldInfo, parent, a, b reflect.Value) bool {
	return f.serverDefault != nil && empty(b) && !empty(a) && f.serverDefault(parent, a)
}
