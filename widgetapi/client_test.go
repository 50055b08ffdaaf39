package widgetapi_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/widgetco/crossplane-widget/test/lib/wait"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func waitState(t *testing.T, c *widgetapi.Client, name string, want widgetapi.State) *widgetapi.Widget {
	t.Helper()
	var w *widgetapi.Widget
	wait.ForTrue(t, 10*time.Second, "widget "+name+" to be "+string(want), func() bool {
		var err error
		w, err = c.GetWidget(ctx(t), name)
		if err != nil {
			t.Fatalf("GetWidget: %v", err)
		}
		return w.State == want
	})
	return w
}

func TestWidgetLifecycle(t *testing.T) {
	env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
		o.ProvisionDelay = 50 * time.Millisecond
		o.ResizeDelay = 50 * time.Millisecond
		o.DeleteDelay = 50 * time.Millisecond
	}))
	c := env.Client(t, apitest.TokenA)

	created, err := c.CreateWidget(ctx(t), widgetapi.CreateWidgetRequest{Name: "w1", Labels: map[string]string{"team": "a"}, Description: "first"})
	if err != nil {
		t.Fatalf("CreateWidget: %v", err)
	}
	want := widgetapi.Widget{Name: "w1", Size: "small", Region: "us-east-1", Labels: map[string]string{"team": "a"}, Description: "first", State: widgetapi.StateProvisioning, Generation: 1}
	ignore := cmpopts.IgnoreFields(widgetapi.Widget{}, "ID", "CreatedAt", "UpdatedAt")
	if diff := cmp.Diff(want, *created, ignore); diff != "" {
		t.Errorf("CreateWidget: -want, +got:\n%s", diff)
	}
	if !strings.HasPrefix(created.ID, "w-") {
		t.Errorf("CreateWidget: ID %q lacks the w- prefix", created.ID)
	}

	ready := waitState(t, c, "w1", widgetapi.StateReady)
	if ready.Endpoint == "" || !strings.Contains(ready.Endpoint, created.ID) {
		t.Errorf("ready widget endpoint %q should be set and derived from the ID", ready.Endpoint)
	}
	if ready.Generation != 1 {
		t.Errorf("state changes must not bump generation: got %d", ready.Generation)
	}

	// PUT: a size change starts a resize and bumps the generation.
	upd, err := c.ReplaceWidget(ctx(t), "w1", widgetapi.ReplaceWidgetRequest{Size: "large", Labels: map[string]string{"team": "a"}, Description: "first"}, widgetapi.IfGeneration(1))
	if err != nil {
		t.Fatalf("ReplaceWidget: %v", err)
	}
	if upd.State != widgetapi.StateResizing || upd.Generation != 2 || upd.Size != "large" {
		t.Errorf("ReplaceWidget: got state %s generation %d size %s, want Resizing 2 large", upd.State, upd.Generation, upd.Size)
	}
	waitState(t, c, "w1", widgetapi.StateReady)

	// An update that changes nothing keeps the generation.
	same, err := c.ReplaceWidget(ctx(t), "w1", widgetapi.ReplaceWidgetRequest{Size: "large", Region: "us-east-1", Labels: map[string]string{"team": "a"}, Description: "first"})
	if err != nil {
		t.Fatalf("no-op ReplaceWidget: %v", err)
	}
	if same.Generation != 2 || same.State != widgetapi.StateReady {
		t.Errorf("no-op ReplaceWidget: got generation %d state %s, want 2 Ready", same.Generation, same.State)
	}

	// PATCH: labels only; size stays.
	empty := map[string]string{}
	p, err := c.PatchWidget(ctx(t), "w1", widgetapi.PatchWidgetRequest{Labels: &empty})
	if err != nil {
		t.Fatalf("PatchWidget: %v", err)
	}
	if p.Labels != nil || p.Size != "large" || p.Generation != 3 || p.State != widgetapi.StateReady {
		t.Errorf("PatchWidget: got labels %v size %s generation %d state %s", p.Labels, p.Size, p.Generation, p.State)
	}

	del, err := c.DeleteWidget(ctx(t), "w1")
	if err != nil {
		t.Fatalf("DeleteWidget: %v", err)
	}
	if del.State != widgetapi.StateDeleting {
		t.Errorf("DeleteWidget: state %s, want Deleting", del.State)
	}
	if _, err := c.DeleteWidget(ctx(t), "w1"); err != nil && !widgetapi.IsNotFound(err) {
		t.Errorf("second DeleteWidget: %v, want success or not found", err)
	}
	wait.ForTrue(t, 10*time.Second, "widget to be gone", func() bool {
		_, err := c.GetWidget(ctx(t), "w1")
		return widgetapi.IsNotFound(err)
	})
}

func TestErrors(t *testing.T) {
	type want struct {
		status int
		code   string
		fields []widgetapi.FieldError
		check  func(error) bool
	}
	cases := map[string]struct {
		reason string
		call   func(t *testing.T, env *apitest.Env) error
		want   want
	}{
		"NotFound": {
			reason: "GET of a missing widget is 404 not_found",
			call: func(t *testing.T, env *apitest.Env) error {
				_, err := env.Client(t, apitest.TokenA).GetWidget(ctx(t), "missing")
				return err
			},
			want: want{status: 404, code: widgetapi.CodeNotFound, check: widgetapi.IsNotFound},
		},
		"OtherProjectIsNotFound": {
			reason: "another project's widget is 404, not 403",
			call: func(t *testing.T, env *apitest.Env) error {
				mustCreate(t, env.Client(t, apitest.TokenA), "shared-name")
				_, err := env.Client(t, apitest.TokenB).GetWidget(ctx(t), "shared-name")
				return err
			},
			want: want{status: 404, code: widgetapi.CodeNotFound, check: widgetapi.IsNotFound},
		},
		"AlreadyExists": {
			reason: "a taken name is 409 already_exists",
			call: func(t *testing.T, env *apitest.Env) error {
				c := env.Client(t, apitest.TokenA)
				mustCreate(t, c, "dup")
				_, err := c.CreateWidget(ctx(t), widgetapi.CreateWidgetRequest{Name: "dup"})
				return err
			},
			want: want{status: 409, code: widgetapi.CodeAlreadyExists, check: widgetapi.IsAlreadyExists},
		},
		"Invalid": {
			reason: "invalid fields are 422 with every field path",
			call: func(t *testing.T, env *apitest.Env) error {
				_, err := env.Client(t, apitest.TokenA).CreateWidget(ctx(t), widgetapi.CreateWidgetRequest{Name: "Bad_Name", Size: "huge"})
				return err
			},
			want: want{status: 422, code: widgetapi.CodeInvalid, fields: []widgetapi.FieldError{
				{Field: "name", Message: "must be a DNS-1123 label: at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit"},
				{Field: "size", Message: "must be one of small, medium, large"},
			}, check: func(err error) bool { _, ok := widgetapi.IsInvalid(err); return ok }},
		},
		"ImmutableRegion": {
			reason: "changing the region is 422 on region",
			call: func(t *testing.T, env *apitest.Env) error {
				c := env.Client(t, apitest.TokenA)
				mustCreate(t, c, "reg")
				_, err := c.ReplaceWidget(ctx(t), "reg", widgetapi.ReplaceWidgetRequest{Region: "eu-west-1"})
				return err
			},
			want: want{status: 422, code: widgetapi.CodeInvalid, fields: []widgetapi.FieldError{
				{Field: "region", Message: "is immutable: the widget is in us-east-1; create a new widget to use another region"},
			}},
		},
		"PreconditionFailed": {
			reason: "a stale If-Match is 412",
			call: func(t *testing.T, env *apitest.Env) error {
				c := env.Client(t, apitest.TokenA)
				mustCreate(t, c, "etag")
				_, err := c.ReplaceWidget(ctx(t), "etag", widgetapi.ReplaceWidgetRequest{Size: "medium"}, widgetapi.IfGeneration(7))
				return err
			},
			want: want{status: 412, code: widgetapi.CodePreconditionFailed, check: widgetapi.IsPreconditionFailed},
		},
		"ConflictWhileDeleting": {
			reason: "changing a Deleting widget is 409 conflict",
			call: func(t *testing.T, env *apitest.Env) error {
				c := env.Client(t, apitest.TokenA)
				mustCreate(t, c, "going")
				if _, err := c.DeleteWidget(ctx(t), "going"); err != nil {
					t.Fatal(err)
				}
				_, err := c.ReplaceWidget(ctx(t), "going", widgetapi.ReplaceWidgetRequest{Size: "medium"})
				return err
			},
			want: want{status: 409, code: widgetapi.CodeConflict, check: widgetapi.IsConflict},
		},
		"NoToken": {
			reason: "a request without a token is 401",
			call: func(t *testing.T, env *apitest.Env) error {
				_, err := env.Client(t, "").GetWidget(ctx(t), "x")
				return err
			},
			want: want{status: 401, code: widgetapi.CodeUnauthorized, check: refusedCredential},
		},
		"BadToken": {
			reason: "an unknown token is 401",
			call: func(t *testing.T, env *apitest.Env) error {
				_, err := env.Client(t, "not-a-token").ListWidgets(ctx(t), widgetapi.ListWidgetsOptions{})
				return err
			},
			want: want{status: 401, code: widgetapi.CodeUnauthorized, check: refusedCredential},
		},
		"KeyOfMissingWidget": {
			reason: "a key of a missing widget is 404",
			call: func(t *testing.T, env *apitest.Env) error {
				_, err := env.Client(t, apitest.TokenA).CreateKey(ctx(t), "nope", widgetapi.CreateKeyRequest{Name: "k"})
				return err
			},
			want: want{status: 404, code: widgetapi.CodeNotFound, check: widgetapi.IsNotFound},
		},
		"FeedExpired": {
			reason: "a feed position older than retention is 410 feed_expired",
			call: func(t *testing.T, env *apitest.Env) error {
				c := env.Client(t, apitest.TokenA)
				for i := range 5 {
					mustCreate(t, c, fmt.Sprintf("f%d", i))
				}
				_, err := c.Changes(ctx(t), widgetapi.ChangesOptions{After: 0})
				return err
			},
			want: want{status: 410, code: widgetapi.CodeFeedExpired, check: func(err error) bool { s, ok := widgetapi.IsFeedExpired(err); return ok && s >= 5 }},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) { o.FeedRetention = 2; o.ProvisionDelay = time.Hour; o.DeleteDelay = time.Hour }))
			err := tc.call(t, env)
			var e *widgetapi.Error
			if !errors.As(err, &e) {
				t.Fatalf("%s: got error %v, want *widgetapi.Error", tc.reason, err)
			}
			if e.StatusCode != tc.want.status || e.Problem.Code != tc.want.code {
				t.Errorf("%s: got %d %s, want %d %s", tc.reason, e.StatusCode, e.Problem.Code, tc.want.status, tc.want.code)
			}
			if tc.want.fields != nil {
				fields, ok := widgetapi.IsInvalid(err)
				if !ok {
					t.Errorf("%s: IsInvalid is false", tc.reason)
				}
				if diff := cmp.Diff(tc.want.fields, fields); diff != "" {
					t.Errorf("%s: field errors -want, +got:\n%s", tc.reason, diff)
				}
			}
			if tc.want.check != nil && !tc.want.check(err) {
				t.Errorf("%s: the typed helper does not recognise %v", tc.reason, err)
			}
		})
	}
}

// refusedCredential is true of a 401: the token itself is refused.
func refusedCredential(err error) bool {
	return widgetapi.IsUnauthorized(err) && widgetapi.IsCredentialRefused(err)
}

// guardFn is a widgetapi.Guard made of functions.
type guardFn struct {
	admit func() error
	done  func(error)
}

func (g guardFn) Admit(context.Context) error { return g.admit() }
func (g guardFn) Done(err error)              { g.done(err) }

// TestGuard checks that a Guard sees every attempt, and that an attempt it
// refuses is neither sent nor retried.
func TestGuard(t *testing.T) {
	env := apitest.Start(t)
	var refuse error
	var admitted int
	var done []error
	c := env.Client(t, "not-a-token", widgetapi.WithGuard(guardFn{
		admit: func() error { admitted++; return refuse },
		done:  func(err error) { done = append(done, err) },
	}))
	if _, err := c.GetWidget(ctx(t), "x"); !refusedCredential(err) {
		t.Fatalf("GetWidget(...) with a wrong token: want 401, got %v", err)
	}
	if admitted != 1 || len(done) != 1 || !refusedCredential(done[0]) {
		t.Errorf("after a 401: want 1 admitted and its 401 reported, got %d admitted, results %v", admitted, done)
	}
	refuse = errors.New("paused")
	if _, err := c.GetWidget(ctx(t), "x"); !errors.Is(err, refuse) {
		t.Errorf("GetWidget(...) refused by the guard: want its error, got %v", err)
	}
	if admitted != 2 || len(done) != 1 {
		t.Errorf("an attempt the guard refused: want it asked once and nothing sent, got %d admitted, results %v", admitted, done)
	}
}

func mustCreate(t *testing.T, c *widgetapi.Client, name string, labels ...string) *widgetapi.Widget {
	t.Helper()
	l := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		l[labels[i]] = labels[i+1]
	}
	w, err := c.CreateWidget(ctx(t), widgetapi.CreateWidgetRequest{Name: name, Labels: l})
	if err != nil {
		t.Fatalf("CreateWidget(%s): %v", name, err)
	}
	return w
}

func TestProjectIsolation(t *testing.T) {
	env := apitest.Start(t)
	a, b := env.Client(t, apitest.TokenA), env.Client(t, apitest.TokenB)
	mustCreate(t, a, "same")
	mustCreate(t, b, "same")
	mustCreate(t, a, "only-a")
	if _, err := b.DeleteWidget(ctx(t), "only-a"); !widgetapi.IsNotFound(err) {
		t.Errorf("project B deleting project A's widget: got %v, want not found", err)
	}
	lb, err := b.ListWidgets(ctx(t), widgetapi.ListWidgetsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(lb.Items) != 1 || lb.Items[0].Name != "same" {
		t.Errorf("project B sees %v, want only its own widget 'same'", lb.Items)
	}
	ch, err := b.Changes(ctx(t), widgetapi.ChangesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range ch.Changes {
		if c.Widget == "only-a" {
			t.Errorf("project B's change feed shows project A's widget: %+v", c)
		}
	}
}

func TestPagination(t *testing.T) {
	env := apitest.Start(t)
	c := env.Client(t, apitest.TokenA)
	for i := range 7 {
		team := "red"
		if i%2 == 1 {
			team = "blue"
		}
		mustCreate(t, c, fmt.Sprintf("p%02d", i), "team", team)
	}
	var names []string
	opts := widgetapi.ListWidgetsOptions{Limit: 3}
	pages := 0
	for {
		l, err := c.ListWidgets(ctx(t), opts)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, w := range l.Items {
			names = append(names, w.Name)
		}
		if l.NextPageToken == "" {
			break
		}
		opts.PageToken = l.NextPageToken
	}
	if diff := cmp.Diff([]string{"p00", "p01", "p02", "p03", "p04", "p05", "p06"}, names); diff != "" || pages != 3 {
		t.Errorf("paged list (%d pages): -want, +got:\n%s", pages, diff)
	}

	l, err := c.ListWidgets(ctx(t), widgetapi.ListWidgetsOptions{Labels: map[string]string{"team": "blue"}})
	if err != nil {
		t.Fatal(err)
	}
	blue := make([]string, 0, len(l.Items))
	for _, w := range l.Items {
		blue = append(blue, w.Name)
	}
	if diff := cmp.Diff([]string{"p01", "p03", "p05"}, blue); diff != "" {
		t.Errorf("label-filtered list: -want, +got:\n%s", diff)
	}
	_, err = c.ListWidgets(ctx(t), widgetapi.ListWidgetsOptions{PageToken: "!!!"})
	if f, ok := widgetapi.IsInvalid(err); !ok || len(f) != 1 || f[0].Field != "pageToken" {
		t.Errorf("bad page token: got %v, want invalid pageToken", err)
	}
}

func TestKeys(t *testing.T) {
	env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) { o.DeleteDelay = 20 * time.Millisecond }))
	c := env.Client(t, apitest.TokenA)
	mustCreate(t, c, "kw")

	k, err := c.CreateKey(ctx(t), "kw", widgetapi.CreateKeyRequest{Name: "ci", Description: "for CI", Labels: map[string]string{"widgetco.io/owner": "n_team-a.ci"}})
	if err != nil {
		t.Fatalf("CreateKey: %v", err)
	}
	if diff := cmp.Diff(map[string]string{"widgetco.io/owner": "n_team-a.ci"}, k.Labels); diff != "" {
		t.Errorf("CreateKey: labels -want, +got:\n%s", diff)
	}
	if _, err := c.CreateKey(ctx(t), "kw", widgetapi.CreateKeyRequest{Name: "bad", Labels: map[string]string{"Bad Key": "v"}}); !isInvalid(err) {
		t.Errorf("key with an invalid label: got %v, want invalid", err)
	}
	if !strings.HasPrefix(k.Secret, "wks_") || len(k.Secret) < 40 {
		t.Errorf("CreateKey: secret %d chars, want a wks_ secret of 40+ chars", len(k.Secret))
	}
	if s := fmt.Sprintf("%v %+v %#v %s", k, k, k, k); strings.Contains(s, k.Secret) {
		t.Errorf("formatting a KeyWithSecret reveals the secret")
	}
	if _, err := c.CreateKey(ctx(t), "kw", widgetapi.CreateKeyRequest{Name: "ci"}); !widgetapi.IsAlreadyExists(err) {
		t.Errorf("duplicate key: got %v, want already exists", err)
	}

	// The secret is never readable again, through any endpoint.
	for _, path := range []string{"/v1/widgets/kw/keys", "/v1/widgets/kw/keys/ci", "/v1/widgets/kw", "/v1/changes?after=0"} {
		req, _ := http.NewRequestWithContext(ctx(t), http.MethodGet, env.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+apitest.TokenA)
		rsp, err := env.HTTP.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(rsp.Body)
		_ = rsp.Body.Close()
		if rsp.StatusCode != 200 {
			t.Errorf("GET %s: %d", path, rsp.StatusCode)
		}
		if strings.Contains(string(body), k.Secret) || strings.Contains(string(body), `"secret"`) {
			t.Errorf("GET %s reveals the key secret", path)
		}
	}

	got, err := c.GetKey(ctx(t), "kw", "ci")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(k.Key, *got, cmpopts.EquateApproxTime(time.Millisecond)); diff != "" {
		t.Errorf("GetKey: -want, +got:\n%s", diff)
	}
	if err := c.DeleteKey(ctx(t), "kw", "ci"); err != nil {
		t.Fatalf("DeleteKey: %v", err)
	}
	if _, err := c.GetKey(ctx(t), "kw", "ci"); !widgetapi.IsNotFound(err) {
		t.Errorf("revoked key: got %v, want not found", err)
	}

	// Keys go away with their widget: a new widget of the same name has none.
	if _, err := c.CreateKey(ctx(t), "kw", widgetapi.CreateKeyRequest{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteWidget(ctx(t), "kw"); err != nil {
		t.Fatal(err)
	}
	wait.ForTrue(t, 10*time.Second, "widget to be gone", func() bool {
		_, err := c.GetWidget(ctx(t), "kw")
		return widgetapi.IsNotFound(err)
	})
	mustCreate(t, c, "kw")
	l, err := c.ListKeys(ctx(t), "kw")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 0 {
		t.Errorf("a recreated widget inherited keys %v", l.Items)
	}
}

// countingObserver counts HTTP attempts per operation.
type countingObserver struct {
	mu     sync.Mutex
	counts map[string]int
}

func (o *countingObserver) observe(op string, _ int, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.counts == nil {
		o.counts = map[string]int{}
	}
	o.counts[op]++
}

func (o *countingObserver) get(op string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.counts[op]
}

// TestVerifyKey: a key's secret lets a client in until the key is revoked;
// another widget's key or a made-up secret never does.
func TestVerifyKey(t *testing.T) {
	env := apitest.Start(t)
	c := env.Client(t, apitest.TokenA)
	mustCreate(t, c, "vw")
	mustCreate(t, c, "other")
	k, err := c.CreateKey(ctx(t), "vw", widgetapi.CreateKeyRequest{Name: "app"})
	if err != nil {
		t.Fatal(err)
	}
	o, err := c.CreateKey(ctx(t), "other", widgetapi.CreateKeyRequest{Name: "app"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.VerifyKey(ctx(t), "vw", k.Secret)
	if err != nil || got.Name != "app" || got.Widget != "vw" {
		t.Errorf("VerifyKey with the key's secret: %+v, %v; want key app of vw", got, err)
	}
	for what, secret := range map[string]string{"another widget's key": o.Secret, "a made-up secret": "wks_nope", "an empty secret": ""} {
		if _, err := c.VerifyKey(ctx(t), "vw", secret); !widgetapi.IsNotFound(err) {
			t.Errorf("VerifyKey with %s: got %v, want not found", what, err)
		}
	}
	if _, err := c.VerifyKey(ctx(t), "missing", k.Secret); !widgetapi.IsNotFound(err) {
		t.Errorf("VerifyKey of a widget that does not exist: got %v, want not found", err)
	}
	if err := c.DeleteKey(ctx(t), "vw", "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.VerifyKey(ctx(t), "vw", k.Secret); !widgetapi.IsNotFound(err) {
		t.Errorf("VerifyKey with a revoked key: got %v, want not found", err)
	}
	if s := fmt.Sprintf("%v %+v %#v", widgetapi.VerifyKeyRequest{Secret: k.Secret}, widgetapi.VerifyKeyRequest{Secret: k.Secret}, widgetapi.VerifyKeyRequest{Secret: k.Secret}); strings.Contains(s, k.Secret) {
		t.Errorf("formatting a VerifyKeyRequest reveals the secret")
	}
}

func TestRetries(t *testing.T) {
	env := apitest.Start(t)
	seed := env.Client(t, apitest.TokenA)
	mustCreate(t, seed, "r")
	env.Server.SetFaults(server.Faults{ErrorRate: 1})

	obs := &countingObserver{}
	policy := widgetapi.RetryPolicy{Attempts: 4, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}
	// Retry-After: 1 from the server is capped by MaxDelay, keeping this fast.
	c := env.Client(t, apitest.TokenA, widgetapi.WithObserver(obs.observe), widgetapi.WithRetryPolicy(policy))

	_, err := c.GetWidget(ctx(t), "r")
	if !widgetapi.IsServerError(err) {
		t.Fatalf("GET under 100%% faults: got %v, want a server error", err)
	}
	if got := obs.get("get widget"); got != 4 {
		t.Errorf("GET attempts: got %d, want 4 (idempotent requests are retried)", got)
	}
	_, err = c.CreateWidget(ctx(t), widgetapi.CreateWidgetRequest{Name: "never"})
	if !widgetapi.IsServerError(err) {
		t.Fatalf("POST under 100%% faults: got %v, want a server error", err)
	}
	if got := obs.get("create widget"); got != 1 {
		t.Errorf("POST attempts: got %d, want 1 (creates are never retried blindly)", got)
	}

	// With half the requests failing, retries get GETs through.
	env.Server.SetFaults(server.Faults{ErrorRate: 0.5})
	patient := env.Client(t, apitest.TokenA, widgetapi.WithRetryPolicy(widgetapi.RetryPolicy{Attempts: 30, BaseDelay: time.Millisecond, MaxDelay: 2 * time.Millisecond}))
	for i := range 20 {
		if _, err := patient.GetWidget(ctx(t), "r"); err != nil {
			t.Fatalf("GET %d with retries under 50%% faults: %v", i, err)
		}
	}

	// Transport errors are retried too, and never mention the token.
	env.HTTP.Close()
	_, err = c.GetWidget(ctx(t), "r")
	if err == nil {
		t.Fatal("GET against a closed server succeeded")
	}
	if got := obs.get("get widget"); got != 8 {
		t.Errorf("GET attempts after transport errors: got %d, want 8", got)
	}
	if strings.Contains(err.Error(), apitest.TokenA) {
		t.Errorf("error reveals the token: %v", err)
	}
}

func TestRateLimited(t *testing.T) {
	env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) { o.RateLimit = 1; o.RateBurst = 2 }))
	c := env.Client(t, apitest.TokenA)
	var limited error
	for range 5 {
		if _, err := c.ListWidgets(ctx(t), widgetapi.ListWidgetsOptions{}); err != nil {
			limited = err
			break
		}
	}
	d, ok := widgetapi.IsRateLimited(limited)
	if !ok {
		t.Fatalf("5 requests at 1/s with burst 2: got %v, want rate limited", limited)
	}
	if d < time.Second {
		t.Errorf("Retry-After: got %s, want at least 1s", d)
	}
	// The limit is per token: project B is unaffected.
	if _, err := env.Client(t, apitest.TokenB).ListWidgets(ctx(t), widgetapi.ListWidgetsOptions{}); err != nil {
		t.Errorf("another token was throttled: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

func isInvalid(err error) bool {
	_, ok := widgetapi.IsInvalid(err)
	return ok
}
