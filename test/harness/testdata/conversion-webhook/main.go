// Command conversion-webhook is the runtime of the harness test's smoke
// provider: a CRD conversion webhook, and nothing else, served the way
// Crossplane's Deployment runtime expects a provider to serve one - HTTPS on
// :9443 (the container port named "webhook" that Crossplane adds) with the
// certificate and key in $WEBHOOK_TLS_CERT_DIR (tls.crt, tls.key), at the
// path the CRD names (/convert).
//
// It converts Gadgets between smoke.example.org/v1alpha1, whose
// spec.forProvider has "color", and v1beta1, which calls it "colour". It uses
// only the standard library so that it builds in seconds.
package main

import (
	"encoding/json"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// review is an apiextensions.k8s.io/v1 ConversionReview.
type review struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Request    *request  `json:"request,omitempty"`
	Response   *response `json:"response,omitempty"`
}

type request struct {
	UID               string           `json:"uid"`
	DesiredAPIVersion string           `json:"desiredAPIVersion"`
	Objects           []map[string]any `json:"objects"`
}

type response struct {
	UID              string           `json:"uid"`
	ConvertedObjects []map[string]any `json:"convertedObjects"`
	Result           map[string]any   `json:"result"`
}

func main() {
	dir := os.Getenv("WEBHOOK_TLS_CERT_DIR")
	if dir == "" {
		log.Fatal("WEBHOOK_TLS_CERT_DIR is not set: the provider revision has no webhook TLS Secret")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /convert", convert)
	srv := &http.Server{Addr: ":9443", Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Printf("serving conversion webhook on %s with certificates from %s", srv.Addr, dir)
	log.Fatal(srv.ListenAndServeTLS(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")))
}

func convert(w http.ResponseWriter, r *http.Request) {
	in := &review{}
	if err := json.NewDecoder(r.Body).Decode(in); err != nil || in.Request == nil {
		http.Error(w, "cannot decode ConversionReview", http.StatusBadRequest)
		return
	}
	from, to := "colour", "color"
	if strings.HasSuffix(in.Request.DesiredAPIVersion, "/v1beta1") {
		from, to = "color", "colour"
	}
	out := make([]map[string]any, 0, len(in.Request.Objects))
	for _, o := range in.Request.Objects {
		o["apiVersion"] = in.Request.DesiredAPIVersion
		if spec, ok := o["spec"].(map[string]any); ok {
			if fp, ok := spec["forProvider"].(map[string]any); ok {
				if v, ok := fp[from]; ok {
					fp[to] = v
					delete(fp, from)
				}
			}
		}
		out = append(out, o)
	}
	log.Printf("converted %d object(s) to %s", len(out), in.Request.DesiredAPIVersion)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review{
		APIVersion: "apiextensions.k8s.io/v1",
		Kind:       "ConversionReview",
		Response:   &response{UID: in.Request.UID, ConvertedObjects: out, Result: map[string]any{"status": "Success"}},
	})
}
