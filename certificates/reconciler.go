package certificates

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// trustPollInterval is how often the Reconciler looks at its Publishers
// while it waits for one of them to carry a new CA. Publishers read a
// cache, so a look costs no API call.
const trustPollInterval = time.Second

// Reconciler keeps the certificate Secret complete and current. It is safe
// for concurrent use, though a work queue never runs one key twice at once.
type Reconciler struct {
	client       kubernetes.Interface
	opts         Options
	key          string
	lister       corev1listers.SecretLister
	enqueueAfter func(key string, d time.Duration)
	publishers   []Publisher
	now          func() time.Time
	logger       *zap.Logger
	observer     Observer // nil: none
	fieldManager string

	mu sync.Mutex
	// trustedCA is the last CA every Publisher was seen to carry, and
	// trustedSince when that was first seen: TrustDelay counts from there.
	trustedCA    *x509.Certificate
	trustedSince time.Time
	// warnedSerial is the serving certificate Observe last reported as
	// overdue, so the report is made once per certificate.
	warnedSerial string
	// lastWaiting is the last reason to wait that was logged, so a wait is
	// logged once, not on every poll.
	lastWaiting string
}

// ReconcilerOptions wire a Reconciler into its process: where it reads,
// how it schedules itself, whom it waits for and tells. Zero fields take
// the documented defaults; NewReconciler returns an error naming a field
// set wrongly. The certificates' own settings are Options.
type ReconcilerOptions struct {
	// Lister makes Reconcile read the Secret from an informer's lister
	// instead of a GET on every run. Writes always go to the API server.
	// Default: nil, a GET on every run.
	Lister corev1listers.SecretLister
	// EnqueueAfter is the callback through which Reconcile schedules its
	// next run: when the serving certificate or the CA is due for
	// rotation, an old CA leaves the bundle, a Publisher is due to be
	// checked again, or after RetryInterval when the run failed. Wire it to
	// the controller's delayed enqueue. Default: nil, which schedules
	// nothing, so rotation waits for the next event or resync.
	EnqueueAfter func(key string, d time.Duration)
	// Publishers are the Publishers of the CA bundle: the Reconciler signs
	// a serving certificate under a CA only once every one of them carries
	// that CA (see the package documentation for the whole order). Default:
	// none, which signs at once, as for a server whose clients are given
	// the bundle some other way. A nil Publisher is an error.
	Publishers []Publisher
	// Clock returns the current time, for tests. Default: time.Now.
	Clock func() time.Time
	// Logger logs what the Reconciler does. Keys and certificates are
	// never logged; serial numbers and expiry times are. Default: none.
	Logger *zap.Logger
	// Observer is told the expiry of the certificates the Reconciler sees
	// and every rotation it writes (see Observer). Default: none.
	Observer Observer
	// FieldManager names the Reconciler in the managedFields of the Secret
	// it writes. Default: empty, which leaves the API server to name the
	// client by its user agent.
	FieldManager string
}

// NewReconciler returns a Reconciler for the Secret opts names, wired by
// ro. It starts no goroutine. It fails when opts are incomplete or
// inconsistent, or ro names a nil Publisher.
func NewReconciler(client kubernetes.Interface, opts Options, ro ReconcilerOptions) (*Reconciler, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Reconciler{
		client:       client,
		opts:         opts,
		key:          opts.Namespace + "/" + opts.SecretName,
		lister:       ro.Lister,
		enqueueAfter: ro.EnqueueAfter,
		publishers:   slices.Clone(ro.Publishers),
		now:          ro.Clock,
		logger:       ro.Logger,
		observer:     ro.Observer,
		fieldManager: ro.FieldManager,
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.logger == nil {
		r.logger = zap.NewNop()
	}
	for i, p := range r.publishers {
		if p == nil {
			return nil, fmt.Errorf("certificates: secret %s: publisher %d is nil", r.key, i)
		}
	}
	return r, nil
}

// Key returns the work-queue key of the owned Secret, "namespace/name".
func (r *Reconciler) Key() string { return r.key }

// Options returns the options the Reconciler runs with, defaults filled in.
func (r *Reconciler) Options() Options { return r.opts }

// Reconcile brings the Secret named by key to its desired state and
// schedules the next run, on every path: when the next certificate is due,
// when a Publisher is to be checked again, or after RetryInterval when the
// run failed. So rotation always has a next attempt, even after the work
// queue has given up on its own retries. Keys of other Secrets are ignored,
// so the Reconciler can sit behind an unfiltered Secret informer. A
// returned error means the run failed; the caller may retry sooner.
func (r *Reconciler) Reconcile(ctx context.Context, key string) error {
	if key != r.key {
		return nil
	}
	next, err := r.reconcile(ctx)
	if err != nil {
		next = r.opts.RetryInterval
		err = fmt.Errorf("secret %s: %w", r.key, err)
	}
	r.schedule(next)
	return err
}

func (r *Reconciler) schedule(d time.Duration) {
	if r.enqueueAfter != nil {
		r.enqueueAfter(r.key, max(d, 0))
	}
}

// reconcile does one run and returns when the next one is due.
func (r *Reconciler) reconcile(ctx context.Context) (time.Duration, error) {
	secret, err := r.get(ctx)
	if err != nil {
		return 0, err
	}
	pub, err := r.published()
	if err != nil {
		return 0, err
	}
	now := r.now()
	var current map[string][]byte
	if secret != nil {
		current = secret.Data
	}
	plan, err := r.plan(current, pub, now)
	if err != nil {
		return 0, err
	}

	switch {
	case secret == nil:
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: r.opts.SecretName, Namespace: r.opts.Namespace},
			Type:       corev1.SecretTypeOpaque,
			Data:       plan.data,
		}
		if _, err := r.client.CoreV1().Secrets(r.opts.Namespace).Create(ctx, secret, metav1.CreateOptions{FieldManager: r.fieldManager}); err != nil {
			r.observeExpiry(nil)
			return 0, fmt.Errorf("create: %w", err)
		}
		r.logger.Info("created certificate secret", plan.fields(r.key)...)
		r.observeRotation(plan)
	case plan.changed:
		// The lister's object is shared with every other reader of the cache.
		written := secret.DeepCopy()
		written.Data = plan.data
		if _, err := r.client.CoreV1().Secrets(r.opts.Namespace).Update(ctx, written, metav1.UpdateOptions{FieldManager: r.fieldManager}); err != nil {
			r.observeExpiry(secret.Data)
			return 0, fmt.Errorf("update: %w", err)
		}
		r.logger.Info("updated certificate secret", plan.fields(r.key)...)
		r.observeRotation(plan)
	case plan.waiting != "" && r.firstWait(plan.waiting):
		r.logger.Info("waiting before signing under the new CA", plan.fields(r.key)...)
	}
	r.observeExpiry(plan.data)
	return plan.next.Sub(now), nil
}

// observeRotation tells the Observer what a write of p rotated.
func (r *Reconciler) observeRotation(p plan) {
	if r.observer == nil {
		return
	}
	if p.newCA {
		r.observer.CertificateRotated(true)
	}
	if p.newServing {
		r.observer.CertificateRotated(false)
	}
}

// firstWait reports whether reason differs from the last one logged.
func (r *Reconciler) firstWait(reason string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := reason != r.lastWaiting
	r.lastWaiting = reason
	return first
}

// get returns the Secret, or nil when it does not exist.
func (r *Reconciler) get(ctx context.Context) (*corev1.Secret, error) {
	var secret *corev1.Secret
	var err error
	if r.lister != nil {
		secret, err = r.lister.Secrets(r.opts.Namespace).Get(r.opts.SecretName)
	} else {
		secret, err = r.client.CoreV1().Secrets(r.opts.Namespace).Get(ctx, r.opts.SecretName, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		// The typed client returns an empty object along with NotFound.
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get: %w", err)
	}
	return secret, nil
}

// published reads what every Publisher publishes now.
func (r *Reconciler) published() ([]published, error) {
	var out []published
	for _, p := range r.publishers {
		bundle, ok, err := p.PublishedCABundle()
		if err != nil {
			return nil, fmt.Errorf("%s: read published CA bundle: %w", p, err)
		}
		if !ok {
			continue
		}
		certs, err := ParseCertificates(bundle)
		out = append(out, published{name: p.String(), certs: certs, err: err})
	}
	return out, nil
}

// plan is the outcome of comparing the Secret's data with what it should be.
type plan struct {
	data    map[string][]byte
	changed bool
	// next is when the Secret next needs attention.
	next time.Time
	// waiting says why the serving certificate is not yet signed by the
	// current CA although it is due; empty when nothing waits.
	waiting string
	// What changed, for the log line.
	newCA, newServing bool
	recovered         int // CAs taken from the Publishers into a lost bundle
	caSerial, serial  string
}

func (p plan) fields(secret string) []zap.Field {
	f := []zap.Field{
		zap.String("secret", secret),
		zap.Bool("newCA", p.newCA), zap.String("caSerial", p.caSerial),
		zap.Bool("newServingCert", p.newServing), zap.String("servingSerial", p.serial),
		zap.Time("nextCheck", p.next),
	}
	if p.recovered > 0 {
		f = append(f, zap.Int("recoveredCAs", p.recovered))
	}
	if p.waiting != "" {
		f = append(f, zap.String("waiting", p.waiting))
	}
	return f
}

// plan computes the desired data from the current data and what the
// Publishers publish, at time now. It keeps every entry it does not own.
func (r *Reconciler) plan(data map[string][]byte, pub []published, now time.Time) (plan, error) {
	k := r.opts.Keys
	out := make(map[string][]byte, len(data)+4)
	for name, v := range data {
		out[name] = v
	}
	p := plan{data: out}

	bundle, recovered := trustedBundle(data[k.CACert], pub, now)
	p.recovered = recovered
	caKey, _ := parseECKey(data[k.CAKey])
	ca, serving, err := r.nextCA(&p, bundle, caKey, now)
	if err != nil {
		return p, err
	}
	if p.newCA {
		out[k.CAKey] = ca.KeyPEM
	}
	kept := keepCAs(ca.Cert, bundle, now)
	out[k.CACert] = EncodeCertificates(kept)

	if serving == nil {
		if serving, err = r.nextServing(&p, data, ca, kept, pub, now); err != nil {
			return p, err
		}
	}
	if p.newServing {
		out[k.ServerCert] = serving.CertPEM
		out[k.ServerKey] = serving.KeyPEM
	}
	r.scheduleNext(&p, ca, serving, kept, now)
	for _, name := range []string{k.CACert, k.CAKey, k.ServerCert, k.ServerKey} {
		if !bytes.Equal(out[name], data[name]) {
			p.changed = true
		}
	}
	return p, nil
}

// trustedBundle returns the CAs of the Secret's bundle (pemBundle) together
// with every still-valid CA a Publisher carries that the bundle lacks, and
// how many of those it added.
//
// Unparsable bundle entries are dropped rather than fatal: a corrupted
// bundle is repaired, not left to block every rotation. The Publishers' CAs
// are what the clients trust now, and the webhook may still serve a
// certificate one of them signed, whatever the Secret holds (nothing,
// garbage, only expired CAs, a foreign CA): keeping them in the bundle
// keeps that certificate trusted until a new one is issued and trusted. If
// the CA key survived, its CA is found among them and nothing changes. In a
// healthy Secret the bundle already holds them all, and none is added.
func trustedBundle(pemBundle []byte, pub []published, now time.Time) ([]*x509.Certificate, int) {
	bundle, _ := ParseCertificates(pemBundle)
	added := 0
	for _, pb := range pub {
		for _, c := range pb.certs {
			if c.IsCA && now.Before(c.NotAfter) && !slices.ContainsFunc(bundle, c.Equal) {
				bundle = append(bundle, c)
				added++
			}
		}
	}
	return bundle, added
}

// KeepTrusted returns the CA bundle a Publisher should publish when the
// certificates Secret's bundle is secretBundle and it publishes
// publishedBundle now: secretBundle when it holds a CA valid at now, else
// secretBundle with the CAs of publishedBundle still valid at now appended.
// A Secret overwritten with only expired CAs (or garbage) would otherwise
// take trust away from the certificate the webhook keeps serving, for as
// long as the Reconciler takes to repair the Secret (which keeps those CAs
// too, see trustedBundle). A bundle with a valid CA is published as it is,
// so a CA someone else wrote into the configuration is not kept. When
// nothing is added it returns secretBundle itself.
func KeepTrusted(secretBundle, publishedBundle []byte, now time.Time) []byte {
	if certs, _ := ParseCertificates(secretBundle); slices.ContainsFunc(certs, func(c *x509.Certificate) bool { return c.IsCA && now.Before(c.NotAfter) }) {
		return secretBundle
	}
	certs, _ := ParseCertificates(publishedBundle)
	bundle, added := trustedBundle(secretBundle, []published{{certs: certs}}, now)
	if added == 0 {
		return secretBundle
	}
	return EncodeCertificates(bundle)
}

// nextCA returns the CA to sign under: the bundle's current CA whose key
// the Secret holds, or a new one (p.newCA). When the current CA is due for
// rotation, it first signs one last serving certificate (p.newServing),
// returned too: it has a full lifetime, so nothing is signed by the new CA
// until clients have had that long to learn the new bundle.
func (r *Reconciler) nextCA(p *plan, bundle []*x509.Certificate, caKey *ecdsa.PrivateKey, now time.Time) (*KeyPair, *KeyPair, error) {
	ca := currentCA(bundle, caKey, now)
	var serving *KeyPair
	if ca != nil && !now.Before(ca.Cert.NotAfter.Add(-r.opts.CARotateBefore)) {
		var err error
		if serving, err = GenerateServingCert(ca, r.opts.dnsNames(), r.opts.IPAddresses, now, r.opts.ServingValidity); err != nil {
			return nil, nil, err
		}
		p.newServing = true
		ca = nil
	}
	if ca == nil {
		var err error
		if ca, err = GenerateCA(r.caName(), now, r.opts.CAValidity); err != nil {
			return nil, nil, err
		}
		p.newCA = true
	}
	return ca, serving, nil
}

// keepCAs returns the bundle to publish: ca first, then every other CA of
// bundle while it is valid, since a serving certificate it signed may still
// be in use or a client may still hold only the old bundle.
func keepCAs(ca *x509.Certificate, bundle []*x509.Certificate, now time.Time) []*x509.Certificate {
	kept := []*x509.Certificate{ca}
	for _, c := range bundle {
		if c.IsCA && now.Before(c.NotAfter) && !slices.ContainsFunc(kept, c.Equal) {
			kept = append(kept, c)
		}
	}
	return kept
}

// nextServing returns the serving certificate to keep: the Secret's own
// while kept trusts it and it is not due, else a new one under ca
// (p.newServing), unless the Publishers do not trust ca yet (p.waiting),
// when it returns nil and whatever the Secret holds stays: the webhook keeps
// serving its last good certificate meanwhile.
func (r *Reconciler) nextServing(p *plan, data map[string][]byte, ca *KeyPair, kept []*x509.Certificate, pub []published, now time.Time) (*KeyPair, error) {
	k := r.opts.Keys
	if current, err := ParseKeyPair(data[k.ServerCert], data[k.ServerKey]); err == nil && current != nil && r.servingOK(current.Cert, kept, now) {
		return current, nil
	}
	if p.waiting = r.untrusted(ca.Cert, pub, now); p.waiting != "" {
		return nil, nil
	}
	serving, err := GenerateServingCert(ca, r.opts.dnsNames(), r.opts.IPAddresses, now, r.opts.ServingValidity)
	if err != nil {
		return nil, err
	}
	p.newServing = true
	return serving, nil
}

// scheduleNext sets when p's Secret needs its next look (p.next) and the
// serials it reports.
func (r *Reconciler) scheduleNext(p *plan, ca, serving *KeyPair, kept []*x509.Certificate, now time.Time) {
	if p.waiting != "" {
		p.next = now.Add(r.waitInterval(now))
	} else {
		p.next = serving.Cert.NotAfter.Add(-r.opts.ServingRotateBefore)
		if t := ca.Cert.NotAfter.Add(-r.opts.CARotateBefore); t.Before(p.next) {
			p.next = t
		}
		for _, c := range kept[1:] {
			if c.NotAfter.Before(p.next) {
				p.next = c.NotAfter
			}
		}
		p.serial = serving.Cert.SerialNumber.Text(16)
	}
	p.caSerial = ca.Cert.SerialNumber.Text(16)
}

// untrusted returns why no serving certificate may be signed under ca yet,
// or "" when it may: every Publisher that publishes carries ca, and has
// for TrustDelay.
func (r *Reconciler) untrusted(ca *x509.Certificate, pub []published, now time.Time) string {
	serial := ca.SerialNumber.Text(16)
	for _, pb := range pub {
		if pb.err != nil {
			return fmt.Sprintf("%s publishes a CA bundle that does not parse (%v)", pb.name, pb.err)
		}
		if !pb.trusts(ca) {
			return fmt.Sprintf("%s does not carry CA %s yet", pb.name, serial)
		}
	}
	if len(pub) == 0 {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.trustedCA == nil || !r.trustedCA.Equal(ca) {
		r.trustedCA, r.trustedSince = ca, now
	}
	if now.Sub(r.trustedSince) < r.opts.TrustDelay {
		return fmt.Sprintf("every publisher carries CA %s since %s; waiting %v for the kube-apiservers to see it",
			serial, r.trustedSince.UTC().Format(time.RFC3339), r.opts.TrustDelay)
	}
	return ""
}

// waitInterval is when to look again while a Publisher is waited for: at
// the end of TrustDelay when that is running, else the next poll.
func (r *Reconciler) waitInterval(now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.trustedCA != nil {
		if left := r.trustedSince.Add(r.opts.TrustDelay).Sub(now); left > 0 {
			return left
		}
	}
	return trustPollInterval
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
