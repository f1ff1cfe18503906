package envtest

import (
	"bytes"
	"io"
	"net/http"
	"time"
)

// crdDelay is what the kube-apiserver answers, with 503, when a
// MutatingAdmissionPolicy matches an object of a kind whose schema it has
// not loaded yet: for a few seconds after a CustomResourceDefinition is
// created (it reads the schemas of new kinds every 5 s).
const crdDelay = "There can be a delay between when CustomResourceDefinitions are created and when they are available"

// crdDelayRetries bounds the retries of a request refused with crdDelay:
// at retryPause each, 30 s.
const (
	crdDelayRetries = 120
	retryPause      = 250 * time.Millisecond
)

// retryCRDDelay is a RoundTripper that retries a request the
// kube-apiserver refuses with crdDelay, as a user retries a kubectl apply
// that came a moment too soon after the CRD: every bindkit kind has such
// a policy (its requested-by record), and tests write Bindings seconds
// after they install the kind's CRD, where an installation that runs a
// Deployment first never sees the window.
type retryCRDDelay struct{ next http.RoundTripper }

func (r retryCRDDelay) RoundTrip(req *http.Request) (*http.Response, error) {
	for i := 0; ; i++ {
		resp, err := r.next.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusServiceUnavailable || i == crdDelayRetries || (req.Body != nil && req.GetBody == nil) {
			return resp, err
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		resp.Body.Close()
		if err != nil || !bytes.Contains(body, []byte(crdDelay)) {
			resp.Body = io.NopCloser(bytes.NewReader(body))
			return resp, nil
		}
		select {
		case <-req.Context().Done():
			return nil, req.Context().Err()
		case <-time.After(retryPause):
		}
		if req.GetBody != nil {
			if req.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		}
	}
}

// retryingCRDDelay wraps rt in retryCRDDelay (a rest.Config's WrapTransport).
func retryingCRDDelay(rt http.RoundTripper) http.RoundTripper { return retryCRDDelay{next: rt} }
