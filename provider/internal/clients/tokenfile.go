package clients

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// DefaultTokenFileDir is the only directory the provider reads token files
// from unless --token-file-dir says otherwise. Mount a projected
// ServiceAccount token for the Widget API's audience below it.
const DefaultTokenFileDir = "/var/run/secrets/widgetco.io" //nolint:gosec // a directory, not a credential

// maxTokenFiles bounds the token files remembered at once: only platform
// teams name token files (in cluster-scoped ProviderConfigs), so a few
// suffice; past it the cache starts over.
const maxTokenFiles = 64

// tokenFiles reads Widget API tokens from files, such as projected
// ServiceAccount tokens the kubelet rotates. A token is used at most
// TokenTTL after it was read, and never past the expiry its JWT claims: a
// rotated token is picked up within TokenTTL, an expiring one as soon as it
// expires. Only files inside dir are read, after resolving symbolic links,
// so a ProviderConfig cannot make the provider send, say, its own
// Kubernetes ServiceAccount token to a Widget API.
type tokenFiles struct {
	dir string
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	m  map[string]fileToken
}

type fileToken struct {
	token string
	until time.Time
}

func newTokenFiles(dir string) *tokenFiles {
	return &tokenFiles{dir: filepath.Clean(dir), ttl: TokenTTL, now: time.Now, m: map[string]fileToken{}}
}

// get returns the token in the file at path. Errors name the path, never
// the file's content.
func (f *tokenFiles) get(path string) (string, error) {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path || !within(f.dir, path) {
		return "", errors.Errorf("token file %q is not a clean absolute path inside %s, the provider's token file directory (--token-file-dir)", path, f.dir)
	}
	now := f.now()
	f.mu.Lock()
	ft, ok := f.m[path]
	f.mu.Unlock()
	if ok && now.Before(ft.until) {
		return ft.token, nil
	}
	tok, exp, err := f.read(path)
	if err != nil {
		f.forget(path)
		return "", err
	}
	until := now.Add(f.ttl)
	if !exp.IsZero() {
		if !now.Before(exp) {
			f.forget(path)
			return "", errors.Errorf("token file %s holds a token that expired at %s: the kubelet rotates projected ServiceAccount tokens before they expire; check the provider's volume", path, exp.UTC().Format(time.RFC3339))
		}
		until = earliest(until, exp)
	}
	f.mu.Lock()
	if len(f.m) >= maxTokenFiles {
		clear(f.m)
	}
	f.m[path] = fileToken{token: tok, until: until}
	f.mu.Unlock()
	return tok, nil
}

func (f *tokenFiles) read(path string) (string, time.Time, error) {
	dir, err := filepath.EvalSymlinks(f.dir)
	if err != nil {
		return "", time.Time{}, errors.Wrapf(err, "cannot resolve the token file directory %s", f.dir)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", time.Time{}, errors.Errorf("cannot find token file %s: mount the token (a projected ServiceAccount token) there", path)
	}
	if !within(dir, real) {
		return "", time.Time{}, errors.Errorf("token file %s links outside %s, the provider's token file directory", path, f.dir)
	}
	fh, err := os.Open(real)
	if err != nil {
		return "", time.Time{}, errors.Wrapf(err, "cannot open token file %s", path)
	}
	defer fh.Close() //nolint:errcheck // read-only
	raw, err := io.ReadAll(io.LimitReader(fh, MaxTokenBytes+1))
	if err != nil {
		return "", time.Time{}, errors.Wrapf(err, "cannot read token file %s", path)
	}
	if len(raw) > MaxTokenBytes {
		return "", time.Time{}, errors.Errorf("token file %s holds more than %d bytes: a Widget API token is at most %d bytes", path, MaxTokenBytes, MaxTokenBytes)
	}
	tok := strings.TrimSpace(string(raw))
	if tok == "" {
		return "", time.Time{}, errors.Errorf("token file %s is empty", path)
	}
	return tok, jwtExpiry(tok), nil
}

func (f *tokenFiles) forget(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, path)
}

// jwtExpiry returns the exp claim of a JWT, read without verifying it (the
// Widget API verifies), or the zero time when tok is not a JWT with one. It
// only decides when to read the file again.
func jwtExpiry(tok string) time.Time {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return time.Time{}
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}
	}
	var c struct {
		Exp *float64 `json:"exp"`
	}
	if json.Unmarshal(payload, &c) != nil || c.Exp == nil || *c.Exp <= 0 || *c.Exp > 1<<40 {
		return time.Time{}
	}
	return time.Unix(int64(*c.Exp), 0)
}

// within reports whether path is dir or below it.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../") && !filepath.IsAbs(rel)
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
