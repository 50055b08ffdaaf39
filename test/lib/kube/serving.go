package kube

import (
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
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// inClusterNames are the names in-cluster clients may use for the API
// server (the `kubernetes` Service in the default namespace).
var inClusterNames = []string{
	"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
	"kubernetes.default.svc.cluster.local",
}

// serveAt makes kube-apiserver listen on o.Address and advertise it, with a
// serving certificate that in-cluster clients accept. envtest makes its own
// certificate only when CertDir has none, and it covers loopback only, so
// this writes one (and the ServiceAccount signing key envtest would make
// alongside) into o.CertDir, signed by a CA of its own that it hands to
// envtest for the admin client.
func serveAt(s *envtest.APIServer, o Options) error {
	if o.CertDir == "" || o.ServiceCIDR == "" {
		return errors.New("kube-apiserver on an address of its own needs CertDir and ServiceCIDR")
	}
	addr := net.ParseIP(o.Address)
	if addr == nil {
		return fmt.Errorf("kube-apiserver address %q is not an IP address", o.Address)
	}
	svc, err := firstServiceIP(o.ServiceCIDR)
	if err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	caPEM, caKey, crtPEM, keyPEM, err := servingCert(addr, svc)
	if err != nil {
		return err
	}
	// kube-apiserver's client certificate for kubelets (logs, exec,
	// port-forward): in system:masters, so kubelets' authorization
	// webhook allows it. Kubelets trust CertDir/ca.crt for clients.
	kcPEM, kcKeyPEM, err := clientCert(caPEM, caKey, "kube-apiserver-kubelet-client", "system:masters")
	if err != nil {
		return err
	}
	saPEM, saKeyPEM, err := selfSigned("service-accounts", nil)
	if err != nil {
		return err
	}
	for name, b := range map[string][]byte{
		"apiserver.crt": crtPEM, "apiserver.key": keyPEM,
		"sa-signer.crt": saPEM, "sa-signer.key": saKeyPEM,
		"ca.crt":             caPEM,
		"kubelet-client.crt": kcPEM,
		"kubelet-client.key": kcKeyPEM,
	} {
		if err := os.WriteFile(filepath.Join(o.CertDir, name), b, 0o600); err != nil {
			return fmt.Errorf("cannot write kube-apiserver's %s: %w", name, err)
		}
	}
	s.CA = caPEM
	s.ListenAddr = envtest.ListenAddr{Address: o.Address, Port: port}
	s.Configure().Set("advertise-address", o.Address)
	s.Configure().Set("kubelet-client-certificate", filepath.Join(o.CertDir, "kubelet-client.crt"))
	s.Configure().Set("kubelet-client-key", filepath.Join(o.CertDir, "kubelet-client.key"))
	return nil
}

// firstServiceIP is the ClusterIP of the `kubernetes` Service: the first
// address of the Service range.
func firstServiceIP(cidr string) (net.IP, error) {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil || n.IP.To4() == nil {
		return nil, fmt.Errorf("service range %q is not an IPv4 range", cidr)
	}
	ip := make(net.IP, 4)
	copy(ip, n.IP.To4())
	ip[3]++
	return ip, nil
}

// servingCert returns a new CA (and its key) and a serving certificate it
// signed for loopback, addr, svc and inClusterNames, as PEM.
func servingCert(addr, svc net.IP) (caPEM []byte, caKey *ecdsa.PrivateKey, crtPEM, keyPEM []byte, err error) {
	caKey, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("cannot generate a CA key: %w", err)
	}
	ca := template("kube-apiserver CA", 1)
	ca.IsCA, ca.BasicConstraintsValid = true, true
	ca.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("cannot create a CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("cannot generate a serving key: %w", err)
	}
	leaf := template("kube-apiserver", 2)
	leaf.KeyUsage = x509.KeyUsageDigitalSignature
	leaf.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	leaf.DNSNames = inClusterNames
	leaf.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), addr, svc}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("cannot create a serving certificate: %w", err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("cannot encode the serving key: %w", err)
	}
	return certPEM(caDER), caKey, certPEM(der), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
}

// clientCert returns a client certificate for user cn in group org,
// signed by the CA, and its key, as PEM.
func clientCert(caPEM []byte, caKey *ecdsa.PrivateKey, cn, org string) (crtPEM, keyPEM []byte, err error) {
	b, _ := pem.Decode(caPEM)
	if b == nil {
		return nil, nil, errors.New("the CA is not PEM")
	}
	ca, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot parse the CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot generate a client key: %w", err)
	}
	t := template(cn, 3)
	t.Subject.Organization = []string{org}
	t.KeyUsage = x509.KeyUsageDigitalSignature
	t.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	der, err := x509.CreateCertificate(rand.Reader, t, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot create a client certificate: %w", err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot encode the client key: %w", err)
	}
	return certPEM(der), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
}

// selfSigned returns a new self-signed certificate and its key as PEM.
func selfSigned(cn string, ips []net.IP) (crtPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot generate a key: %w", err)
	}
	t := template(cn, 1)
	t.IPAddresses = ips
	der, err := x509.CreateCertificate(rand.Reader, t, t, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot create a certificate: %w", err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("cannot encode a key: %w", err)
	}
	return certPEM(der), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
}

func template(cn string, serial int64) *x509.Certificate {
	return &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(7 * 24 * time.Hour),
	}
}

func certPEM(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
