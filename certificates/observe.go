package certificates

import (
	"context"
	"time"

	"go.uber.org/zap"
)

// Observe is what a replica that does not write the Secret runs instead of
// Reconcile (a follower, under leader election): it reads the Secret,
// writes nothing, and always schedules its next look.
//
// Such a replica serves whatever certificate the Secret holds, and can do
// nothing about it when the writer is gone: if no replica ever leads, the
// serving certificate is never renewed. Observe makes that visible before
// it hurts: once the serving certificate is past its renewal time by half
// of ServingRotateBefore (a working leader renews it at the start of that
// margin, so it is overdue), Observe logs an error naming its expiry, once
// per certificate. The webhook server itself never presents an expired
// certificate and reports not ready once it has none to present (see
// package webhook), so a Service stops sending to that replica rather
// than failing every handshake.
//
// Keys of other Secrets are ignored. The returned error is always nil: a
// follower has nothing to retry.
func (r *Reconciler) Observe(ctx context.Context, key string) error {
	if key != r.key {
		return nil
	}
	r.schedule(r.observe(ctx))
	return nil
}

func (r *Reconciler) observe(ctx context.Context) time.Duration {
	secret, err := r.get(ctx)
	if err != nil {
		return r.opts.RetryInterval
	}
	if secret == nil {
		r.observeExpiry(nil)
		return r.opts.RetryInterval
	}
	r.observeExpiry(secret.Data)
	serving, err := ParseKeyPair(secret.Data[r.opts.Keys.ServerCert], secret.Data[r.opts.Keys.ServerKey])
	if err != nil {
		return r.opts.RetryInterval
	}
	now := r.now()
	overdue := serving.Cert.NotAfter.Add(-r.opts.ServingRotateBefore / 2)
	if now.Before(overdue) {
		return overdue.Sub(now)
	}
	serial := serving.Cert.SerialNumber.Text(16)
	r.mu.Lock()
	report := r.warnedSerial != serial
	r.warnedSerial = serial
	r.mu.Unlock()
	if report {
		r.logger.Error("serving certificate is overdue for renewal and no leader renews it; the webhook stops serving when it expires",
			zap.String("secret", r.key), zap.String("servingSerial", serial),
			zap.Time("renewalDue", serving.Cert.NotAfter.Add(-r.opts.ServingRotateBefore)),
			zap.Time("expires", serving.Cert.NotAfter))
	}
	return r.opts.RetryInterval
}

// Observer is told what a Reconciler sees and writes, for metrics
// (package metrics implements it for Prometheus). Its methods are called
// from Reconcile and Observe; they must be quick.
type Observer interface {
	// CertificatesExpire reports, after each look at the Secret (by
	// Reconcile or Observe, so on every replica), when its current CA (the
	// bundle's first certificate) and its serving certificate expire; a
	// zero time stands for one the Secret does not hold, or that does not
	// parse.
	CertificatesExpire(ca, serving time.Time)
	// CertificateRotated reports a write that put a new CA (ca true) or a
	// new serving certificate (ca false) into the Secret, the first ones
	// included.
	CertificateRotated(ca bool)
}

// observeExpiry tells the Observer when the certificates of data expire.
func (r *Reconciler) observeExpiry(data map[string][]byte) {
	if r.observer == nil {
		return
	}
	var ca, serving time.Time
	if bundle, _ := ParseCertificates(data[r.opts.Keys.CACert]); len(bundle) > 0 {
		ca = bundle[0].NotAfter
	}
	if certs, _ := ParseCertificates(data[r.opts.Keys.ServerCert]); len(certs) > 0 {
		serving = certs[0].NotAfter
	}
	r.observer.CertificatesExpire(ca, serving)
}
