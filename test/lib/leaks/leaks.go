// Package leaks finds secrets where they must not be: canaries (a token, a
// key, a pattern) in logs and in every object of a cluster but Secrets,
// verbatim or encoded.
package leaks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// A Canary is a secret that must never appear outside the Secrets it belongs
// in: a token, an access key. Set Value to look for one secret, or Pattern to
// look for anything shaped like one (secrets whose values the caller never
// saw). Reports never print a canary, only its Kind and a hash prefix.
type Canary struct {
	// Kind says what the canary is, e.g. "Widget API token".
	Kind string
	// Value is the secret itself.
	Value string
	// Pattern matches secrets of the kind.
	Pattern *regexp.Regexp
}

// Fingerprint names a secret in reports without revealing it: the first 12
// hex digits of its SHA-256.
func Fingerprint(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return "sha256:" + hex.EncodeToString(sum[:])[:12]
}

// A Leak is one place where a canary appeared.
type Leak struct {
	// Canary is the canary's kind and fingerprint.
	Canary string
	// Where is the place: "log <file>:<line>" or
	// "<Kind>.<group> <namespace>/<name> <field path>".
	Where string
	// Form is how the canary appeared: "verbatim" or "base64".
	Form string
}

func (l Leak) String() string { return l.Canary + " in " + l.Where + " (" + l.Form + ")" }

// needle is one form of a Value canary to look for.
type needle struct {
	canary string
	form   string
	text   []byte
}

// A Scanner finds canaries in text and in objects: verbatim, and
// base64-encoded as a whole (as JSON encodes a []byte and as Secrets and
// connection details hold values), with or without padding, in the standard
// and the URL alphabet. It does not find a canary that was split, escaped or
// encoded in some other way, nor one base64-encoded as part of a longer
// value; canaries made of letters, digits, '-' and '_' are never escaped.
type Scanner struct {
	needles  []needle
	patterns []Canary
}

// NewScanner returns a scanner for the canaries. Canaries with neither a
// Value nor a Pattern are ignored.
func NewScanner(canaries ...Canary) *Scanner {
	s := &Scanner{}
	seen := map[string]bool{}
	for _, c := range canaries {
		if c.Pattern != nil {
			s.patterns = append(s.patterns, c)
		}
		if c.Value == "" || seen[c.Value] {
			continue
		}
		seen[c.Value] = true
		name := c.Kind + " " + Fingerprint(c.Value)
		s.needles = append(s.needles, needle{canary: name, form: "verbatim", text: []byte(c.Value)})
		forms := map[string]bool{}
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			if f := enc.EncodeToString([]byte(c.Value)); !forms[f] {
				forms[f] = true
				s.needles = append(s.needles, needle{canary: name, form: "base64", text: []byte(f)})
			}
		}
	}
	return s
}

// Text returns the leaks in a text, such as a log file, one for each canary
// and line it appears on: where is the text's name, followed by
// ":<line number>".
func (s *Scanner) Text(where string, text []byte) []Leak {
	var out []Leak
	for _, n := range s.needles {
		for off := 0; ; {
			i := bytes.Index(text[off:], n.text)
			if i < 0 {
				break
			}
			at := off + i
			line := bytes.Count(text[:at], []byte("\n")) + 1
			out = append(out, Leak{Canary: n.canary, Where: where + ":" + strconv.Itoa(line), Form: n.form})
			// Look on from the next line: one leak per line is enough.
			end := bytes.IndexByte(text[at:], '\n')
			if end < 0 {
				break
			}
			off = at + end + 1
		}
	}
	for _, p := range s.patterns {
		for _, loc := range p.Pattern.FindAllIndex(text, -1) {
			line := bytes.Count(text[:loc[0]], []byte("\n")) + 1
			out = append(out, Leak{Canary: p.Kind + " " + Fingerprint(string(text[loc[0]:loc[1]])), Where: where + ":" + strconv.Itoa(line), Form: "verbatim"})
		}
	}
	return dedupe(out)
}

// Object returns the leaks in an object decoded from JSON (an
// unstructured.Unstructured's content), one for each canary and string field
// it appears in: where is the object's name, followed by the field's path,
// e.g. "status.conditions[0].message". Map keys are searched as well as
// values.
func (s *Scanner) Object(where string, obj map[string]any) []Leak {
	// Most objects hold no canary: rule them out in one pass.
	b, err := json.Marshal(obj)
	if err == nil && !s.mayHold(b) {
		return nil
	}
	var out []Leak
	s.walk(where+" ", "", obj, &out)
	return dedupe(out)
}

// mayHold reports whether b, an object's JSON, holds a canary. A string
// holding one holds it in JSON too, unless the canary has characters JSON
// escapes - which the characters the scanner is made for are not.
func (s *Scanner) mayHold(b []byte) bool {
	for _, n := range s.needles {
		if bytes.Contains(b, n.text) {
			return true
		}
	}
	for _, p := range s.patterns {
		if p.Pattern.Match(b) {
			return true
		}
	}
	return false
}

// holds reports whether v holds a canary.
func (s *Scanner) holds(v string) bool {
	var none []Leak
	s.str("", "", v, &none)
	return len(none) > 0
}

func (s *Scanner) walk(prefix, path string, v any, out *[]Leak) {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if s.holds(k) {
				// Never print a canary, not even as part of a path.
				p := path + "[<" + Fingerprint(k) + ">]"
				s.str(prefix, p+" (the key itself)", k, out)
				s.walk(prefix, p, t[k], out)
				continue
			}
			s.walk(prefix, fieldPath(path, k), t[k], out)
		}
	case []any:
		for i, e := range t {
			s.walk(prefix, path+"["+strconv.Itoa(i)+"]", e, out)
		}
	case string:
		s.str(prefix, path, t, out)
	}
}

func (s *Scanner) str(prefix, path, v string, out *[]Leak) {
	for _, n := range s.needles {
		if strings.Contains(v, string(n.text)) {
			*out = append(*out, Leak{Canary: n.canary, Where: prefix + path, Form: n.form})
		}
	}
	for _, p := range s.patterns {
		for _, m := range p.Pattern.FindAllString(v, -1) {
			*out = append(*out, Leak{Canary: p.Kind + " " + Fingerprint(m), Where: prefix + path, Form: "verbatim"})
		}
	}
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// fieldPath appends a map key to a path: .key, or ["key"] when the key is
// not an identifier (labels, annotations).
func fieldPath(path, key string) string {
	if identifier.MatchString(key) {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

// dedupe drops repeated leaks (the same canary in the same place in another
// form), keeping the first.
func dedupe(in []Leak) []Leak {
	if len(in) == 0 {
		return nil
	}
	seen := map[string]bool{}
	out := make([]Leak, 0, len(in))
	for _, l := range in {
		k := l.Canary + "\x00" + l.Where
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, l)
	}
	return out
}

// Result says what Scan looked through.
type Result struct {
	Logs    int
	Objects int
	// Leaks are the canaries it found, logs first, then objects by type.
	Leaks []Leak
}

// Scan looks for s's canaries in every file under each of logDirs and in
// every object but Secrets of the cluster that admin (an admin's
// configuration) reaches.
func Scan(ctx context.Context, admin *rest.Config, logDirs []string, s *Scanner) (Result, error) {
	var r Result
	var errs []error
	for _, logs := range logDirs {
		werr := filepath.WalkDir(logs, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				errs = append(errs, errors.Wrapf(err, "cannot read log %s", p))
				return nil
			}
			rel, _ := filepath.Rel(logs, p)
			r.Logs++
			r.Leaks = append(r.Leaks, s.Text("log "+filepath.Join(filepath.Base(logs), rel), b)...)
			return nil
		})
		if werr != nil {
			errs = append(errs, errors.Wrapf(werr, "cannot read logs under %s", logs))
		}
	}

	// Listing every type lists deprecated ones too; their warnings say
	// nothing about leaks.
	cfg := rest.CopyConfig(admin)
	cfg.WarningHandler = rest.NoWarnings{}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return r, errors.Wrap(err, "cannot create discovery client")
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return r, errors.Wrap(err, "cannot create dynamic client")
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil {
		// Partial discovery still lists what it can.
		errs = append(errs, errors.Wrap(err, "cannot discover every API group"))
	}
	for _, gvr := range listable(lists) {
		l, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			errs = append(errs, errors.Wrapf(err, "cannot list %s", gvr))
			continue
		}
		for i := range l.Items {
			u := &l.Items[i]
			r.Objects++
			name := u.GetName()
			if ns := u.GetNamespace(); ns != "" {
				name = ns + "/" + name
			}
			kind := u.GetKind()
			if gvr.Group != "" {
				kind += "." + gvr.Group
			}
			r.Leaks = append(r.Leaks, s.Object(kind+" "+name, u.Object)...)
		}
	}
	return r, errors.Join(errs...)
}

// listable returns every resource type that can be listed, except Secrets
// and events.k8s.io Events, sorted.
func listable(lists []*metav1.APIResourceList) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			if (gv.Group == "" && r.Name == "secrets") || (gv.Group == "events.k8s.io" && r.Name == "events") {
				continue
			}
			out = append(out, gv.WithResource(r.Name))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}
