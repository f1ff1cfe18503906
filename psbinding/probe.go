package psbinding

import (
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/bindkit/bindkit/duck"
	"github.com/bindkit/bindkit/webhook"
)

// Probes of the admission path. When a declarative kind's admission moves
// between the webhook and its MutatingAdmissionPolicy, the path it leaves
// stays until the one it joins is seen in force, by a server-side dry run
// through the kube-apiserver of an object a Binding names (package
// wiring). The object carries ProbeLabel; the webhook answers it with
// nothing but ProbeAnswerAnnotation, so the dry run's result says both
// whether the kube-apiserver called the webhook and whether the policy
// bound the object.
const (
	// ProbeLabel marks a probe object; its value identifies the probe.
	ProbeLabel = "bindings.bindkit.dev/probe"
	// ProbeAnswerAnnotation is what the webhook adds to a probe object,
	// ProbeAnswerWebhook: the kube-apiserver called it. The object must
	// carry annotations already (a probe always does).
	ProbeAnswerAnnotation = "bindings.bindkit.dev/probe-answer"
	ProbeAnswerWebhook    = "webhook"
)

// probeAnswer is the webhook's answer to a probe: the object as it came,
// and the mark that the webhook was called.
func probeAnswer() *admissionv1.AdmissionResponse {
	return webhook.PatchResponse([]jsonpatch.JsonPatchOperation{{
		Operation: "add", Path: duck.AnnotationPath(ProbeAnswerAnnotation), Value: ProbeAnswerWebhook,
	}})
}
