package webhook_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/bindkit/bindkit/webhook"
)

// teamLabeler labels every new object with its team.
type teamLabeler struct{}

func (teamLabeler) Path() string { return "/team-label" }

func (teamLabeler) Admit(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	if req.Operation != admissionv1.Create {
		return webhook.Allowed()
	}
	return webhook.PatchResponse([]jsonpatch.JsonPatchOperation{
		{Operation: "add", Path: "/metadata/labels/team", Value: "web"},
	})
}

func ExampleNew() {
	// The serving certificate comes from a Secret through an informer's
	// lister; a real process passes a clientset built from its config and
	// starts the factory.
	factory := informers.NewSharedInformerFactoryWithOptions(fake.NewClientset(), 0, informers.WithNamespace("bindkit-system"))
	secrets := factory.Core().V1().Secrets().Lister().Secrets("bindkit-system")

	server, err := webhook.New(webhook.Options{SecretName: "webhook-certs"}, secrets, teamLabeler{})
	if err != nil {
		panic(err)
	}
	// server.Run(ctx) serves HTTPS on :8443 until ctx ends. Here the handler
	// answers one review directly.
	review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",
		"request":{"uid":"42","operation":"CREATE","object":{"metadata":{"labels":{}}}}}`
	r := httptest.NewRequest(http.MethodPost, "/team-label", strings.NewReader(review))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	server.ServeHTTP(w, r)
	fmt.Println(w.Code, w.Body.String())
	// Output:
	// 200 {"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"42","allowed":true,"patch":"W3sib3AiOiJhZGQiLCJwYXRoIjoiL21ldGFkYXRhL2xhYmVscy90ZWFtIiwidmFsdWUiOiJ3ZWIifV0=","patchType":"JSONPatch"}}
}

func ExampleNew_duplicatePath() {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	secrets := factory.Core().V1().Secrets().Lister().Secrets("bindkit-system")
	_, err := webhook.New(webhook.Options{}, secrets, teamLabeler{}, teamLabeler{})
	fmt.Println(err)
	// Output:
	// webhook: admission controllers webhook_test.teamLabeler and webhook_test.teamLabeler both serve path /team-label
}
