package declarative

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/bindkit/bindkit/duck"
)

// Spec is what a declarative Binding adds to the pod template of each of
// its subjects. Its zero value adds nothing. Its JSON form is what a
// Binding publishes for the kube-apiserver's MutatingAdmissionPolicy to
// read (package policy), or, for a kind whose users write it in the
// Binding (InBinding), what the policy reads there.
//
// Its markers give a CRD that holds a Spec in a Binding's spec the rules
// of Validate the kube-apiserver can check at the Binding's write
// (bindkit generate writes them, with bounds on every string and list):
// names as the kube-apiserver takes them in a pod, one entry per name,
// one source per volume and per valueFrom, images without surrounding
// whitespace, modes up to 0777. Validate's bound on the Spec's JSON
// (MaxSpecBytes) is the one rule a schema cannot say; the bounds of each
// list and string stand for it there.
//
// +kubebuilder:validation:XValidation:rule="!has(self.containers) || !has(self.initContainers) || self.containers.all(c, !self.initContainers.exists(i, i.name == c.name))",message="a container and an init container have the same name"
type Spec struct {
	// Env entries are set, by name, in every container of the workload
	// (and every init container when InitContainersToo), but not in the
	// Containers and InitContainers the Spec adds.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:XValidation:rule="self.all(e, e.name.matches('^[ -<>-~]+$'))",message="env names must be printable ASCII characters other than '='"
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.valueFrom) || !has(e.value) || e.value == '')",message="value and valueFrom are mutually exclusive"
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.valueFrom) || size([has(e.valueFrom.fieldRef), has(e.valueFrom.resourceFieldRef), has(e.valueFrom.configMapKeyRef), has(e.valueFrom.secretKeyRef), has(e.valueFrom.fileKeyRef)].filter(x, x)) == 1)",message="valueFrom needs exactly one source"
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.valueFrom) || !has(e.valueFrom.secretKeyRef) || (has(e.valueFrom.secretKeyRef.name) && (size(e.valueFrom.secretKeyRef.name) <= 253 && e.valueFrom.secretKeyRef.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')) && size(e.valueFrom.secretKeyRef.key) <= 253 && e.valueFrom.secretKeyRef.key.matches('^[-._a-zA-Z0-9]+$')))",message="secretKeyRef needs a Secret name (a DNS subdomain) and a key"
	// +kubebuilder:validation:XValidation:rule="self.all(e, !has(e.valueFrom) || !has(e.valueFrom.configMapKeyRef) || (has(e.valueFrom.configMapKeyRef.name) && (size(e.valueFrom.configMapKeyRef.name) <= 253 && e.valueFrom.configMapKeyRef.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')) && size(e.valueFrom.configMapKeyRef.key) <= 253 && e.valueFrom.configMapKeyRef.key.matches('^[-._a-zA-Z0-9]+$')))",message="configMapKeyRef needs a ConfigMap name (a DNS subdomain) and a key"
	Env []corev1.EnvVar `json:"env,omitempty"`
	// EnvFrom sources are added, once, to the same containers.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self.all(f, has(f.configMapRef) != has(f.secretRef))",message="exactly one of configMapRef and secretRef is required"
	// +kubebuilder:validation:XValidation:rule="self.all(f, !has(f.prefix) || f.prefix == '' || f.prefix.matches('^[ -<>-~]+$'))",message="prefixes must be printable ASCII characters other than '='"
	// +kubebuilder:validation:XValidation:rule="self.all(f, (!has(f.configMapRef) || (has(f.configMapRef.name) && (size(f.configMapRef.name) <= 253 && f.configMapRef.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')))) && (!has(f.secretRef) || (has(f.secretRef.name) && (size(f.secretRef.name) <= 253 && f.secretRef.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')))))",message="configMapRef and secretRef need a name (a DNS subdomain)"
	EnvFrom []corev1.EnvFromSource `json:"envFrom,omitempty"`
	// VolumeMounts are set, by mountPath, in the same containers.
	// +optional
	// +listType=map
	// +listMapKey=mountPath
	// +kubebuilder:validation:XValidation:rule="self.all(m, (size(m.name) <= 63 && m.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')))",message="volume mount names must be DNS labels"
	// +kubebuilder:validation:XValidation:rule="self.all(m, !has(m.subPath) || (!m.subPath.startsWith('/') && !m.subPath.split('/').exists(p, p == '..')))",message="subPath must be a relative path without '..'"
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`
	// Volumes are set, by name, in the pod spec.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:XValidation:rule="self.all(v, (size(v.name) <= 63 && v.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')))",message="volume names must be DNS labels"
	// +kubebuilder:validation:XValidation:rule="self.all(v, size([has(v.hostPath), has(v.emptyDir), has(v.gcePersistentDisk), has(v.awsElasticBlockStore), has(v.gitRepo), has(v.secret), has(v.nfs), has(v.iscsi), has(v.glusterfs), has(v.persistentVolumeClaim), has(v.rbd), has(v.flexVolume), has(v.cinder), has(v.cephfs), has(v.flocker), has(v.downwardAPI), has(v.fc), has(v.azureFile), has(v.configMap), has(v.vsphereVolume), has(v.quobyte), has(v.azureDisk), has(v.photonPersistentDisk), has(v.projected), has(v.portworxVolume), has(v.scaleIO), has(v.storageos), has(v.csi), has(v.ephemeral), has(v.image)].filter(x, x)) == 1)",message="a volume needs exactly one source"
	// +kubebuilder:validation:XValidation:rule="self.all(v, !has(v.secret) || (has(v.secret.secretName) && (size(v.secret.secretName) <= 253 && v.secret.secretName.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')) && (!has(v.secret.defaultMode) || (v.secret.defaultMode >= 0 && v.secret.defaultMode <= 511))))",message="a secret volume needs a Secret name (a DNS subdomain) and a mode up to 0777"
	// +kubebuilder:validation:XValidation:rule="self.all(v, !has(v.configMap) || (has(v.configMap.name) && (size(v.configMap.name) <= 253 && v.configMap.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')) && (!has(v.configMap.defaultMode) || (v.configMap.defaultMode >= 0 && v.configMap.defaultMode <= 511))))",message="a configMap volume needs a ConfigMap name (a DNS subdomain) and a mode up to 0777"
	Volumes []corev1.Volume `json:"volumes,omitempty"`
	// InitContainers are set, by name, in the pod spec: replaced where one
	// of the name exists, appended otherwise.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(c, (size(c.name) <= 63 && c.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')))",message="container names must be DNS labels"
	// +kubebuilder:validation:XValidation:rule="self.all(c, has(c.image) && size(c.image) > 0 && c.image.trim() == c.image)",message="containers need an image without surrounding whitespace"
	// +kubebuilder:validation:XValidation:rule="self.all(c, !has(c.env) || c.env.all(e, e.name.matches('^[ -<>-~]+$')))",message="env names must be printable ASCII characters other than '='"
	// +kubebuilder:validation:XValidation:rule="self.all(c, !has(c.volumeMounts) || c.volumeMounts.all(m, (size(m.name) <= 63 && m.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'))))",message="volume mount names must be DNS labels"
	InitContainers []corev1.Container `json:"initContainers,omitempty"`
	// Containers are set, by name, in the pod spec.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(c, (size(c.name) <= 63 && c.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')))",message="container names must be DNS labels"
	// +kubebuilder:validation:XValidation:rule="self.all(c, has(c.image) && size(c.image) > 0 && c.image.trim() == c.image)",message="containers need an image without surrounding whitespace"
	// +kubebuilder:validation:XValidation:rule="self.all(c, !has(c.env) || c.env.all(e, e.name.matches('^[ -<>-~]+$')))",message="env names must be printable ASCII characters other than '='"
	// +kubebuilder:validation:XValidation:rule="self.all(c, !has(c.volumeMounts) || c.volumeMounts.all(m, (size(m.name) <= 63 && m.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'))))",message="volume mount names must be DNS labels"
	Containers []corev1.Container `json:"containers,omitempty"`
	// InitContainersToo applies Env, EnvFrom and VolumeMounts to the
	// workload's init containers as well.
	// +optional
	InitContainersToo bool `json:"initContainersToo,omitempty"`
}

// Do adds the Spec to wp's pod template. It is idempotent: Do twice is Do
// once.
func (s Spec) Do(wp *duck.WithPod) {
	ps := &wp.Spec.Template.Spec
	s.eachTarget(ps, func(c *corev1.Container) {
		for _, e := range s.Env {
			c.Env = set(c.Env, *e.DeepCopy(), func(x corev1.EnvVar) bool { return x.Name == e.Name })
		}
		for _, f := range s.EnvFrom {
			if !slices.ContainsFunc(c.EnvFrom, func(x corev1.EnvFromSource) bool { return equality.Semantic.DeepEqual(x, f) }) {
				c.EnvFrom = append(c.EnvFrom, *f.DeepCopy())
			}
		}
		for _, m := range s.VolumeMounts {
			c.VolumeMounts = set(c.VolumeMounts, *m.DeepCopy(), func(x corev1.VolumeMount) bool { return x.MountPath == m.MountPath })
		}
	})
	for _, v := range s.Volumes {
		ps.Volumes = set(ps.Volumes, *v.DeepCopy(), func(x corev1.Volume) bool { return x.Name == v.Name })
	}
	for _, c := range s.InitContainers {
		ps.InitContainers = set(ps.InitContainers, *c.DeepCopy(), func(x corev1.Container) bool { return x.Name == c.Name })
	}
	for _, c := range s.Containers {
		ps.Containers = set(ps.Containers, *c.DeepCopy(), func(x corev1.Container) bool { return x.Name == c.Name })
	}
}

// Undo removes from wp's pod template what the Spec names: its env entries,
// envFrom sources, mounts, volumes and containers. Lists it leaves empty
// become nil, so Undo after Do gives back a workload that had none.
func (s Spec) Undo(wp *duck.WithPod) {
	ps := &wp.Spec.Template.Spec
	for _, c := range s.Containers {
		ps.Containers = remove(ps.Containers, func(x corev1.Container) bool { return x.Name == c.Name })
	}
	for _, c := range s.InitContainers {
		ps.InitContainers = remove(ps.InitContainers, func(x corev1.Container) bool { return x.Name == c.Name })
	}
	for _, v := range s.Volumes {
		ps.Volumes = remove(ps.Volumes, func(x corev1.Volume) bool { return x.Name == v.Name })
	}
	s.eachTarget(ps, func(c *corev1.Container) {
		for _, e := range s.Env {
			c.Env = remove(c.Env, func(x corev1.EnvVar) bool { return x.Name == e.Name })
		}
		for _, f := range s.EnvFrom {
			c.EnvFrom = remove(c.EnvFrom, func(x corev1.EnvFromSource) bool { return equality.Semantic.DeepEqual(x, f) })
		}
		for _, m := range s.VolumeMounts {
			c.VolumeMounts = remove(c.VolumeMounts, func(x corev1.VolumeMount) bool { return x.MountPath == m.MountPath })
		}
	})
}

// eachTarget calls f on every container the Spec's per-container entries
// go to: the workload's own, not the ones the Spec adds.
func (s Spec) eachTarget(ps *corev1.PodSpec, f func(*corev1.Container)) {
	ours := map[string]bool{}
	for _, c := range append(slices.Clone(s.InitContainers), s.Containers...) {
		ours[c.Name] = true
	}
	lists := []([]corev1.Container){ps.Containers}
	if s.InitContainersToo {
		lists = append(lists, ps.InitContainers)
	}
	for _, list := range lists {
		for i := range list {
			if !ours[list[i].Name] {
				f(&list[i])
			}
		}
	}
}

func set[E any](s []E, e E, same func(E) bool) []E {
	if i := slices.IndexFunc(s, same); i >= 0 {
		s[i] = e
		return s
	}
	return append(s, e)
}

func remove[E any](s []E, match func(E) bool) []E {
	s = slices.DeleteFunc(s, match)
	if len(s) == 0 {
		return nil
	}
	return s
}

func keys[E any](s []E, key func(E) string) []string {
	out := make([]string, len(s))
	for i, e := range s {
		out[i] = key(e)
	}
	return out
}
