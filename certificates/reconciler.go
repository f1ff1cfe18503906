package certificates

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// Reconciler keeps the certificate Secret complete and current. It is safe
// for concurrent use, though a work queue never runs one key twice at once.
type Reconciler struct {
	client       kubernetes.Interface
	opts         Options
	key          string
	lister       corev1listers.SecretLister
	enqueueAfter func(key string, d time.Duration)
	now          func() time.Time
	logger       *zap.Logger
}

// ReconcilerOption configures a Reconciler beyond its Options.
type ReconcilerOption func(*Reconciler)

// WithLister makes Reconcile read the Secret from an informer's lister
// instead of a GET on every run. Writes always go to the API server.
func WithLister(l corev1listers.SecretLister) ReconcilerOption {
	return func(r *Reconciler) { r.lister = l }
}

// WithEnqueueAfter gives the callback through which Reconcile schedules its
// next run: when the serving certificate or the CA is due for rotation, or an
// old CA leaves the bundle. Wire it to the controller's delayed enqueue.
// Without it nothing is scheduled and rotation waits for the next event or
// resync.
func WithEnqueueAfter(f func(key string, d time.Duration)) ReconcilerOption {
	return func(r *Reconciler) { r.enqueueAfter = f }
}

// WithClock replaces time.Now, for tests.
func WithClock(now func() time.Time) ReconcilerOption {
	return func(r *Reconciler) { r.now = now }
}

// WithLogger sets the logger (default: none). Keys and certificates are never
// logged; serial numbers and expiry times are.
func WithLogger(l *zap.Logger) ReconcilerOption {
	return func(r *Reconciler) { r.logger = l }
}

// NewReconciler returns a Reconciler for the Secret opts names. It starts no
// goroutine. It fails when opts are incomplete or inconsistent.
func NewReconciler(client kubernetes.Interface, opts Options, options ...ReconcilerOption) (*Reconciler, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Reconciler{
		client: client,
		opts:   opts,
		key:    opts.Namespace + "/" + opts.SecretName,
		now:    time.Now,
		logger: zap.NewNop(),
	}
	for _, o := range options {
		o(r)
	}
	return r, nil
}

// Key returns the work-queue key of the owned Secret, "namespace/name".
func (r *Reconciler) Key() string { return r.key }

// Reconcile brings the Secret named by key to its desired state, writes the
// CA bundle into the configured webhook configurations and schedules the next
// run. Keys of other Secrets are ignored, so the Reconciler can sit behind an
// unfiltered Secret informer. A returned error means the caller should retry
// with backoff; nothing is scheduled then.
func (r *Reconciler) Reconcile(ctx context.Context, key string) error {
	if key != r.key {
		return nil
	}
	secret, err := r.get(ctx)
	switch {
	case apierrors.IsNotFound(err):
		// The typed client returns an empty object along with NotFound.
		secret = nil
	case err != nil:
		return fmt.Errorf("secret %s: get: %w", r.key, err)
	}
	now := r.now()
	var current map[string][]byte
	if secret != nil {
		current = secret.Data
	}
	plan, err := r.plan(current, now)
	if err != nil {
		return fmt.Errorf("secret %s: %w", r.key, err)
	}

	switch {
	case secret == nil:
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: r.opts.SecretName, Namespace: r.opts.Namespace},
			Type:       corev1.SecretTypeOpaque,
			Data:       plan.data,
		}
		if _, err := r.client.CoreV1().Secrets(r.opts.Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("secret %s: create: %w", r.key, err)
		}
		r.logger.Info("created certificate secret", plan.fields(r.key)...)
	case plan.changed:
		// The lister's object is shared with every other reader of the cache.
		secret = secret.DeepCopy()
		secret.Data = plan.data
		if _, err := r.client.CoreV1().Secrets(r.opts.Namespace).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("secret %s: update: %w", r.key, err)
		}
		r.logger.Info("updated certificate secret", plan.fields(r.key)...)
	}

	if err := InjectCABundle(ctx, r.client.AdmissionregistrationV1(), plan.data[r.opts.Keys.CACert],
		r.opts.MutatingWebhookConfigurations, r.opts.ValidatingWebhookConfigurations); err != nil {
		return fmt.Errorf("secret %s: %w", r.key, err)
	}

	if r.enqueueAfter != nil {
		r.enqueueAfter(r.key, max(plan.next.Sub(now), 0))
	}
	return nil
}

func (r *Reconciler) get(ctx context.Context) (*corev1.Secret, error) {
	if r.lister != nil {
		return r.lister.Secrets(r.opts.Namespace).Get(r.opts.SecretName)
	}
	return r.client.CoreV1().Secrets(r.opts.Namespace).Get(ctx, r.opts.SecretName, metav1.GetOptions{})
}

// plan is the outcome of comparing the Secret's data with what it should be.
type plan struct {
	data    map[string][]byte
	changed bool
	// next is when the Secret next needs attention.
	next time.Time
	// What changed, for the log line.
	newCA, newServing bool
	caSerial, serial  string
}

func (p plan) fields(secret string) []zap.Field {
	return []zap.Field{
		zap.String("secret", secret),
		zap.Bool("newCA", p.newCA), zap.String("caSerial", p.caSerial),
		zap.Bool("newServingCert", p.newServing), zap.String("servingSerial", p.serial),
		zap.Time("nextCheck", p.next),
	}
}

// plan computes the desired data from the current data at time now. It keeps
// every entry it does not own.
func (r *Reconciler) plan(data map[string][]byte, now time.Time) (plan, error) {
	k := r.opts.Keys
	out := make(map[string][]byte, len(data)+4)
	for name, v := range data {
		out[name] = v
	}
	p := plan{data: out}

	// Unparsable bundle entries are dropped rather than fatal: a corrupted
	// bundle is repaired, not left to block every rotation.
	bundle, _ := ParseCertificates(data[k.CACert])
	caKey, _ := parseECKey(data[k.CAKey])
	ca := currentCA(bundle, caKey, now)

	var serving *KeyPair
	if ca != nil && !now.Before(ca.Cert.NotAfter.Add(-r.opts.CARotateBefore)) {
		// The last serving certificate under the old CA has a full lifetime,
		// so nothing is signed by the new CA until clients have had that long
		// to learn the new bundle.
		var err error
		if serving, err = GenerateServingCert(ca, r.opts.dnsNames(), r.opts.IPAddresses, now, r.opts.ServingValidity); err != nil {
			return p, err
		}
		ca = nil
	}
	if ca == nil {
		var err error
		if ca, err = GenerateCA(r.caName(), now, r.opts.CAValidity); err != nil {
			return p, err
		}
		p.newCA = true
		out[k.CAKey] = ca.KeyPEM
	}

	// The current CA first; older CAs stay while they are valid, since a
	// serving certificate they signed may still be in use or a client may
	// still hold only the old bundle.
	kept := []*x509.Certificate{ca.Cert}
	for _, c := range bundle {
		if c.IsCA && now.Before(c.NotAfter) && !slices.ContainsFunc(kept, func(k *x509.Certificate) bool { return k.Equal(c) }) {
			kept = append(kept, c)
		}
	}
	out[k.CACert] = EncodeCertificates(kept)

	if serving == nil {
		current, err := ParseKeyPair(data[k.ServerCert], data[k.ServerKey])
		if err == nil && r.servingOK(current.Cert, kept, now) {
			serving = current
		} else {
			if serving, err = GenerateServingCert(ca, r.opts.dnsNames(), r.opts.IPAddresses, now, r.opts.ServingValidity); err != nil {
				return p, err
			}
			p.newServing = true
		}
	} else {
		p.newServing = true
	}
	if p.newServing {
		out[k.ServerCert] = serving.CertPEM
		out[k.ServerKey] = serving.KeyPEM
	}

	p.next = serving.Cert.NotAfter.Add(-r.opts.ServingRotateBefore)
	if t := ca.Cert.NotAfter.Add(-r.opts.CARotateBefore); t.Before(p.next) {
		p.next = t
	}
	for _, c := range kept[1:] {
		if c.NotAfter.Before(p.next) {
			p.next = c.NotAfter
		}
	}
	p.caSerial = ca.Cert.SerialNumber.Text(16)
	p.serial = serving.Cert.SerialNumber.Text(16)
	for _, name := range []string{k.CACert, k.CAKey, k.ServerCert, k.ServerKey} {
		if !bytes.Equal(out[name], data[name]) {
			p.changed = true
		}
	}
	return p, nil
}

func (r *Reconciler) caName() string {
	if r.opts.ServiceName != "" {
		return r.opts.ServiceName + "." + r.opts.Namespace + " CA"
	}
	return r.opts.SecretName + "." + r.opts.Namespace + " CA"
}

// currentCA returns the bundle certificate that key belongs to, if it is a CA
// valid at now.
func currentCA(bundle []*x509.Certificate, key *ecdsa.PrivateKey, now time.Time) *KeyPair {
	if key == nil {
		return nil
	}
	for _, c := range bundle {
		pub, ok := c.PublicKey.(*ecdsa.PublicKey)
		if ok && c.IsCA && pub.Equal(&key.PublicKey) && !now.Before(c.NotBefore) && now.Before(c.NotAfter) {
			return &KeyPair{Cert: c, Key: key}
		}
	}
	return nil
}

// servingOK reports whether cert chains to the bundle at now, names exactly
// the wanted hosts and is not yet due for rotation.
func (r *Reconciler) servingOK(cert *x509.Certificate, bundle []*x509.Certificate, now time.Time) bool {
	if !now.Before(cert.NotAfter.Add(-r.opts.ServingRotateBefore)) {
		return false
	}
	if !slices.Equal(cert.DNSNames, r.opts.dnsNames()) ||
		!slices.EqualFunc(cert.IPAddresses, r.opts.IPAddresses, func(a, b net.IP) bool { return a.Equal(b) }) {
		return false
	}
	roots := x509.NewCertPool()
	for _, c := range bundle {
		roots.AddCert(c)
	}
	_, err := cert.Verify(x509.VerifyOptions{
		Roots:       roots,
		CurrentTime: now,
		KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	return err == nil
}
