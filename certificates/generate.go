package certificates

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// ClockSkew is how far before "now" every certificate's NotBefore is set, so
// a client whose clock runs a little behind ours still accepts a certificate
// issued a moment ago.
const ClockSkew = 5 * time.Minute

// KeyPair is a certificate with its private key, both parsed and PEM-encoded.
// The two forms always describe the same certificate and key.
type KeyPair struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
	KeyPEM  []byte
}

// ServiceDNSNames returns the names under which a Service is reached in a
// cluster: svc, svc.ns, svc.ns.svc and svc.ns.svc.cluster.local, in that order.
func ServiceDNSNames(service, namespace string) []string {
	return []string{
		service,
		service + "." + namespace,
		service + "." + namespace + ".svc",
		service + "." + namespace + ".svc.cluster.local",
	}
}

// GenerateCA returns a self-signed CA certificate named commonName, valid from
// now-ClockSkew until now+validity, with a new ECDSA P-256 key. It can sign
// certificates only, not other CAs (MaxPathLen 0).
func GenerateCA(commonName string, now time.Time, validity time.Duration) (*KeyPair, error) {
	if validity <= 0 {
		return nil, fmt.Errorf("CA %q: validity %v is not positive", commonName, validity)
	}
	template, err := newTemplate(commonName, now, now.Add(validity))
	if err != nil {
		return nil, fmt.Errorf("CA %q: %w", commonName, err)
	}
	template.IsCA = true
	template.BasicConstraintsValid = true
	template.MaxPathLenZero = true
	template.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	kp, err := sign(template, nil)
	if err != nil {
		return nil, fmt.Errorf("CA %q: %w", commonName, err)
	}
	return kp, nil
}

// GenerateServingCert returns a TLS server certificate signed by ca for the
// given DNS names and IP addresses, valid from now-ClockSkew until
// now+validity but never past ca's own expiry, with a new ECDSA P-256 key.
// Its common name is the first DNS name (or the first IP when there is none).
func GenerateServingCert(ca *KeyPair, dnsNames []string, ips []net.IP, now time.Time, validity time.Duration) (*KeyPair, error) {
	if ca == nil || ca.Cert == nil || ca.Key == nil {
		return nil, errors.New("serving certificate: no CA to sign with")
	}
	if len(dnsNames) == 0 && len(ips) == 0 {
		return nil, errors.New("serving certificate: no DNS names or IP addresses")
	}
	if validity <= 0 {
		return nil, fmt.Errorf("serving certificate: validity %v is not positive", validity)
	}
	name := ""
	if len(dnsNames) > 0 {
		name = dnsNames[0]
	} else {
		name = ips[0].String()
	}
	// A certificate that outlives its issuer would fail verification early
	// anyway; clamping makes its NotAfter the moment it really stops working,
	// which is what rotation is scheduled on.
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	template, err := newTemplate(name, now, notAfter)
	if err != nil {
		return nil, fmt.Errorf("serving certificate %q: %w", name, err)
	}
	template.KeyUsage = x509.KeyUsageDigitalSignature
	template.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	template.BasicConstraintsValid = true
	template.DNSNames = append([]string(nil), dnsNames...)
	template.IPAddresses = append([]net.IP(nil), ips...)
	kp, err := sign(template, ca)
	if err != nil {
		return nil, fmt.Errorf("serving certificate %q: %w", name, err)
	}
	return kp, nil
}

// ParseKeyPair parses a PEM certificate (the first CERTIFICATE block) and a
// PEM EC private key (SEC 1 or PKCS #8) and checks that they belong together.
func ParseKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	certs, err := ParseCertificates(certPEM)
	if err != nil {
		return nil, err
	}
	if len(certs) == 0 {
		return nil, errors.New("no certificate in PEM data")
	}
	key, err := parseECKey(keyPEM)
	if err != nil {
		return nil, err
	}
	pub, ok := certs[0].PublicKey.(*ecdsa.PublicKey)
	if !ok || !pub.Equal(&key.PublicKey) {
		return nil, errors.New("private key does not match the certificate")
	}
	return &KeyPair{Cert: certs[0], Key: key, CertPEM: encodeCert(certs[0]), KeyPEM: keyPEM}, nil
}

// ParseCertificates parses every CERTIFICATE block of PEM data, in order.
// Data without any block gives no certificates and no error; a block that
// does not parse is an error.
func ParseCertificates(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return certs, nil
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate %d: %w", len(certs), err)
		}
		certs = append(certs, cert)
	}
}

// EncodeCertificates returns certs as concatenated PEM blocks, in order: the
// form of a CA bundle.
func EncodeCertificates(certs []*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range certs {
		buf.Write(encodeCert(c))
	}
	return buf.Bytes()
}

func encodeCert(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

func parseECKey(keyPEM []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("no PEM block in private key data")
	}
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err := x509.ParseECPrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse EC private key: %w", err)
		}
		return key, nil
	case "PRIVATE KEY":
		key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse PKCS #8 private key: %w", err)
		}
		ec, ok := key.(*ecdsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("private key is a %T, want ECDSA", key)
		}
		return ec, nil
	default:
		return nil, fmt.Errorf("PEM block %q is not a private key", block.Type)
	}
}

func newTemplate(commonName string, now, notAfter time.Time) (*x509.Certificate, error) {
	// 128 random bits: RFC 5280 caps serials at 20 octets and CAs are asked
	// to use at least 64 bits of entropy.
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return &x509.Certificate{
		SerialNumber:       serial,
		Subject:            pkix.Name{CommonName: commonName},
		NotBefore:          now.Add(-ClockSkew).UTC().Truncate(time.Second),
		NotAfter:           notAfter.UTC().Truncate(time.Second),
		SignatureAlgorithm: x509.ECDSAWithSHA256,
	}, nil
}

// sign creates the certificate from template, self-signed when issuer is nil.
func sign(template *x509.Certificate, issuer *KeyPair) (*KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	parent, signer := template, key
	if issuer != nil {
		parent, signer = issuer.Cert, issuer.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse signed certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return &KeyPair{
		Cert:    cert,
		Key:     key,
		CertPEM: encodeCert(cert),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}
