package image

import (
	"bytes"
	"encoding/pem"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// CACertificates returns the root CAs that the images trust, PEM-encoded:
// Mozilla's NSS trust store as packaged by the Go project in
// golang.org/x/crypto/x509roots/fallback/bundle. The bundle comes from the
// module proxy at the version pinned in go.mod, so the image is the same on
// every build machine (a copy of the build machine's
// /etc/ssl/certs/ca-certificates.crt would not be). Update it with
// `go get golang.org/x/crypto/x509roots/fallback@<newer>`.
//
// Roots that carry a constraint X.509 cannot express (a distrust-after date)
// are left out: a PEM file would trust them without the constraint.
func CACertificates() []byte {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
	}
	return b.Bytes()
}
