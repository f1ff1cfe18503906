package declarative

import "github.com/bindkit/bindkit/policy"

// References are the authority policy's References
// (wiring.Options.References) of the Secrets and ConfigMaps a Spec kept
// at path in a Binding (a dotted path such as "spec.add") names: in env
// and envFrom, volumes (projected ones too), and the env and envFrom of
// the containers and init containers it adds. Each needs its author's
// get. Declare them for a kind whose Spec a user writes and whose
// references should be the user's to read; they are off by default (see
// wiring.Options.References for when they are not needed).
func References(path string) []policy.Reference {
	paths := func(in []string) []string {
		out := make([]string, len(in))
		for i, p := range in {
			out[i] = path + "." + p
		}
		return out
	}
	envOf := func(prefix, kind string) []string {
		return []string{
			prefix + "env[].valueFrom." + kind + "KeyRef.name",
			prefix + "envFrom[]." + kind + "Ref.name",
		}
	}
	var secrets, configMaps []string
	for _, prefix := range []string{"", "containers[].", "initContainers[]."} {
		secrets = append(secrets, envOf(prefix, "secret")...)
		configMaps = append(configMaps, envOf(prefix, "configMap")...)
	}
	secrets = append(secrets, "volumes[].secret.secretName", "volumes[].projected.sources[].secret.name")
	configMaps = append(configMaps, "volumes[].configMap.name", "volumes[].projected.sources[].configMap.name")
	return []policy.Reference{
		{Paths: paths(secrets), Resource: "secrets", Verb: "get"},
		{Paths: paths(configMaps), Resource: "configmaps", Verb: "get"},
	}
}
