package clients

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	"github.com/widgetco/crossplane-widget/provider/internal/fakes"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// newFollower returns a Follower that records each call's connection key.
func newFollower() *fakes.Follower[*Connection] {
	return &fakes.Follower[*Connection]{KeyOf: func(c *Connection) string { return c.Key }}
}

func TestSessionsOpen(t *testing.T) {
	env := apitest.Start(t)
	ref := &xpv2.ProviderConfigReference{Kind: nsv1alpha1.ProviderConfigKind, Name: testPC}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: testNamespace, Name: "web"}}
	resolver := NewResolver(fakes.NewKube(nsPC(env.URL), tokenSecret(testNamespace, apitest.TokenA)))
	conn, err := resolver.Resolve(t.Context(), nsMR(ref))
	if err != nil {
		t.Fatalf("Resolve(...): %v", err)
	}

	type want struct {
		err     error
		follows []fakes.Follow
		// delay is the smallest delay asked for, if any; the largest is
		// 1.5 times that (jitter).
		delay time.Duration
	}
	cases := map[string]struct {
		reason   string
		resolver *Resolver
		noFeeds  bool
		throttle func(*Throttle)
		cancel   bool
		want     want
	}{
		"Connected": {
			reason:   "An unthrottled connection is returned at once, and the resource follows its widget's changes.",
			resolver: resolver,
			want:     want{follows: []fakes.Follow{{Key: conn.Key, Kind: "Widget.kind", Widget: "web-widget", MR: req.NamespacedName}}},
		},
		"NoFeeds": {
			reason:   "Without a change feed a session still opens.",
			resolver: resolver,
			noFeeds:  true,
		},
		"ResolveFails": {
			reason:   "A ProviderConfig problem is returned as is, before anything is followed or delayed.",
			resolver: NewResolver(fakes.NewKube()),
			want:     want{err: cmpopts.AnyError},
		},
		"ShortRetryAfter": {
			reason:   "A Retry-After shorter than the longest wait is waited out in Open, without a requeue.",
			resolver: resolver,
			throttle: func(th *Throttle) { th.Throttled(conn.Key, 100*time.Millisecond) },
			want:     want{follows: []fakes.Follow{{Key: conn.Key, Kind: "Widget.kind", Widget: "web-widget", MR: req.NamespacedName}}},
		},
		"LongRetryAfter": {
			reason:   "A long Retry-After requeues the resource after it instead of holding a worker, and calls nothing.",
			resolver: resolver,
			throttle: func(th *Throttle) { th.Throttled(conn.Key, time.Minute) },
			want:     want{err: cmpopts.AnyError, delay: time.Minute},
		},
		"CancelledWhileWaiting": {
			reason:   "A reconcile cancelled while waiting for the rate limit returns the context's error.",
			resolver: resolver,
			throttle: func(th *Throttle) { th.Throttled(conn.Key, time.Second) },
			cancel:   true,
			want:     want{err: context.Canceled},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			th := NewThrottle()
			if tc.throttle != nil {
				tc.throttle(th)
			}
			feeds := newFollower()
			g := &Sessions{Resolver: tc.resolver, Throttle: th, Feeds: feeds}
			if tc.noFeeds {
				g.Feeds = nil
			}
			ctx, cancel := context.WithCancel(t.Context())
			if tc.cancel {
				cancel()
			}
			defer cancel()
			d := &fakes.Delayer{}
			s, err := g.Open(ctx, nsMR(ref), d, "Widget.kind", "web-widget")
			if diff := cmp.Diff(tc.want.err, err, cmpopts.EquateErrors()); diff != "" {
				t.Fatalf("%s\nOpen(...): -want error, +got error:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.follows, feeds.Follows(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nFollow calls: -want, +got:\n%s", tc.reason, diff)
			}
			after := d.Delays()
			switch {
			case tc.want.delay == 0 && len(after) > 0:
				t.Errorf("%s\nAfter calls: want none, got %v", tc.reason, after)
			case tc.want.delay > 0:
				if len(after) != 1 || after[0].Req != req || after[0].D < tc.want.delay || after[0].D > tc.want.delay*3/2+time.Millisecond {
					t.Errorf("%s\nAfter calls: want one for %v of %s to %s, got %v", tc.reason, req, tc.want.delay, tc.want.delay*3/2, after)
				}
				if !strings.Contains(err.Error(), env.URL) {
					t.Errorf("%s\nOpen(...): error %q does not name the endpoint", tc.reason, err)
				}
			}
			if err == nil && s.Key() != conn.Key {
				t.Errorf("%s\nOpen(...).Key(): want %q, got %q", tc.reason, conn.Key, s.Key())
			}
		})
	}
}

// approxDuration equates durations within 2% of each other: Retry-After
// counts down while a slow machine runs the test.
var approxDuration = cmp.Comparer(func(a, b time.Duration) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return d <= max(a, b)/50
})

// TestSessionRateLimit checks that a 429 from the Widget API, answered to a
// call through a session, throttles the connection for every resource using
// it and delays the resource's retry.
func TestSessionRateLimit(t *testing.T) {
	ref := &xpv2.ProviderConfigReference{Kind: nsv1alpha1.ProviderConfigKind, Name: testPC}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: testNamespace, Name: "web"}}

	type want struct {
		// delay is the delay asked for, if any; 0 for none.
		delay time.Duration
	}
	cases := map[string]struct {
		reason string
		// status and retryAfter are what a stub Widget API answers; with
		// status 0 the reference server answers, allowing one call per
		// 1000s.
		status     int
		retryAfter string
		// calls is how many GetWidget calls to make.
		calls int
		want  want
	}{
		"RateLimitedByServer": {
			reason: "A real 429 delays the resource by the server's Retry-After and throttles the connection.",
			calls:  2,
			// The server allows one call per 1000s (a little less when the
			// second call comes seconds after the first).
			want: want{delay: 1000 * time.Second},
		},
		"RateLimitedWithoutRetryAfter": {
			reason: "A 429 without Retry-After still backs off for at least a second.",
			status: http.StatusTooManyRequests,
			calls:  1,
			want:   want{delay: time.Second},
		},
		"ShortRetryAfter": {
			reason:     "A Retry-After under a second backs off for a second.",
			status:     http.StatusTooManyRequests,
			retryAfter: "0",
			calls:      1,
			want:       want{delay: time.Second},
		},
		"HugeRetryAfter": {
			reason:     "A Retry-After of days holds the resource back for MaxRetryAfter.",
			status:     http.StatusTooManyRequests,
			retryAfter: "8640000",
			calls:      1,
			want:       want{delay: MaxRetryAfter},
		},
		"NotFound": {
			reason: "A 404 is an answer, not a reason to slow down.",
			status: http.StatusNotFound,
			calls:  1,
		},
		"Conflict": {
			reason: "Other errors neither throttle nor delay.",
			status: http.StatusConflict,
			calls:  1,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			url := stubAPI(t, tc.status, tc.retryAfter)
			if tc.status == 0 {
				url = apitest.Start(t, apitest.WithOptions(func(o *server.Options) { o.RateLimit = 0.001; o.RateBurst = 1 })).URL
			}
			g := &Sessions{
				Resolver: NewResolver(fakes.NewKube(nsPC(url), tokenSecret(testNamespace, apitest.TokenA))),
				Throttle: NewThrottle(),
			}
			d := &fakes.Delayer{}
			s, err := g.Open(t.Context(), nsMR(ref), d, "Widget.kind", "web")
			if err != nil {
				t.Fatalf("Open(...): %v", err)
			}
			for range tc.calls {
				_, err = s.GetWidget(t.Context(), "web")
			}
			if _, limited := widgetapi.IsRateLimited(err); limited != (tc.want.delay > 0) {
				t.Errorf("%s\nGetWidget(...): want the API's error back, got %v", tc.reason, err)
			}
			var want []fakes.Delay
			if tc.want.delay > 0 {
				want = []fakes.Delay{{Req: req, D: tc.want.delay}}
			}
			if diff := cmp.Diff(want, d.Delays(), cmpopts.EquateEmpty(), approxDuration); diff != "" {
				t.Errorf("%s\nAfter calls: -want, +got:\n%s", tc.reason, diff)
			}
			if got := g.Throttle.Admit(s.Key()) > 0; got != (tc.want.delay > 0) {
				t.Errorf("%s\nconnection throttled: got %t, want %t", tc.reason, got, tc.want.delay > 0)
			}
			if tc.want.delay < maxWait {
				return
			}
			again := &fakes.Delayer{}
			if _, err := g.Open(t.Context(), nsMR(ref), again, "Widget.kind", "web"); err == nil {
				t.Errorf("%s\nOpen(...) after a 429: want an error while throttled, got none", tc.reason)
			}
			if after := again.Delays(); len(after) != 1 || after[0].D < tc.want.delay*9/10 {
				t.Errorf("%s\nOpen(...) after a 429: want a delay of at least %s, got %v", tc.reason, tc.want.delay, after)
			}
		})
	}
}

// TestSessionGuardsEveryCall calls every Widget API method a Session has
// against an API that answers 429 to everything: each must throttle the
// connection and delay the resource. A method added without the guard fails
// here.
func TestSessionGuardsEveryCall(t *testing.T) {
	url := stubAPI(t, http.StatusTooManyRequests, "30")
	ref := &xpv2.ProviderConfigReference{Kind: nsv1alpha1.ProviderConfigKind, Name: testPC}
	resolver := NewResolver(fakes.NewKube(nsPC(url), tokenSecret(testNamespace, apitest.TokenA)))
	st := reflect.TypeFor[*Session]()
	errType := reflect.TypeFor[error]()
	ctxType := reflect.TypeFor[context.Context]()
	guarded := make([]string, 0, st.NumMethod())
	for i := range st.NumMethod() {
		m := st.Method(i)
		ft := m.Type
		if ft.NumIn() < 2 || ft.In(1) != ctxType || ft.Out(ft.NumOut()-1) != errType {
			continue // not an API call
		}
		guarded = append(guarded, m.Name)
		t.Run(m.Name, func(t *testing.T) {
			g := &Sessions{Resolver: resolver, Throttle: NewThrottle()}
			d := &fakes.Delayer{}
			s, err := g.Open(t.Context(), nsMR(ref), d, "Widget.kind", "web")
			if err != nil {
				t.Fatalf("Open(...): %v", err)
			}
			args := []reflect.Value{reflect.ValueOf(s), reflect.ValueOf(t.Context())}
			for j := 2; j < ft.NumIn(); j++ {
				switch {
				case ft.IsVariadic() && j == ft.NumIn()-1:
				case ft.In(j).Kind() == reflect.String:
					args = append(args, reflect.ValueOf("web"))
				default:
					args = append(args, reflect.Zero(ft.In(j)))
				}
			}
			out := m.Func.Call(args)
			err, _ = out[len(out)-1].Interface().(error)
			if _, ok := widgetapi.IsRateLimited(err); !ok {
				t.Errorf("%s(...): want the 429 back, got %v", m.Name, err)
			}
			if after := d.Delays(); len(after) != 1 || after[0].D < 29*time.Second {
				t.Errorf("%s(...): want the resource delayed by the Retry-After (30s), got %v", m.Name, after)
			}
			if g.Throttle.Admit(s.Key()) <= 0 {
				t.Errorf("%s(...): the connection is not throttled after a 429", m.Name)
			}
		})
	}
	want := []string{"CreateKey", "CreateWidget", "DeleteKey", "DeleteWidget", "GetKey", "GetWidget", "ListKeys", "ListWidgets", "RecentWidget", "ReplaceWidget"}
	if diff := cmp.Diff(want, guarded); diff != "" {
		t.Errorf("Session's API calls: -want, +got:\n%s", diff)
	}
}

// stubAPI serves status (and Retry-After, when set) to every request, with
// a problem body, and returns its URL.
func stubAPI(t *testing.T, status int, retryAfter string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"status":` + strconv.Itoa(status) + `,"code":"stub","title":"stub"}`))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestSessionSeen checks that a session reports the versions of its own
// widget that it read or wrote to the change feed, and nothing else.
func TestSessionSeen(t *testing.T) {
	env := apitest.Start(t)
	ref := &xpv2.ProviderConfigReference{Kind: nsv1alpha1.ProviderConfigKind, Name: testPC}
	resolver := NewResolver(fakes.NewKube(nsPC(env.URL), tokenSecret(testNamespace, apitest.TokenA)))
	mr := types.NamespacedName{Namespace: testNamespace, Name: "web"}

	cases := map[string]struct {
		reason  string
		noFeeds bool
		seen    []*widgetapi.Widget
		want    []fakes.Seen
	}{
		"OwnWidget": {
			reason: "What the API returned for the session's widget is recorded.",
			seen:   []*widgetapi.Widget{{Name: "web-widget", Generation: 3, State: widgetapi.StateReady}},
			want:   []fakes.Seen{{Follow: fakes.Follow{Kind: "Widget.kind", Widget: "web-widget", MR: mr}, Generation: 3, State: widgetapi.StateReady}},
		},
		"OtherWidgetOrNothing": {
			reason: "Another widget's version, or none, is not recorded.",
			seen:   []*widgetapi.Widget{{Name: "other", Generation: 3}, nil},
		},
		"NoFeeds": {
			reason:  "Without a change feed there is nothing to tell.",
			noFeeds: true,
			seen:    []*widgetapi.Widget{{Name: "web-widget", Generation: 3}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			feeds := newFollower()
			g := &Sessions{Resolver: resolver, Throttle: NewThrottle(), Feeds: feeds}
			if tc.noFeeds {
				g.Feeds = nil
			}
			s, err := g.Open(t.Context(), nsMR(ref), &fakes.Delayer{}, "Widget.kind", "web-widget")
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.seen {
				if _, err := s.saw(w, nil); err != nil {
					t.Fatal(err)
				}
			}
			for i := range tc.want {
				tc.want[i].Follow.Key = s.Key()
			}
			if diff := cmp.Diff(tc.want, feeds.SeenCalls(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nseen: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestSessionCallsReportSeen checks that the widget versions that calls
// through a session read or write reach the change feed.
func TestSessionCallsReportSeen(t *testing.T) {
	env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) { o.ProvisionDelay = time.Hour }))
	ref := &xpv2.ProviderConfigReference{Kind: nsv1alpha1.ProviderConfigKind, Name: testPC}
	feeds := newFollower()
	g := &Sessions{Resolver: NewResolver(fakes.NewKube(nsPC(env.URL), tokenSecret(testNamespace, apitest.TokenA))), Throttle: NewThrottle(), Feeds: feeds}
	s, err := g.Open(t.Context(), nsMR(ref), &fakes.Delayer{}, "Widget.kind", "web-widget")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := s.CreateWidget(ctx, widgetapi.CreateWidgetRequest{Name: "web-widget", Size: widgetapi.SizeSmall}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReplaceWidget(ctx, "web-widget", widgetapi.ReplaceWidgetRequest{Size: widgetapi.SizeLarge}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetWidget(ctx, "web-widget"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateWidget(ctx, widgetapi.CreateWidgetRequest{Name: "other", Size: widgetapi.SizeSmall}); err != nil {
		t.Fatal(err)
	}
	f := fakes.Follow{Key: s.Key(), Kind: "Widget.kind", Widget: "web-widget", MR: types.NamespacedName{Namespace: testNamespace, Name: "web"}}
	want := []fakes.Seen{
		{Follow: f, Generation: 1, State: widgetapi.StateProvisioning},
		{Follow: f, Generation: 2, State: widgetapi.StateProvisioning},
		{Follow: f, Generation: 2, State: widgetapi.StateProvisioning},
	}
	if diff := cmp.Diff(want, feeds.SeenCalls()); diff != "" {
		t.Errorf("seen: -want, +got:\n%s", diff)
	}
}

// TestSessionCreateRecheck checks that creating a widget the change feed
// follows, which is not ready yet, puts off the resource's next reconcile to
// the recheck, and that nothing else does.
func TestSessionCreateRecheck(t *testing.T) {
	ref := &xpv2.ProviderConfigReference{Kind: nsv1alpha1.ProviderConfigKind, Name: testPC}
	req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: testNamespace, Name: "web"}}
	cases := map[string]struct {
		reason    string
		provision time.Duration
		notLive   bool
		noRecheck bool
		// ready: the API answers the create with a Ready widget.
		ready  bool
		widget string
		want   []fakes.Delay
	}{
		"Provisioning": {
			reason:    "A widget being provisioned while the feed follows it: the feed says when it is Ready, so the resource waits for the recheck.",
			provision: time.Hour,
			widget:    "web-widget",
			want:      []fakes.Delay{{Req: req, D: 10 * time.Second}},
		},
		"ReadyAtOnce": {
			reason: "A widget that is Ready when created gets no feed entry for it: the reconciler's own requeue reports it.",
			ready:  true,
			widget: "web-widget",
		},
		"FeedNotLive": {
			reason:    "While the feed is not polling successfully it may miss the change: the reconciler's requeue stays.",
			provision: time.Hour,
			notLive:   true,
			widget:    "web-widget",
		},
		"NoRecheck": {
			reason:    "Without a recheck configured the reconciler's requeue stays.",
			provision: time.Hour,
			noRecheck: true,
			widget:    "web-widget",
		},
		"OtherWidget": {
			reason:    "Creating a widget the session does not follow delays nothing.",
			provision: time.Hour,
			widget:    "other",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			url := apitest.Start(t, apitest.WithOptions(func(o *server.Options) { o.ProvisionDelay = tc.provision })).URL
			if tc.ready {
				url = readyCreates(t)
			}
			feeds := newFollower()
			feeds.Live = !tc.notLive
			g := &Sessions{Resolver: NewResolver(fakes.NewKube(nsPC(url), tokenSecret(testNamespace, apitest.TokenA))), Throttle: NewThrottle(), Feeds: feeds, Recheck: 10 * time.Second}
			if tc.noRecheck {
				g.Recheck = 0
			}
			delay := &fakes.Delayer{}
			s, err := g.Open(t.Context(), nsMR(ref), delay, "Widget.kind", "web-widget")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.CreateWidget(t.Context(), widgetapi.CreateWidgetRequest{Name: tc.widget, Size: widgetapi.SizeSmall}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, delay.Delays()); diff != "" {
				t.Errorf("%s\ndelays: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// readyCreates serves an API whose creates answer with a Ready widget of the
// requested name.
func readyCreates(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req widgetapi.CreateWidgetRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(widgetapi.Widget{ID: "w-1", Name: req.Name, Size: req.Size, State: widgetapi.StateReady, Generation: 1})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
