package clients

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestOwnerBudget: a tenant can make as many credentials as it likes (more
// ProviderConfigs, a Secret that changes), and the Widget API charges the
// refusal of each to the provider's one address. Attempts with credentials
// not known to be accepted spend their owner's budget (3 at once, then one
// a minute), and only refusals keep what they spent.
func TestOwnerBudget(t *testing.T) {
	cases := map[string]struct {
		reason string
		ops    []pauseOp
		want   []string
	}{
		"NewCredentials": {
			reason: "A namespace's first 3 refused credentials are tried; a fourth waits until a minute has given one back.",
			ops: []pauseOp{
				send("a1", errUnauthorized), send("a2", errUnauthorized), send("a3", errUnauthorized),
				send("a4", errUnauthorized), left("a4"),
				after(59 * time.Second), send("a4", errUnauthorized),
				after(time.Second), send("a4", errUnauthorized), send("a5", errUnauthorized),
			},
			want: []string{
				"a1: sent", "a2: sent", "a3: sent",
				`a4: budget of "team-a" spent`, "a4: budget spent for 1m0s more",
				`a4: budget of "team-a" spent`,
				"a4: sent", `a5: budget of "team-a" spent`,
			},
		},
		"OtherOwners": {
			reason: "One namespace's spent budget holds back neither another namespace's new credentials nor the cluster scope's.",
			ops: []pauseOp{
				send("a1", errUnauthorized), send("a2", errUnauthorized), send("a3", errUnauthorized), send("a4", nil),
				send("team-b/b1", nil), send("team-b/b2", errUnauthorized), send("/c1", nil), left("team-b/b3"),
			},
			want: []string{
				"a1: sent", "a2: sent", "a3: sent", `a4: budget of "team-a" spent`,
				"team-b/b1: sent", "team-b/b2: sent", "/c1: sent", "team-b/b3: not paused",
			},
		},
		"ClusterScope": {
			reason: "The cluster scope has a budget of its own, which no namespace spends.",
			ops: []pauseOp{
				send("/c1", errUnauthorized), send("/c2", errUnauthorized), send("/c3", errUnauthorized), send("/c4", nil),
				send("a1", nil),
			},
			want: []string{"/c1: sent", "/c2: sent", "/c3: sent", `/c4: budget of "" spent`, "a1: sent"},
		},
		"AcceptedCredentials": {
			reason: "A credential known to be accepted is sent whatever its namespace's budget.",
			ops: []pauseOp{
				send("good", nil),
				send("a1", errUnauthorized), send("a2", errUnauthorized), send("a3", errUnauthorized), send("a4", nil),
				send("good", nil), send("good", errNotFound), send("good", nil), left("good"),
			},
			want: []string{
				"good: sent",
				"a1: sent", "a2: sent", "a3: sent", `a4: budget of "team-a" spent`,
				"good: sent", "good: sent", "good: sent", "good: not paused",
			},
		},
		"OnlyRefusalsSpend": {
			reason: "An attempt whose credential is accepted, or that learns nothing about it (429, 5xx, transport error), gives its token back.",
			ops: []pauseOp{
				send("a1", nil), send("a2", nil), send("a3", errAddrLimited), send("a4", errUnavailable), send("a5", errTransport),
				send("a6", nil), send("a7", errViewerWrite),
			},
			want: []string{"a1: sent", "a2: sent", "a3: sent", "a4: sent", "a5: sent", "a6: sent", "a7: sent"},
		},
		"PausesSpend": {
			reason: "The one attempt after a pause spends the budget too: 3 refused credentials whose pauses end cost one attempt a minute between them.",
			ops: []pauseOp{
				send("a1", errUnauthorized), send("a2", errUnauthorized), send("a3", errUnauthorized),
				after(10 * time.Second), send("a1", errUnauthorized), send("a2", errUnauthorized),
				after(50 * time.Second), send("a1", errUnauthorized), send("a2", errUnauthorized), left("a2"),
			},
			want: []string{
				"a1: sent", "a2: sent", "a3: sent",
				"a1: paused (401 unauthorized: the bearer token is not valid for 10s)", "a2: paused (401 unauthorized: the bearer token is not valid for 10s)",
				"a1: sent", "a2: paused (401 unauthorized: the bearer token is not valid for 10s)", "a2: paused for 1m0s more",
			},
		},
		"OneRefusedCredential": {
			reason: "A namespace with one refused credential is never held back by its budget: the pauses (10s, 20s, 40s, 1m...) are longer.",
			ops: []pauseOp{
				send("a", errUnauthorized),
				after(10 * time.Second), send("a", errUnauthorized),
				after(20 * time.Second), send("a", errUnauthorized),
				after(40 * time.Second), send("a", errUnauthorized),
				after(time.Minute), send("a", errUnauthorized),
				after(time.Minute), send("a", errUnauthorized),
				after(time.Minute), send("a", nil),
			},
			want: []string{"a: sent", "a: sent", "a: sent", "a: sent", "a: sent", "a: sent", "a: sent"},
		},
		"ExpiredCredential": {
			reason: "Refusals of a credential that was accepted (it expired), sent with no token, are charged as a debt of at most the burst.",
			ops: []pauseOp{
				send("good", nil),
				answered("good", false, errUnauthorized), answered("good", false, errUnauthorized), answered("good", false, errUnauthorized),
				answered("good", false, errUnauthorized), answered("good", false, errUnauthorized), answered("good", false, errUnauthorized),
				answered("good", false, errUnauthorized), answered("good", false, errUnauthorized),
				send("new", nil),
				after(4*time.Minute - time.Second), send("new", nil),
				after(time.Second), send("new", nil),
			},
			want: []string{"good: sent", `new: budget of "team-a" spent`, `new: budget of "team-a" spent`, "new: sent"},
		},
		"Off": {
			reason: "With budgets off, only the pauses hold credentials back.",
			ops:    []pauseOp{send("a1", errUnauthorized), send("a2", errUnauthorized), send("a3", errUnauthorized), send("a4", errUnauthorized)},
			want:   []string{"a1: sent", "a2: sent", "a3: sent", "a4: sent"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var opts []PausesOption
			if name == "Off" {
				opts = append(opts, WithOwnerBudget(0, time.Minute))
			}
			got := runPauseOps(nil, tc.ops, opts...)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestOwnerBudgetWaitsForAnswers: a spent budget whose tokens are out with
// attempts in flight is not spent yet: an attempt waits for their answers,
// and is sent when one gives its token back.
func TestOwnerBudgetWaitsForAnswers(t *testing.T) {
	cases := map[string]struct {
		reason string
		// first is the answer to the attempt in flight.
		first error
		want  string
	}{
		"Accepted": {
			reason: "The attempt in flight is accepted: its token comes back, and the waiting attempt is sent.",
			first:  nil,
			want:   "sent",
		},
		"Refused": {
			reason: "The attempt in flight is refused: the budget is spent, and the waiting attempt is not sent.",
			first:  errUnauthorized,
			want:   `budget of "team-a" spent`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, _ := newTestPauses(func(time.Duration) time.Duration { return 0 }, WithOwnerBudget(1, time.Minute))
			charged, err := p.Admit(context.Background(), cred("a1"))
			if err != nil || !charged {
				t.Fatalf("the first attempt with a new credential: want sent and charged, got %v, %v", charged, err)
			}
			result := make(chan string, 1)
			go func() {
				charged, err := p.Admit(context.Background(), cred("a2"))
				if err != nil {
					var be *BudgetError
					if errors.As(err, &be) {
						result <- fmt.Sprintf("budget of %q spent", be.Namespace)
						return
					}
					result <- err.Error()
					return
				}
				p.Done(cred("a2"), charged, nil)
				result <- "sent"
			}()
			time.Sleep(100 * time.Millisecond)
			if n := len(result); n != 0 {
				t.Fatalf("%s\nthe attempt did not wait for the answer in flight: %s", tc.reason, <-result)
			}
			p.Done(cred("a1"), true, tc.first)
			if diff := cmp.Diff(tc.want, <-result); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestOwnerBudgetBoundsMemory: budgets are remembered for at most maxOwners
// owners; full ones are forgotten first.
func TestOwnerBudgetBoundsMemory(t *testing.T) {
	p, clk := newTestPauses(func(time.Duration) time.Duration { return 0 })
	for i := range 2 * maxOwners {
		c := cred(fmt.Sprintf("ns%d/x", i))
		charged, err := p.Admit(context.Background(), c)
		if err != nil {
			t.Fatalf("a namespace's first credential was not sent: %v", err)
		}
		p.Done(c, charged, errUnauthorized)
		clk.advance(time.Millisecond)
	}
	if n := len(p.owners); n > maxOwners {
		t.Errorf("Pauses remember the budgets of %d owners, want at most %d", n, maxOwners)
	}
}

func TestBudgetError(t *testing.T) {
	cases := map[string]struct {
		reason string
		err    *BudgetError
		want   string
	}{
		"Namespace": {
			reason: "A namespace's budget names the namespace and says what to do.",
			err:    &BudgetError{Namespace: "team-a", Burst: 3, Refill: time.Minute},
			want: "the Widget API refused too many credentials of namespace team-a lately: the provider tries at most 3 credentials the Widget API has not accepted yet at once per namespace, then one every 1m0s, " +
				"because refused attempts get the provider's address throttled for every tenant, and this ProviderConfig's credential waits its turn: " +
				"fix or delete the ProviderConfigs in namespace team-a whose tokens the Widget API refuses (their resources say which)",
		},
		"ClusterScope": {
			reason: "The cluster scope's budget names the cluster-scoped configs.",
			err:    &BudgetError{Burst: 3, Refill: time.Minute},
			want: "the Widget API refused too many credentials of the cluster scope lately: the provider tries at most 3 credentials the Widget API has not accepted yet at once per namespace, then one every 1m0s, " +
				"because refused attempts get the provider's address throttled for every tenant, and this ProviderConfig's credential waits its turn: " +
				"fix or delete the ClusterProviderConfigs and cluster-scoped ProviderConfigs whose tokens the Widget API refuses (their resources say which)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.err.Error()); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
			wrapped := fmt.Errorf("cannot get widget: %w", tc.err)
			if !IsBudgetSpent(wrapped) || !IsPaused(wrapped) || !IsRefused(wrapped) {
				t.Errorf("%s\nIsBudgetSpent, IsPaused and IsRefused must all hold for a wrapped *BudgetError", tc.reason)
			}
		})
	}
}
