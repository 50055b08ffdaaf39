package clients

import (
	"strconv"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// Bounds of the refused credentials one owner may try (see Pauses). The
// Widget API answers every request from an address 429, whatever its
// token, once that address has had 20 refusals in a row, then more than 1
// a second (its --failed-auth-burst and --failed-auth-rate defaults): an
// owner gets 3 at once and one a minute, so 6 owners spending their
// bursts at the same moment stay under the 20, and 59 owners, each at its
// steady rate, under the 1 a second. See docs/tenancy.md.
const (
	DefaultOwnerBurst  = 3
	DefaultOwnerRefill = time.Minute
)

// maxOwners bounds the owners whose budgets Pauses remembers. A budget that
// is full and has no attempt in flight is the same as none, and is
// forgotten first; past that, any without an attempt in flight, which gives
// its owner a full budget again.
const maxOwners = 4096

// A budget is a token bucket of the attempts an owner may make with
// credentials not known to be accepted: the first with a credential, the
// one after each of its pauses. An attempt takes a token before it is sent;
// the token comes back when the Widget API accepts the credential (or says
// nothing about it: a transport error, a 5xx, a 429), so only refusals
// spend the budget. A refusal of a credential that was known to be accepted
// (it expired; its attempts took no token) is charged afterwards, as a
// debt of at most burst.
type budget struct {
	// tokens is the budget at at, before refill; it may be negative (a
	// debt).
	tokens float64
	at     time.Time
	// pending are the attempts that took a token and are unanswered.
	pending int
	// settled is closed when one of them is answered (nil: nobody waits).
	settled chan struct{}
}

// level is b's tokens at now.
func (p *Pauses) level(b *budget, now time.Time) float64 {
	return min(float64(p.burst), b.tokens+float64(now.Sub(b.at))/float64(p.refill))
}

// budget returns owner's budget, or nil when budgets are off. The caller
// holds p.mu.
func (p *Pauses) budget(owner string, now time.Time) *budget {
	if p.burst <= 0 {
		return nil
	}
	if b, ok := p.owners[owner]; ok {
		return b
	}
	p.roomForOwner(now)
	b := &budget{tokens: float64(p.burst), at: now}
	p.owners[owner] = b
	return b
}

// take takes a token of b for an attempt, and reports whether there was
// one. A nil budget always has one. The caller holds p.mu.
func (p *Pauses) take(b *budget, now time.Time) bool {
	if b == nil {
		return true
	}
	l := p.level(b, now)
	if l < 1 {
		return false
	}
	b.tokens, b.at = l-1, now
	b.pending++
	return true
}

// settle records the answer to an attempt that took a token of owner's
// budget: the token comes back unless the credential was refused. The
// caller holds p.mu.
func (p *Pauses) settle(owner string, refused bool, now time.Time) {
	b, ok := p.owners[owner]
	if !ok || b.pending == 0 {
		return
	}
	b.pending--
	if !refused {
		b.tokens, b.at = min(float64(p.burst), p.level(b, now)+1), now
	}
	if b.settled != nil {
		close(b.settled)
		b.settled = nil
	}
}

// charge charges owner's budget a refusal of an attempt that took no token.
// The caller holds p.mu.
func (p *Pauses) charge(owner string, now time.Time) {
	if b := p.budget(owner, now); b != nil {
		b.tokens, b.at = max(p.level(b, now)-1, -float64(p.burst)), now
	}
}

// roomForOwner makes room for one more owner's budget. The caller holds
// p.mu.
func (p *Pauses) roomForOwner(now time.Time) {
	if len(p.owners) < maxOwners {
		return
	}
	for o, b := range p.owners {
		if b.pending == 0 && p.level(b, now) >= float64(p.burst) {
			delete(p.owners, o)
		}
	}
	for o, b := range p.owners {
		if len(p.owners) < maxOwners {
			return
		}
		if b.pending == 0 {
			delete(p.owners, o)
		}
	}
}

// A BudgetError is the error of a call that was not sent because its
// credential is not known to be accepted and its owner - the namespace of
// its ProviderConfig, or the cluster scope - has had too many credentials
// refused lately (see Pauses). It names neither credential nor endpoint:
// the budget is the owner's.
type BudgetError struct {
	// Namespace is the owner; empty for the cluster scope.
	Namespace string
	// Burst and Refill are the owner's budget: Burst at once, then one
	// every Refill.
	Burst  int
	Refill time.Duration
}

// Error says what is wrong and what to do. It holds no remaining time, so
// a condition that carries it does not change on every reconcile.
func (e *BudgetError) Error() string {
	who, what := "namespace "+e.Namespace, "the ProviderConfigs in namespace "+e.Namespace
	if e.Namespace == "" {
		who, what = "the cluster scope", "the ClusterProviderConfigs and cluster-scoped ProviderConfigs"
	}
	return "the Widget API refused too many credentials of " + who + " lately: the provider tries at most " + strconv.Itoa(e.Burst) +
		" credentials the Widget API has not accepted yet at once per namespace, then one every " + e.Refill.String() +
		", because refused attempts get the provider's address throttled for every tenant, and this ProviderConfig's credential waits its turn: " +
		"fix or delete " + what + " whose tokens the Widget API refuses (their resources say which)"
}

// IsBudgetSpent reports whether err is the error of a call that was not
// sent because its owner's budget of refused credentials is spent.
func IsBudgetSpent(err error) bool {
	var be *BudgetError
	return errors.As(err, &be)
}
