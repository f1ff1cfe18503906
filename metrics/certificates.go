package metrics

import (
	"time"

	"github.com/bindkit/bindkit/certificates"
)

// Certificates returns the certificates.Observer to build the webhook's
// certificates reconciler with (certificates.ReconcilerOptions.Observer): it keeps the
// expiry times of the CA and the serving certificate and counts
// rotations.
func (m *Metrics) Certificates() certificates.Observer { return certificateObserver{m} }

type certificateObserver struct{ m *Metrics }

// CertificatesExpire implements certificates.Observer.
func (o certificateObserver) CertificatesExpire(ca, serving time.Time) {
	o.m.certificateExpiry.WithLabelValues(certificateCA).Set(unixSeconds(ca))
	o.m.certificateExpiry.WithLabelValues(certificateServing).Set(unixSeconds(serving))
}

// CertificateRotated implements certificates.Observer.
func (o certificateObserver) CertificateRotated(ca bool) {
	which := certificateServing
	if ca {
		which = certificateCA
	}
	o.m.certificateRotations.WithLabelValues(which).Inc()
}

func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.Unix())
}
