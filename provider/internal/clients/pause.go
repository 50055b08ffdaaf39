package clients

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
// goes alone again (and takes, then gives back, a token of its owner's
// budget).
const maxPaused = 4096

// Pauses stops the provider from sending a credential the Widget API has
// refused (widgetapi.IsCredentialRefused). The Widget API throttles failed
// authentication per client address, and every tenant's calls leave from
// the provider's one address: without a pause, one tenant's wrong, expired
// or unmapped token would spend that budget on every reconcile and change
// feed poll until every tenant's calls were answered 429
// (docs/tenancy.md).
//
// After a refusal, no attempt with the same credential (endpoint, token and
// CA bundle, see Credential) is sent for the first pause, then one attempt
// is let through: refused again, the next pause is twice as long, up to the
// maximum; accepted (any answer that is not a refusal of the credential),
// the pause is over. Attempts in flight when a pause starts do not lengthen
// it. A changed credential (a new Secret value, a rotated token file) is
// another credential. The first attempt with a credential goes alone: the
// others wait for its answer. So a credential refused from the start costs
// the address's budget one attempt per pause, however many resources use
// it; one refused after it was accepted (it expired), also those of its
// attempts in flight then.
//
// A tenant can make new credentials at will (more ProviderConfigs, a Secret
// that changes), so the refusals are also bounded per owner: the namespace
// of the ProviderConfig, or the cluster scope. Every attempt with a
// credential not known to be accepted - the first one, the one after each
// pause - takes a token of its owner's budget (burst at once, then one per
// refill; see budget), which comes back unless the credential is refused.
// When the budget is spent, such an attempt waits for the owner's attempts
// in flight to be answered (at most maxTrying), then fails with a
// *BudgetError (a new credential) or its *PausedError (a paused one),
// unsent. A credential known to be accepted is sent whatever its owner's
// budget, and no owner spends another's: docs/tenancy.md says how many
// owners' refusals the Widget API's default budget absorbs.
//
// A nil *Pauses pauses nothing. Pauses is safe for concurrent use.
type Pauses struct {
	first, max time.Duration
	// burst and refill are each owner's budget: burst attempts at once,
	// then one per refill; none when burst is not positive.
	burst  int
	refill time.Duration
	now    func() time.Time
	// jitter returns how much longer than d a pause lasts, so that the
	// pauses of many credentials refused together end apart.
	jitter func(d time.Duration) time.Duration

	mu sync.Mutex
	m  map[string]*pause
	// ok are the credentials the Widget API accepted since their last
	// refusal (at most maxPaused; past it, they are tried again one at a
	// time).
	ok map[string]struct{}
	// owners are the owners' budgets (at most maxOwners).
	owners map[string]*budget
}

// A Credential is what an attempt is sent with, as Pauses sees it.
type Credential struct {
	// Key identifies the endpoint, token and CA bundle (see
	// credentialKey); it reveals nothing about the token.
	Key string
	// Endpoint is the Widget API URL, for errors.
	Endpoint string
	// Owner is who controls the credential and whose budget its refusals
	// spend: the namespace of a namespaced ProviderConfig, empty for the
	// cluster scope (see Connection.Namespace).
	Owner string
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

// A PausesOption configures Pauses.
type PausesOption func(*Pauses)

// WithOwnerBudget sets each owner's budget of attempts with credentials not
// known to be accepted: burst at once, then one per refill (default
// DefaultOwnerBurst, DefaultOwnerRefill). A burst that is not positive, or
// a refill that is not, turns budgets off.
func WithOwnerBudget(burst int, refill time.Duration) PausesOption {
	return func(p *Pauses) {
		p.burst, p.refill = burst, refill
		if refill <= 0 {
			p.burst = 0
		}
	}
}

// NewPauses returns Pauses whose first pause is first, doubling up to max;
// nil (pausing nothing) when first is not positive.
func NewPauses(first, maxPause time.Duration, opts ...PausesOption) *Pauses {
	if first <= 0 {
		return nil
	}
	p := &Pauses{
		first: first, max: max(first, maxPause), now: time.Now,
		burst: DefaultOwnerBurst, refill: DefaultOwnerRefill,
		jitter: func(d time.Duration) time.Duration { return rand.N(d/5 + 1) }, //nolint:gosec // jitter
		m:      map[string]*pause{},
		ok:     map[string]struct{}{},
		owners: map[string]*budget{},
	}
	for _, o := range opts {
		o(p)
	}
	return p
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
// because its credential is paused, or because it is not known to be
// accepted and its owner's budget is spent (see BudgetError).
func IsPaused(err error) bool {
	var pe *PausedError
	return errors.As(err, &pe) || IsBudgetSpent(err)
}

// IsRefused reports whether err says the credential is refused: by the
// Widget API, or by a pause after it did.
func IsRefused(err error) bool { return widgetapi.IsCredentialRefused(err) || IsPaused(err) }

// Paused returns, while c is paused, or not known to be accepted while its
// owner's budget is spent, how long that lasts at least and the error that
// explains it. It does not let an attempt through; Admit does.
func (p *Pauses) Paused(c Credential) (time.Duration, error) {
	if p == nil {
		return 0, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.ok[c.Key]; ok {
		return 0, nil
	}
	now := p.now()
	ps, known := p.m[c.Key]
	if known {
		if d := ps.until.Sub(now); d > 0 {
			return d, p.err(ps)
		}
		if ps.trying != nil {
			return 0, nil
		}
	}
	// The next attempt needs a token of the owner's budget. Read without
	// creating one: a full budget is the same as none.
	b, ok := p.owners[c.Owner]
	if !ok || p.burst <= 0 || b.pending > 0 {
		return 0, nil
	}
	l := p.level(b, now)
	if l >= 1 {
		return 0, nil
	}
	d := time.Duration((1 - l) * float64(p.refill))
	if known {
		// Still refused as far as anyone knows.
		return d, p.err(ps)
	}
	return d, p.spent(c.Owner)
}

// maxTrying bounds how long an attempt waits for the answer to the first
// attempt with its credential, or to its owner's attempts in flight (see
// Admit).
const maxTrying = 10 * time.Second

// Admit returns nil when an attempt with c may be sent, or a *PausedError
// or *BudgetError. An attempt is sent when c is known to be accepted; when
// it is the first with c, or the first since c's pause ended (the others
// are refused until it is answered), and c's owner's budget has a token
// for it; and when c is not paused. An attempt with a credential not known
// to be accepted waits for the answer to the first one, so that the
// resources of a credential that is refused from the start, however many
// try it at once, cost one refusal; one that finds its owner's budget spent
// waits for the owner's attempts in flight, whose answers may give tokens
// back. It waits at most maxTrying, within ctx; after waiting that long
// for a first attempt it is sent with a token of its own.
//
// charged reports that the attempt took a token of its owner's budget:
// pass it to Done with the attempt's result.
func (p *Pauses) Admit(ctx context.Context, c Credential) (charged bool, err error) {
	if p == nil {
		return false, nil
	}
	timeout := time.NewTimer(maxTrying)
	defer timeout.Stop()
	expired := false
	for {
		p.mu.Lock()
		if _, ok := p.ok[c.Key]; ok {
			p.mu.Unlock()
			return false, nil
		}
		now := p.now()
		ps, known := p.m[c.Key]
		var wait <-chan struct{}
		switch {
		case known && ps.trying != nil && !expired:
			wait = ps.trying
		case known && ps.trying == nil && now.Before(ps.until):
			err := p.err(ps)
			p.mu.Unlock()
			return false, err
		default:
			// The first attempt with c, the one attempt of a pause
			// that ended, or one that waited too long for the first.
			b := p.budget(c.Owner, now)
			if p.take(b, now) {
				switch {
				case !known:
					p.room(now)
					p.m[c.Key] = &pause{trying: make(chan struct{})}
				case ps.trying == nil:
					// The others are refused until it is answered,
					// or for another pause when it gets no answer.
					ps.probing = true
					ps.until = now.Add(ps.step)
				}
				p.mu.Unlock()
				return b != nil, nil
			}
			if b.pending > 0 && !expired {
				if b.settled == nil {
					b.settled = make(chan struct{})
				}
				wait = b.settled
				break
			}
			err := p.spent(c.Owner)
			if known && ps.trying == nil {
				// Still refused as far as anyone knows.
				err = p.err(ps)
			}
			p.mu.Unlock()
			return false, err
		}
		p.mu.Unlock()
		select {
		case <-wait:
		case <-timeout.C:
			expired = true
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// Done records the result of an attempt sent with c; charged is what Admit
// returned for it.
func (p *Pauses) Done(c Credential, charged bool, err error) {
	if p == nil {
		return
	}
	refused := widgetapi.IsCredentialRefused(err)
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	switch {
	case charged:
		p.settle(c.Owner, refused, now)
	case refused:
		p.charge(c.Owner, now)
	}
	switch {
	case refused:
		p.refused(c, err, now)
	case accepted(err):
		if ps, ok := p.m[c.Key]; ok {
			ps.tried()
			delete(p.m, c.Key)
		}
		if len(p.ok) >= maxPaused {
			clear(p.ok)
		}
		p.ok[c.Key] = struct{}{}
	default:
		// Nothing learned. A first attempt's waiters try again.
		if ps, ok := p.m[c.Key]; ok && ps.trying != nil {
			ps.tried()
			delete(p.m, c.Key)
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

// refused starts or lengthens c's pause. The caller holds p.mu.
func (p *Pauses) refused(c Credential, err error, now time.Time) {
	delete(p.ok, c.Key)
	ps, ok := p.m[c.Key]
	switch {
	case !ok:
		p.room(now)
		ps = &pause{step: p.first}
		p.m[c.Key] = ps
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
	ps.endpoint = c.Endpoint
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

func (p *Pauses) spent(owner string) error {
	return &BudgetError{Namespace: owner, Burst: p.burst, Refill: p.refill}
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
// passes through the credential's pause and its owner's budget.
type guard struct {
	pauses *Pauses
	cred   Credential
	// charged counts the attempts Admit charged to the owner's budget
	// that are not Done yet. A client's attempts may overlap (a
	// reconcile's and the change feed's), and an answer cannot say which
	// attempt it is for; any charged one will do, since the budget's
	// count of tokens is the same whichever it is.
	charged *atomic.Int64
}

func newGuard(p *Pauses, c Credential) guard {
	return guard{pauses: p, cred: c, charged: new(atomic.Int64)}
}

func (g guard) Admit(ctx context.Context) error {
	charged, err := g.pauses.Admit(ctx, g.cred)
	if charged {
		g.charged.Add(1)
	}
	return err
}

func (g guard) Done(err error) {
	charged := false
	for n := g.charged.Load(); n > 0 && !charged; n = g.charged.Load() {
		charged = g.charged.CompareAndSwap(n, n-1)
	}
	g.pauses.Done(g.cred, charged, err)
}
