package clients

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"

	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	"github.com/widgetco/crossplane-widget/provider/internal/fakes"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
)

// Results of attempts, as the Widget API answers them.
var (
	errUnauthorized = &widgetapi.Error{Op: "get widget", Method: http.MethodGet, StatusCode: http.StatusUnauthorized,
		Problem: widgetapi.Problem{Code: widgetapi.CodeUnauthorized, Detail: "the bearer token is not valid"}}
	errUnmapped = &widgetapi.Error{Op: "list changes", Method: http.MethodGet, StatusCode: http.StatusForbidden,
		Problem: widgetapi.Problem{Code: widgetapi.CodeForbidden, Detail: "the token's subject is not mapped to a project"}}
	errViewerWrite = &widgetapi.Error{Op: "create widget", Method: http.MethodPost, StatusCode: http.StatusForbidden,
		Problem: widgetapi.Problem{Code: widgetapi.CodeForbidden, Detail: "this identity has the viewer role"}}
	errNotFound    = &widgetapi.Error{Op: "get widget", Method: http.MethodGet, StatusCode: http.StatusNotFound, Problem: widgetapi.Problem{Code: widgetapi.CodeNotFound}}
	errAddrLimited = &widgetapi.Error{Op: "get widget", Method: http.MethodGet, StatusCode: http.StatusTooManyRequests, Problem: widgetapi.Problem{Code: widgetapi.CodeRateLimited}}
	errUnavailable = &widgetapi.Error{Op: "get widget", Method: http.MethodGet, StatusCode: http.StatusServiceUnavailable, Problem: widgetapi.Problem{Code: widgetapi.CodeUnavailable}}
	errTransport   = errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
)

// A pauseOp acts on Pauses and says what it saw ("" records nothing).
type pauseOp func(p *Pauses, clk *fakeClock) string

// cred is the credential k: "owner/name" for a namespaced owner, "/name"
// for the cluster scope, and a bare name for one of namespace team-a.
func cred(k string) Credential {
	owner, _, ok := strings.Cut(k, "/")
	if !ok {
		owner = "team-a"
	}
	return Credential{Key: k, Endpoint: "http://widgets.test", Owner: owner}
}

// outcome describes an attempt Admit did not let through.
func outcome(k string, err error) string {
	var pe *PausedError
	var be *BudgetError
	switch {
	case errors.As(err, &pe):
		return fmt.Sprintf("%s: paused (%s for %s)", k, pe.Cause, pe.Pause)
	case errors.As(err, &be):
		return fmt.Sprintf("%s: budget of %q spent", k, be.Namespace)
	default:
		return fmt.Sprintf("%s: unexpected %v", k, err)
	}
}

// send is one attempt with credential k that, when admitted, ends with
// result.
func send(k string, result error) pauseOp {
	return func(p *Pauses, _ *fakeClock) string {
		charged, err := p.Admit(context.Background(), cred(k))
		if err != nil {
			return outcome(k, err)
		}
		p.Done(cred(k), charged, result)
		return k + ": sent"
	}
}

// answered is the answer to an attempt admitted earlier, that took a token
// of its owner's budget or not.
func answered(k string, charged bool, result error) pauseOp {
	return func(p *Pauses, _ *fakeClock) string { p.Done(cred(k), charged, result); return "" }
}

func after(d time.Duration) pauseOp {
	return func(_ *Pauses, clk *fakeClock) string { clk.advance(d); return "" }
}

// left is what Paused says of k: how long its pause, or its owner's spent
// budget, has left.
func left(k string) pauseOp {
	return func(p *Pauses, _ *fakeClock) string {
		d, err := p.Paused(cred(k))
		if err == nil {
			return k + ": not paused"
		}
		if IsBudgetSpent(err) {
			return fmt.Sprintf("%s: budget spent for %s more", k, d)
		}
		return fmt.Sprintf("%s: paused for %s more", k, d)
	}
}

// admit reports whether an attempt with k is admitted.
func admit(p *Pauses, k string) bool {
	_, err := p.Admit(context.Background(), cred(k))
	return err == nil
}

func newTestPauses(jitter func(time.Duration) time.Duration, opts ...PausesOption) (*Pauses, *fakeClock) {
	clk := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	p := NewPauses(10*time.Second, time.Minute, opts...)
	p.now = clk.now
	p.jitter = jitter
	return p, clk
}

// runPauseOps runs ops on fresh Pauses and returns what they saw.
func runPauseOps(jitter func(time.Duration) time.Duration, ops []pauseOp, opts ...PausesOption) []string {
	if jitter == nil {
		jitter = func(time.Duration) time.Duration { return 0 }
	}
	p, clk := newTestPauses(jitter, opts...)
	var got []string
	for _, op := range ops {
		if s := op(p, clk); s != "" {
			got = append(got, s)
		}
	}
	return got
}

func TestPauses(t *testing.T) {
	cases := map[string]struct {
		reason string
		jitter func(time.Duration) time.Duration
		ops    []pauseOp
		want   []string
	}{
		"Accepted": {
			reason: "A credential the Widget API accepts is never paused, whatever else fails.",
			ops:    []pauseOp{send("a", nil), send("a", errNotFound), send("a", errAddrLimited), send("a", errUnavailable), send("a", errTransport), send("a", errViewerWrite), send("a", nil)},
			want:   []string{"a: sent", "a: sent", "a: sent", "a: sent", "a: sent", "a: sent", "a: sent"},
		},
		"RefusedPausesOnlyItsCredential": {
			reason: "After a 401 nothing more is sent with that credential for the first pause; another credential (team-b's, or a.'s new token) is sent at once.",
			ops:    []pauseOp{send("a", errUnauthorized), send("a", nil), left("a"), send("b", nil), send("a2", nil), left("b")},
			want: []string{
				"a: sent",
				"a: paused (401 unauthorized: the bearer token is not valid for 10s)",
				"a: paused for 10s more",
				"b: sent",
				"a2: sent",
				"b: not paused",
			},
		},
		"UnmappedIdentity": {
			reason: "A 403 to a read (an identity token whose subject maps to no project) pauses like a 401.",
			ops:    []pauseOp{send("a", errUnmapped), send("a", nil)},
			want:   []string{"a: sent", "a: paused (403 forbidden: the token's subject is not mapped to a project for 10s)"},
		},
		"ViewerWriteIsNotARefusedCredential": {
			reason: "A viewer's refused write is an authenticated caller's 403: nothing is paused.",
			ops:    []pauseOp{send("a", errViewerWrite), send("a", nil)},
			want:   []string{"a: sent", "a: sent"},
		},
		"Doubling": {
			reason: "When a pause ends one attempt goes; refused again, the next pause is twice as long, up to the maximum (1m here).",
			ops: []pauseOp{
				send("a", errUnauthorized),
				after(10 * time.Second), send("a", errUnauthorized), left("a"),
				after(20 * time.Second), send("a", errUnauthorized), left("a"),
				after(40 * time.Second), send("a", errUnauthorized), left("a"),
				after(time.Minute), send("a", errUnauthorized), left("a"),
			},
			want: []string{
				"a: sent",
				"a: sent", "a: paused for 20s more",
				"a: sent", "a: paused for 40s more",
				"a: sent", "a: paused for 1m0s more",
				"a: sent", "a: paused for 1m0s more",
			},
		},
		"OneAttemptPerPause": {
			reason: "When a pause ends only one attempt is let through; the others are refused locally until it is answered.",
			ops: []pauseOp{
				send("a", errUnauthorized), after(10 * time.Second),
				func(p *Pauses, _ *fakeClock) string {
					return fmt.Sprint("admitted: ", admit(p, "a"), admit(p, "a"), admit(p, "a"))
				},
				answered("a", true, errUnauthorized), left("a"),
			},
			want: []string{"a: sent", "admitted: true false false", "a: paused for 20s more"},
		},
		"UnansweredAttempt": {
			reason: "An attempt after a pause that gets no answer about the credential (transport error, 429) lets another through one pause later, without doubling.",
			ops: []pauseOp{
				send("a", errUnauthorized), after(10 * time.Second),
				send("a", errTransport), send("a", nil),
				after(10 * time.Second), send("a", errAddrLimited), send("a", nil),
				after(10 * time.Second), send("a", errUnauthorized), left("a"),
			},
			want: []string{
				"a: sent",
				"a: sent", "a: paused (401 unauthorized: the bearer token is not valid for 10s)",
				"a: sent", "a: paused (401 unauthorized: the bearer token is not valid for 10s)",
				"a: sent", "a: paused for 20s more",
			},
		},
		"InFlightDoNotExtend": {
			reason: "Refusals of attempts sent before the pause started do not lengthen it.",
			ops:    []pauseOp{send("a", errUnauthorized), after(time.Second), answered("a", false, errUnauthorized), answered("a", false, errUnmapped), left("a")},
			want:   []string{"a: sent", "a: paused for 9s more"},
		},
		"AcceptedAfterPause": {
			reason: "Once the credential is accepted again (the Widget API's mapping was fixed) it is forgotten: the next refusal starts at the first pause.",
			ops: []pauseOp{
				send("a", errUnauthorized), after(10 * time.Second), send("a", errUnauthorized),
				after(20 * time.Second), send("a", nil), send("a", nil),
				send("a", errUnauthorized), left("a"),
			},
			want: []string{"a: sent", "a: sent", "a: sent", "a: sent", "a: sent", "a: paused for 10s more"},
		},
		"Jitter": {
			reason: "A pause lasts its step plus the jitter, so credentials refused together are not retried together.",
			jitter: func(d time.Duration) time.Duration { return d / 5 },
			ops:    []pauseOp{send("a", errUnauthorized), left("a"), after(10 * time.Second), send("a", nil), after(2 * time.Second), send("a", nil)},
			want:   []string{"a: sent", "a: paused for 12s more", "a: paused (401 unauthorized: the bearer token is not valid for 10s)", "a: sent"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := runPauseOps(tc.jitter, tc.ops)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestPausedError(t *testing.T) {
	p, _ := newTestPauses(func(time.Duration) time.Duration { return 0 })
	p.Done(cred("a"), true, &widgetapi.Error{Op: "get widget", Method: http.MethodGet, StatusCode: http.StatusUnauthorized,
		Problem: widgetapi.Problem{Code: widgetapi.CodeUnauthorized, Detail: strings.Repeat("x", 1000)}})
	_, err := p.Paused(cred("a"))
	want := "the Widget API at http://widgets.test refused this ProviderConfig's token (401 unauthorized: " + strings.Repeat("x", maxCause-len("401 unauthorized: ")) + "...); " +
		"the provider sends no request with it for 10s at a time, doubling up to 1m0s, because refused attempts get the provider's address throttled for every tenant: " +
		"put a valid token in the ProviderConfig's credentials (a changed Secret or token file is tried at once)"
	if diff := cmp.Diff(want, err.Error()); diff != "" {
		t.Errorf("Paused(...): -want, +got:\n%s", diff)
	}
	if !IsPaused(fmt.Errorf("cannot get widget: %w", err)) || !IsRefused(err) || !IsRefused(errUnmapped) || IsRefused(errViewerWrite) || IsPaused(errUnauthorized) {
		t.Errorf("IsPaused, IsRefused do not tell a pause and a refusal from other errors")
	}
}

func TestNilPauses(t *testing.T) {
	var p *Pauses
	p.Done(cred("a"), false, errUnauthorized)
	if _, err := p.Admit(context.Background(), cred("a")); err != nil {
		t.Errorf("a nil *Pauses paused a credential: %v", err)
	}
	if NewPauses(0, time.Minute) != nil {
		t.Errorf("NewPauses(0, ...) is not nil: a zero first pause must disable pausing")
	}
}

// TestResolvePausesRefusedToken wires Pauses through a Resolver and Sessions
// to the reference Widget API: after one 401, neither a session nor a call
// on the connection's client (as the change feed makes) reaches the API with
// that token; another token is sent at once.
func TestResolvePausesRefusedToken(t *testing.T) {
	env := apitest.Start(t)
	ref := &xpv2.ProviderConfigReference{Kind: nsv1alpha1.ProviderConfigKind, Name: testPC}
	var sent []string
	pauses := NewPauses(10*time.Second, time.Minute)
	resolver := func(token string) *Resolver {
		return NewResolver(fakes.NewKube(nsPC(env.URL), tokenSecret(testNamespace, token)),
			WithPauses(pauses),
			WithObserver(func(op string, status int, _ time.Duration) { sent = append(sent, fmt.Sprint(op, " ", status)) }))
	}
	bad := &Sessions{Resolver: resolver("wrong-token"), Throttle: NewThrottle(), Feeds: newFollower()}

	s, err := bad.Open(t.Context(), nsMR(ref), &fakes.Delayer{}, "Widget.kind", "web")
	if err != nil {
		t.Fatalf("Open(...) before any refusal: %v", err)
	}
	if _, err := s.GetWidget(t.Context(), "web"); !widgetapi.IsUnauthorized(err) {
		t.Fatalf("GetWidget(...) with a wrong token: want 401, got %v", err)
	}

	d := &fakes.Delayer{}
	bad.Feeds = newFollower()
	if _, err := bad.Open(t.Context(), nsMR(ref), d, "Widget.kind", "web"); !IsPaused(err) {
		t.Errorf("Open(...) after a 401: want a *PausedError, got %v", err)
	}
	if got := d.Delays(); len(got) != 0 {
		t.Errorf("Open(...) after a 401: want the resource retried with the controller's backoff, got delays %v", got)
	}
	if got := bad.Feeds.(*fakes.Follower[*Connection]).Follows(); len(got) != 0 {
		t.Errorf("Open(...) after a 401 followed the change feed: %v", got)
	}
	c, err := bad.Resolver.Resolve(t.Context(), nsMR(ref))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.Changes(t.Context(), widgetapi.ChangesOptions{After: widgetapi.FromLatest}); !IsPaused(err) {
		t.Errorf("Changes(...) on a paused connection's client: want a *PausedError, got %v", err)
	}

	good := &Sessions{Resolver: resolver(apitest.TokenA), Throttle: NewThrottle()}
	s, err = good.Open(t.Context(), nsMR(ref), &fakes.Delayer{}, "Widget.kind", "web")
	if err != nil {
		t.Fatalf("Open(...) with the Secret fixed: %v", err)
	}
	if _, err := s.GetWidget(t.Context(), "web"); !widgetapi.IsNotFound(err) {
		t.Errorf("GetWidget(...) with the Secret fixed: want 404, got %v", err)
	}
	if diff := cmp.Diff([]string{"get widget 401", "get widget 404"}, sent); diff != "" {
		t.Errorf("requests sent: -want, +got:\n%s", diff)
	}
}

// TestPausesFirstAttemptAlone checks that the first attempt with a
// credential goes alone: however many resources try it at once, a
// credential refused from the start costs one refusal.
func TestPausesFirstAttemptAlone(t *testing.T) {
	cases := map[string]struct {
		reason string
		// first is the answer to the first attempt; when the waiters are
		// released one goes, and then is answered with next.
		first, next error
		want        []string
	}{
		"Refused": {
			reason: "When the first attempt is refused, the attempts that waited for it are refused locally.",
			first:  errUnauthorized,
			want:   []string{"paused", "paused", "paused"},
		},
		"Accepted": {
			reason: "When the first attempt is accepted, the attempts that waited for it are sent.",
			first:  nil,
			want:   []string{"sent", "sent", "sent"},
		},
		"NoAnswer": {
			reason: "When the first attempt learns nothing (a transport error), one waiter tries next, alone.",
			first:  errTransport,
			next:   errUnmapped,
			want:   []string{"paused", "paused", "sent"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, _ := newTestPauses(func(time.Duration) time.Duration { return 0 })
			if !admit(p, "a") {
				t.Fatal("the first attempt with a credential was not admitted")
			}
			results := make(chan string, 3)
			for range 3 {
				go func() {
					if _, err := p.Admit(context.Background(), cred("a")); err != nil {
						results <- "paused"
						return
					}
					results <- "sent"
				}()
			}
			time.Sleep(100 * time.Millisecond)
			if n := len(results); n != 0 {
				t.Fatalf("%s\n%d attempts did not wait for the first one's answer", tc.reason, n)
			}
			p.Done(cred("a"), true, tc.first)
			var got []string
			if tc.next != nil {
				got = append(got, <-results)
				time.Sleep(100 * time.Millisecond)
				if n := len(results); n != 0 {
					t.Fatalf("%s\n%d attempts did not wait for the next one's answer", tc.reason, n)
				}
				p.Done(cred("a"), true, tc.next)
			}
			for len(got) < 3 {
				got = append(got, <-results)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
