package harness

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// certAuthority is a CA that can sign server certificates.
type certAuthority struct {
	cert    *x509.Certificate
	certPEM []byte
	key     crypto.Signer
}

// caFromSecret parses the CA in a kubernetes.io/tls style Secret (tls.crt
// and tls.key), such as the crossplane-root-ca Secret `crossplane core init`
// creates.
func caFromSecret(s *corev1.Secret) (*certAuthority, error) {
	cb, _ := pem.Decode(s.Data[corev1.TLSCertKey])
	if cb == nil {
		return nil, errors.Errorf("cannot decode %s in Secret %s/%s", corev1.TLSCertKey, s.Namespace, s.Name)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, errors.Wrap(err, "cannot parse CA certificate")
	}
	kb, _ := pem.Decode(s.Data[corev1.TLSPrivateKeyKey])
	if kb == nil {
		return nil, errors.Errorf("cannot decode %s in Secret %s/%s", corev1.TLSPrivateKeyKey, s.Namespace, s.Name)
	}
	key, err := parsePrivateKey(kb.Bytes)
	if err != nil {
		return nil, err
	}
	return &certAuthority{cert: cert, certPEM: s.Data[corev1.TLSCertKey], key: key}, nil
}

// parsePrivateKey accepts PKCS#1 (what Crossplane writes), PKCS#8 and SEC 1
// keys.
func parsePrivateKey(der []byte) (crypto.Signer, error) {
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, errors.Wrap(err, "cannot parse CA private key")
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.Errorf("cannot use CA private key of type %T", k)
	}
	return s, nil
}

// leafCert is a PEM encoded certificate and key.
type leafCert struct {
	certPEM []byte
	keyPEM  []byte
}

// issue signs a TLS certificate for the supplied usage (server or client
// auth), DNS names and IP addresses. It is valid from an hour ago (clock
// skew) for a year.
func (ca *certAuthority) issue(usage x509.ExtKeyUsage, cn string, dnsNames []string, ips []net.IP) (*leafCert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, errors.Wrap(err, "cannot generate key")
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return nil, errors.Wrap(err, "cannot generate certificate serial number")
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"crossplane-widget test harness"}},
		DNSNames:              dnsNames,
		IPAddresses:           ips,
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().AddDate(1, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:           []x509.ExtKeyUsage{usage},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return nil, errors.Wrap(err, "cannot sign certificate")
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, errors.Wrap(err, "cannot encode key")
	}
	return &leafCert{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
	}, nil
}

// writeTLSDir writes tls.crt, tls.key and ca.crt - the layout both
// Crossplane (--tls-client-certs-dir) and function-sdk-go (--tls-certs-dir)
// read - into dir.
func writeTLSDir(dir string, certPEM, keyPEM, caPEM []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return errors.Wrap(err, "cannot create TLS directory")
	}
	for name, data := range map[string][]byte{
		corev1.TLSCertKey:       certPEM,
		corev1.TLSPrivateKeyKey: keyPEM,
		"ca.crt":                caPEM,
	} {
		if len(data) == 0 {
			return errors.Errorf("cannot write %s: no data", name)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return errors.Wrapf(err, "cannot write %s", name)
		}
	}
	return nil
}
