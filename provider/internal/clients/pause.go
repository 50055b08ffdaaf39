package clients

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

// Bounds of the pause after a refused credential (see Pauses).
const (
	DefaultFirstPause = 10 * time.Second
	DefaultMaxPause   = 5 * time.Minute
)

// maxPaused bounds the credentials Pauses remembers, paused and accepted
// each: past it, paused ones whose pause ended more than the longest pause
// ago are forgotten first, then any; forgetting a paused credential costs
// at most one more refused attempt, an accepted one a first attempt that
// goes alone again.
const maxPaused = 4096

// Pauses stops the provider from sending a credential the Widget API has
// refused (widgetapi.IsCredentialRefused). The Widget API throttles failed
// authentication per client address, and every tenant's calls leave from
// the provider's one address: without a pause, one tenant's wrong, expired
// or unmapped token would spend that budget on every reconcile and change
// feed poll until every tenant's calls were answered 429
// (docs/tenancy.md).
//
// After a refusal, no attempt with the same credential key (endpoint,
// token and CA bundle, see Connection) is sent for the first pause, then
// one attempt is let through: refused again, the next pause is twice as
// long, up to the maximum; accepted (any answer that is not a refusal of
// the credential), the pause is over. Attempts in flight when a pause
// starts do not lengthen it. A changed credential (a new Secret value, a
// rotated token file) has another key and is tried at once. The first
// attempt with a credential goes alone: the others wait for its answer.
// So a credential refused from the start costs the address's budget one
// attempt per pause, however many resources use it; one refused after it
// was accepted (it expired), also those of its attempts in flight then.
//
// A nil *Pauses pauses nothing. Pauses is safe for concurrent use.
type Pauses struct {
	first, max time.Duration
	now        func() time.Time
	// jitter returns how much longer than d a pause lasts, so that the
	// pauses of many credentials refused together end apart.
	jitter func(d time.Duration) time.Duration

	mu sync.Mutex
	m  map[string]*pause
	// ok are the credentials the Widget API accepted since their last
	// refusal (at most maxPaused; past it, they are tried again one at a
	// time).
	ok map[string]struct{}
}

type pause struct {
	// step is the length of the current pause, before jitter.
	step time.Duration
	// until is when the current pause ends.
	until time.Time
	// probing is set when one attempt was let through after the pause
	// ended; until then covers the wait for its answer.
	probing bool
	// trying is set while the first attempt with a credential not known to
	// be accepted is unanswered, and closed when it is answered.
	trying chan struct{}
	// cause is the refusal, as the Widget API put it.
	cause    string
	endpoint string
}

// NewPauses returns Pauses whose first pause is first, doubling up to max;
// nil (pausing nothing) when first is not positive.
func NewPauses(first, maxPause time.Duration) *Pauses {
	if first <= 0 {
		return nil
	}
	return &Pauses{
		first: first, max: max(first, maxPause), now: time.Now,
		jitter: func(d time.Duration) time.Duration { return rand.N(d/5 + 1) }, //nolint:gosec // jitter
		m:      map[string]*pause{},
		ok:     map[string]struct{}{},
	}
}

// A PausedError is the error of a call that was not sent because its
// credential is paused. It names the endpoint and repeats the Widget API's
// refusal, never the credential.
type PausedError struct {
	Endpoint string
	// Cause is the Widget API's refusal that started the pauses.
	Cause string
	// Pause is the length of the current pause, before jitter; MaxPause
	// the longest one.
	Pause, MaxPause time.Duration
}

// Error says what is wrong and what to do. It holds no remaining time, so
// a condition that carries it does not change on every reconcile.
func (e *PausedError) Error() string {
	return "the Widget API at " + e.Endpoint + " refused this ProviderConfig's token (" + e.Cause + "); the provider sends no request with it for " +
		e.Pause.String() + " at a time, doubling up to " + e.MaxPause.String() + ", because refused attempts get the provider's address throttled for every tenant: " +
		"put a valid token in the ProviderConfig's credentials (a changed Secret or token file is tried at once)"
}

// IsPaused reports whether err is the error of a call that was not sent
// because its credential is paused.
func IsPaused(err error) bool {
	var pe *PausedError
	return errors.As(err, &pe)
}

// IsRefused reports whether err says the credential is refused: by the
// Widget API, or by a pause after it did.
func IsRefused(err error) bool { return widgetapi.IsCredentialRefused(err) || IsPaused(err) }

// Paused returns, while key is paused, how long the pause has left and the
// error that explains it. It does not let an attempt through; Admit does.
func (p *Pauses) Paused(key string) (time.Duration, error) {
	if p == nil {
		return 0, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ps, ok := p.m[key]
	if !ok {
		return 0, nil
	}
	if d := ps.until.Sub(p.now()); d > 0 {
		return d, p.err(ps)
	}
	return 0, nil
}

// maxTrying bounds how long an attempt waits for the answer to the first
// attempt with its credential (see Admit) before it is sent anyway.
const maxTrying = 10 * time.Second

// Admit returns nil when an attempt with key may be sent, or a
// *PausedError. An attempt is sent when key is known to be accepted; when
// it is the first with key, or the first since key's pause ended (the
// others are refused until it is answered); and when key is not paused. An
// attempt with a key not known to be accepted waits for the answer to the
// first one (at most maxTrying, within ctx), so that the resources of a
// credential that is refused from the start, however many try it at once,
// cost one refusal.
func (p *Pauses) Admit(ctx context.Context, key string) error {
	if p == nil {
		return nil
	}
	for {
		p.mu.Lock()
		if _, ok := p.ok[key]; ok {
			p.mu.Unlock()
			return nil
		}
		now := p.now()
		ps, ok := p.m[key]
		if !ok {
			p.room(now)
			p.m[key] = &pause{trying: make(chan struct{})}
			p.mu.Unlock()
			return nil
		}
		if ps.trying != nil {
			tried := ps.trying
			p.mu.Unlock()
			t := time.NewTimer(maxTrying)
			select {
			case <-tried:
				t.Stop()
				continue
			case <-t.C:
				return nil
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
		var err error
		if now.Before(ps.until) {
			err = p.err(ps)
		} else {
			// The one attempt of this pause; the others are refused until
			// it is answered, or for another pause when it gets no answer.
			ps.probing = true
			ps.until = now.Add(ps.step)
		}
		p.mu.Unlock()
		return err
	}
}

// Done records the result of an attempt sent with key to endpoint.
func (p *Pauses) Done(key, endpoint string, err error) {
	if p == nil {
		return
	}
	switch {
	case widgetapi.IsCredentialRefused(err):
		p.refused(key, endpoint, err)
	case accepted(err):
		p.mu.Lock()
		defer p.mu.Unlock()
		if ps, ok := p.m[key]; ok {
			ps.tried()
			delete(p.m, key)
		}
		if len(p.ok) >= maxPaused {
			clear(p.ok)
		}
		p.ok[key] = struct{}{}
	default:
		// Nothing learned. A first attempt's waiters try again.
		p.mu.Lock()
		defer p.mu.Unlock()
		if ps, ok := p.m[key]; ok && ps.trying != nil {
			ps.tried()
			delete(p.m, key)
		}
	}
}

// tried releases the attempts waiting for the first one's answer.
func (ps *pause) tried() {
	if ps.trying != nil {
		close(ps.trying)
		ps.trying = nil
	}
}

// accepted reports whether err, an attempt's result, shows that the server
// accepted the credential: a success, or an error status that the server
// gives only to an authenticated caller. A 429 (the address may be
// throttled before the token is looked at), a 5xx and a transport error say
// nothing about the credential.
func accepted(err error) bool {
	if err == nil {
		return true
	}
	var e *widgetapi.Error
	if !errors.As(err, &e) {
		return false
	}
	return e.StatusCode < 500 && e.StatusCode != 429 && e.StatusCode != 401
}

// refused starts or lengthens key's pause.
func (p *Pauses) refused(key, endpoint string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	delete(p.ok, key)
	ps, ok := p.m[key]
	switch {
	case !ok:
		p.room(now)
		ps = &pause{step: p.first}
		p.m[key] = ps
	case ps.trying != nil:
		// The first attempt with the credential.
		ps.tried()
		ps.step = p.first
	case ps.probing || !now.Before(ps.until):
		ps.step = min(2*ps.step, p.max)
	default:
		// Sent before the pause started: the pause stands as it is.
		return
	}
	ps.probing = false
	ps.until = now.Add(ps.step + p.jitter(ps.step))
	ps.endpoint = endpoint
	ps.cause = cause(err)
}

// room makes room for one more key. The caller holds p.mu.
func (p *Pauses) room(now time.Time) {
	if len(p.m) < maxPaused {
		return
	}
	for k, ps := range p.m {
		if ps.trying == nil && now.Sub(ps.until) > p.max {
			delete(p.m, k)
		}
	}
	for k, ps := range p.m {
		if len(p.m) < maxPaused {
			return
		}
		ps.tried()
		delete(p.m, k)
	}
}

func (p *Pauses) err(ps *pause) error {
	return &PausedError{Endpoint: ps.endpoint, Cause: ps.cause, Pause: ps.step, MaxPause: p.max}
}

// maxCause bounds the Widget API's words a pause repeats: a server (possibly
// one a tenant runs) could send more than a condition should hold.
const maxCause = 256

// cause is the refusal without the operation that got it (the pause
// concerns every operation): status, code and the server's detail.
func cause(err error) string {
	var e *widgetapi.Error
	if !errors.As(err, &e) {
		return "refused"
	}
	c := strconv.Itoa(e.StatusCode) + " " + e.Problem.Code
	if e.Problem.Detail != "" {
		c += ": " + e.Problem.Detail
	}
	if len(c) > maxCause {
		c = strings.ToValidUTF8(c[:maxCause], "") + "..."
	}
	return c
}

// guard is a connection's widgetapi.Guard: every attempt of its client
// passes through the credential's pause.
type guard struct {
	pauses        *Pauses
	key, endpoint string
}

func (g guard) Admit(ctx context.Context) error { return g.pauses.Admit(ctx, g.key) }
func (g guard) Done(err error)                  { g.pauses.Done(g.key, g.endpoint, err) }
