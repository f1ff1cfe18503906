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
	if err != nil || secret == nil {
		return r.opts.RetryInterval
	}
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
