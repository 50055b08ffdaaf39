package harness

import (
	"context"
	"path/filepath"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Projected ServiceAccount tokens, as a kubelet gives them.
const (
	// defaultProjectedTokenSeconds is the lifetime of a projected token
	// whose source sets no expirationSeconds (the API's default).
	defaultProjectedTokenSeconds = 60 * 60
	// maxTokenRefreshAge is the longest a kubelet keeps a token before it
	// requests a new one, however long the token lasts.
	maxTokenRefreshAge = 24 * time.Hour
	// tokenRetryInterval is how soon a failed refresh is tried again; the
	// previous token stays in the volume meanwhile.
	tokenRetryInterval = 10 * time.Second
)

// refreshAt returns when a kubelet requests a new token issued at issued
// that expires at expires: after 80% of its lifetime or 24 hours, whichever
// comes first. every, when positive, refreshes sooner: after every (a test's
// rotation period, since kube-apiserver issues no token shorter than ten
// minutes).
func refreshAt(issued, expires time.Time, every time.Duration) time.Time {
	age := min(expires.Sub(issued)*8/10, maxTokenRefreshAge)
	if every > 0 {
		age = min(age, every)
	}
	return issued.Add(age)
}

// A tokenLedger records every projected token the node wrote, so a test can
// look for them where they must not be (FindLeaks).
type tokenLedger struct {
	mu     sync.Mutex
	tokens []string
}

func (l *tokenLedger) add(tok string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tokens = append(l.tokens, tok)
}

func (l *tokenLedger) all() []string {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.tokens...)
}

// projected mounts the pod's projected volume v at dir. The volume is one
// directory of the pod, written the first time a container mounts it (its
// files laid out by writeAtomic) and bind-mounted into every container root
// that mounts it. A volume with a serviceAccountToken source is written
// again, with fresh tokens, before they expire (see refreshAt) for as long
// as the pod runs.
func (p *pod) projected(ctx context.Context, v corev1.Volume, dir string) error {
	src := filepath.Join(p.dir, "volumes", v.Name)
	// Containers of a pod start concurrently: the first writes the volume.
	p.projMu.Lock()
	defer p.projMu.Unlock()
	if !p.projDone[v.Name] {
		next, err := p.writeProjected(ctx, v, src)
		if err != nil {
			return err
		}
		if p.projDone == nil {
			p.projDone = map[string]bool{}
		}
		p.projDone[v.Name] = true
		if !next.IsZero() {
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.refreshProjected(ctx, v, src, next)
			}()
		}
	}
	return p.mounts.bind(src, dir)
}

// refreshProjected writes v's files again at next, and again at the time
// each write returns, until ctx is done.
func (p *pod) refreshProjected(ctx context.Context, v corev1.Volume, dir string, next time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
		n, err := p.writeProjected(ctx, v, dir)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.log.Info("Cannot refresh a projected volume; the previous files stay", "volume", v.Name, "error", err, "retry-in", tokenRetryInterval)
			next = time.Now().Add(tokenRetryInterval)
			continue
		}
		p.log.Info("Refreshed a projected volume's ServiceAccount token", "volume", v.Name, "next", n.Format(time.RFC3339))
		next = n
	}
}

// writeProjected writes the files of v's sources into dir and returns when
// its earliest token needs refreshing (zero without a token).
func (p *pod) writeProjected(ctx context.Context, v corev1.Volume, dir string) (time.Time, error) {
	files := map[string][]byte{}
	var next time.Time
	for _, s := range v.Projected.Sources {
		var got map[string][]byte
		switch {
		case s.ServiceAccountToken != nil:
			tok, refresh, err := p.projectedToken(ctx, s.ServiceAccountToken)
			if err != nil {
				return time.Time{}, errors.Wrapf(err, "volume %s", v.Name)
			}
			got = map[string][]byte{s.ServiceAccountToken.Path: []byte(tok)}
			if next.IsZero() || refresh.Before(next) {
				next = refresh
			}
		case s.Secret != nil:
			var err error
			got, err = p.volumeFiles(ctx, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: s.Secret.Name, Items: s.Secret.Items}}})
			if err != nil {
				return time.Time{}, err
			}
		case s.ConfigMap != nil:
			var err error
			got, err = p.volumeFiles(ctx, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: s.ConfigMap.LocalObjectReference, Items: s.ConfigMap.Items}}})
			if err != nil {
				return time.Time{}, err
			}
		default:
			return time.Time{}, errors.Errorf("CreateContainerConfigError: volume %s: the harness's node projects only serviceAccountToken, Secret and ConfigMap sources", v.Name)
		}
		for k, b := range got {
			files[k] = b
		}
	}
	if err := writeAtomic(dir, files); err != nil {
		return time.Time{}, errors.Wrapf(err, "cannot write projected volume %s", v.Name)
	}
	return next, nil
}

// projectedToken requests a token of the pod's ServiceAccount for the
// source's audience (none: the API server's own) and lifetime, and returns
// it with when it needs refreshing.
func (p *pod) projectedToken(ctx context.Context, s *corev1.ServiceAccountTokenProjection) (string, time.Time, error) {
	secs := ptr.Deref(s.ExpirationSeconds, defaultProjectedTokenSeconds)
	tr := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: ptr.To(secs)}}
	if s.Audience != "" {
		tr.Spec.Audiences = []string{s.Audience}
	}
	sa := p.serviceAccount()
	acct := &corev1.ServiceAccount{}
	acct.SetNamespace(p.env.namespace)
	acct.SetName(sa)
	issued := time.Now()
	if err := p.env.kube.SubResource("token").Create(ctx, acct, tr); err != nil {
		return "", time.Time{}, errors.Wrapf(err, "CreateContainerConfigError: cannot request a token for ServiceAccount %s/%s", p.env.namespace, sa)
	}
	p.env.tokens.add(tr.Status.Token)
	return tr.Status.Token, refreshAt(issued, tr.Status.ExpirationTimestamp.Time, p.env.tokenRefresh), nil
}

// serviceAccount is the name of the pod's ServiceAccount.
func (p *pod) serviceAccount() string {
	if p.spec.ServiceAccountName == "" {
		return "default"
	}
	return p.spec.ServiceAccountName
}
