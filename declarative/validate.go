package declarative

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxSpecBytes bounds a Spec's JSON. A Spec is written into every subject
// of its Binding and, by a declarative kind's admission policy, merged into
// every create and update of them: a large one would slow every such write
// of its namespace. 16 KiB holds a sidecar with a long command line, its
// env and mounts, many times over.
const MaxSpecBytes = 16 << 10

// Validate reports, naming the field and index, what would make a pod
// template that carries the Spec invalid to the kube-apiserver, or the
// Spec's own identities ambiguous: an entry without a name (or mountPath),
// a name used twice in one list, names that are not what the API server
// takes (container and volume names are DNS labels; Secret and ConfigMap
// names DNS subdomains; env names printable ASCII without '='), an image
// with surrounding whitespace or none, a volume with no source or several,
// a mode beyond 0777, and a Spec larger than MaxSpecBytes. The reconciler
// publishes and applies only a Spec that validates (the Binding is not
// Ready otherwise, the message naming the field), so nothing invalid
// reaches a subject.
func (s Spec) Validate() error {
	v := &validator{}
	v.unique("Env", keys(s.Env, func(e corev1.EnvVar) string { return e.Name }))
	v.unique("VolumeMounts", keys(s.VolumeMounts, func(m corev1.VolumeMount) string { return m.MountPath }))
	v.unique("Volumes", keys(s.Volumes, func(v corev1.Volume) string { return v.Name }))
	added := append(slices.Clone(s.InitContainers), s.Containers...)
	v.unique("InitContainers+Containers", keys(added, func(c corev1.Container) string { return c.Name }))
	v.env("Env", s.Env)
	v.envFrom("EnvFrom", s.EnvFrom)
	v.mounts("VolumeMounts", s.VolumeMounts)
	for i, vol := range s.Volumes {
		v.volume(fmt.Sprintf("Volumes[%d]", i), vol)
	}
	for field, list := range map[string][]corev1.Container{"InitContainers": s.InitContainers, "Containers": s.Containers} {
		for i, c := range list {
			v.container(fmt.Sprintf("%s[%d]", field, i), c)
		}
	}
	if js, err := json.Marshal(s); err != nil {
		v.fail("", "%v", err)
	} else if len(js) > MaxSpecBytes {
		v.fail("", "the Spec is %d bytes of JSON, more than the %d a Binding may write into every subject (declarative.MaxSpecBytes)", len(js), MaxSpecBytes)
	}
	slices.SortFunc(v.errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errors.Join(v.errs...)
}

// validator collects the problems of one Spec.
type validator struct{ errs []error }

func (v *validator) fail(field, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	v.errs = append(v.errs, errors.New(msg))
}

// unique reports empty and repeated keys of one list.
func (v *validator) unique(field string, keys []string) {
	seen := map[string]int{}
	for i, k := range keys {
		if k == "" {
			v.fail(fmt.Sprintf("%s[%d]", field, i), "name is required")
			continue
		}
		if j, dup := seen[k]; dup {
			v.fail(fmt.Sprintf("%s[%d]", field, i), "%q is also %s[%d]", k, field, j)
		}
		seen[k] = i
	}
}

// check reports the messages a validation function of apimachinery gives.
func (v *validator) check(field, value string, msgs []string) {
	if len(msgs) > 0 {
		v.fail(field, "%q: %s", value, strings.Join(msgs, "; "))
	}
}

func (v *validator) dnsLabel(field, value string) {
	if value != "" {
		v.check(field, value, validation.IsDNS1123Label(value))
	}
}

func (v *validator) dnsSubdomain(field, value string) {
	if value == "" {
		v.fail(field, "name is required")
		return
	}
	v.check(field, value, validation.IsDNS1123Subdomain(value))
}

// envName is the kube-apiserver's rule for env names (and envFrom
// prefixes): printable ASCII but '='.
func (v *validator) envName(field, value string) {
	for _, r := range value {
		if r < ' ' || r > '~' || r == '=' {
			v.fail(field, "%q: must consist of printable ASCII characters other than '='", value)
			return
		}
	}
}

func (v *validator) env(field string, env []corev1.EnvVar) {
	for i, e := range env {
		f := fmt.Sprintf("%s[%d]", field, i)
		v.envName(f+".Name", e.Name)
		if e.ValueFrom == nil {
			continue
		}
		if e.Value != "" {
			v.fail(f, "value and valueFrom are mutually exclusive")
		}
		src := e.ValueFrom
		switch setFields(*src) {
		case 1:
		case 0:
			v.fail(f+".ValueFrom", "one source is required")
		default:
			v.fail(f+".ValueFrom", "one source only")
		}
		if r := src.SecretKeyRef; r != nil {
			v.dnsSubdomain(f+".ValueFrom.SecretKeyRef.Name", r.Name)
			v.check(f+".ValueFrom.SecretKeyRef.Key", r.Key, validation.IsConfigMapKey(r.Key))
		}
		if r := src.ConfigMapKeyRef; r != nil {
			v.dnsSubdomain(f+".ValueFrom.ConfigMapKeyRef.Name", r.Name)
			v.check(f+".ValueFrom.ConfigMapKeyRef.Key", r.Key, validation.IsConfigMapKey(r.Key))
		}
	}
}

func (v *validator) envFrom(field string, from []corev1.EnvFromSource) {
	for i, e := range from {
		f := fmt.Sprintf("%s[%d]", field, i)
		v.envName(f+".Prefix", e.Prefix)
		switch {
		case (e.ConfigMapRef == nil) == (e.SecretRef == nil):
			v.fail(f, "exactly one of configMapRef and secretRef is required")
		case e.ConfigMapRef != nil:
			v.dnsSubdomain(f+".ConfigMapRef.Name", e.ConfigMapRef.Name)
		default:
			v.dnsSubdomain(f+".SecretRef.Name", e.SecretRef.Name)
		}
	}
}

func (v *validator) mounts(field string, mounts []corev1.VolumeMount) {
	for i, m := range mounts {
		f := fmt.Sprintf("%s[%d]", field, i)
		if m.Name == "" {
			v.fail(f+".Name", "name is required")
		}
		v.dnsLabel(f+".Name", m.Name)
		if strings.HasPrefix(m.SubPath, "/") || slices.Contains(strings.Split(m.SubPath, "/"), "..") {
			v.fail(f+".SubPath", "%q: must be a relative path without '..'", m.SubPath)
		}
	}
}

func (v *validator) volume(field string, vol corev1.Volume) {
	v.dnsLabel(field+".Name", vol.Name)
	switch setFields(vol.VolumeSource) {
	case 1:
	case 0:
		v.fail(field, "one volume source is required")
	default:
		v.fail(field, "one volume source only")
	}
	mode := func(f string, m *int32) {
		if m != nil && (*m < 0 || *m > 0o777) {
			v.fail(f, "%#o: must be between 0 and 0777", *m)
		}
	}
	if s := vol.Secret; s != nil {
		v.dnsSubdomain(field+".Secret.SecretName", s.SecretName)
		mode(field+".Secret.DefaultMode", s.DefaultMode)
	}
	if c := vol.ConfigMap; c != nil {
		v.dnsSubdomain(field+".ConfigMap.Name", c.Name)
		mode(field+".ConfigMap.DefaultMode", c.DefaultMode)
	}
}

func (v *validator) container(field string, c corev1.Container) {
	v.dnsLabel(field+".Name", c.Name)
	switch {
	case c.Image == "":
		v.fail(field+".Image", "an image is required")
	case strings.TrimSpace(c.Image) != c.Image:
		v.fail(field+".Image", "%q: must not have leading or trailing whitespace", c.Image)
	}
	v.env(field+".Env", c.Env)
	v.envFrom(field+".EnvFrom", c.EnvFrom)
	v.mounts(field+".VolumeMounts", c.VolumeMounts)
}

// setFields counts the pointer fields of a struct that are set: the
// sources of a one-of (a VolumeSource, an EnvVarSource).
func setFields(s any) int {
	rv := reflect.ValueOf(s)
	n := 0
	for i := range rv.NumField() {
		if f := rv.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			n++
		}
	}
	return n
}
