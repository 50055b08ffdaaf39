package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

func ctx(t testing.TB) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// raw sends a request with token A and returns status and decoded problem.
func raw(t *testing.T, env *apitest.Env, method, path, body string, hdr ...string) (int, widgetapi.Problem) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx(t), method, env.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apitest.TokenA)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rsp, err := env.HTTP.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer rsp.Body.Close()
	p := widgetapi.Problem{}
	data, _ := io.ReadAll(rsp.Body)
	if rsp.StatusCode >= 400 {
		if ct := rsp.Header.Get("Content-Type"); ct != widgetapi.ProblemContentType {
			t.Errorf("%s %s: error with Content-Type %q, want %s", method, path, ct, widgetapi.ProblemContentType)
		}
		if err := json.Unmarshal(data, &p); err != nil {
			t.Errorf("%s %s: error body is not a problem document: %s", method, path, data)
		}
	}
	return rsp.StatusCode, p
}

func TestValidation(t *testing.T) {
	long := strings.Repeat("a", 64)
	manyLabels := map[string]string{}
	for i := range 33 {
		manyLabels[fmt.Sprintf("k%02d", i)] = "v"
	}
	many, _ := json.Marshal(map[string]any{"name": "ok", "labels": manyLabels})
	type want struct {
		status int
		code   string
		fields []string
	}
	cases := map[string]struct {
		reason       string
		method, path string
		body         string
		want         want
	}{
		"MalformedJSON":     {"broken JSON is 400", "POST", "/v1/widgets", `{"name":`, want{400, "malformed_request", nil}},
		"TrailingData":      {"data after the object is 400", "POST", "/v1/widgets", `{"name":"a"} {}`, want{400, "malformed_request", nil}},
		"NotAnObject":       {"an array body is 400", "POST", "/v1/widgets", `[]`, want{400, "malformed_request", nil}},
		"UnknownField":      {"unknown fields are rejected with their path", "POST", "/v1/widgets", `{"name":"a","colour":"red"}`, want{422, "invalid", []string{"colour"}}},
		"WrongType":         {"a number for a string names the field", "POST", "/v1/widgets", `{"name":"a","size":3}`, want{422, "invalid", []string{"size"}}},
		"MissingName":       {"name is required", "POST", "/v1/widgets", `{}`, want{422, "invalid", []string{"name"}}},
		"UppercaseName":     {"names are DNS-1123 labels", "POST", "/v1/widgets", `{"name":"Widget"}`, want{422, "invalid", []string{"name"}}},
		"LongName":          {"names are at most 63 characters", "POST", "/v1/widgets", `{"name":"` + long + `"}`, want{422, "invalid", []string{"name"}}},
		"TrailingDash":      {"names end with a letter or digit", "POST", "/v1/widgets", `{"name":"a-"}`, want{422, "invalid", []string{"name"}}},
		"BadSize":           {"size is an enum", "POST", "/v1/widgets", `{"name":"a","size":"huge"}`, want{422, "invalid", []string{"size"}}},
		"BadRegion":         {"region has a pattern", "POST", "/v1/widgets", `{"name":"a","region":"Mars"}`, want{422, "invalid", []string{"region"}}},
		"UnknownRegion":     {"region must be an allowed one", "POST", "/v1/widgets", `{"name":"a","region":"ap-south-9"}`, want{422, "invalid", []string{"region"}}},
		"BadLabelKey":       {"label keys have a pattern", "POST", "/v1/widgets", `{"name":"a","labels":{"Bad Key":"v"}}`, want{422, "invalid", []string{"labels[Bad Key]"}}},
		"LongLabelValue":    {"label values are at most 63", "POST", "/v1/widgets", `{"name":"a","labels":{"k":"` + long + `"}}`, want{422, "invalid", []string{"labels[k]"}}},
		"TooManyLabels":     {"at most 32 labels", "POST", "/v1/widgets", string(many), want{422, "invalid", []string{"labels"}}},
		"LongDescription":   {"description is at most 256", "POST", "/v1/widgets", `{"name":"a","description":"` + strings.Repeat("x", 257) + `"}`, want{422, "invalid", []string{"description"}}},
		"SeveralProblems":   {"every problem is reported", "POST", "/v1/widgets", `{"name":"A","size":"xl","region":"x"}`, want{422, "invalid", []string{"name", "size", "region"}}},
		"BadKeyName":        {"key names are DNS-1123 labels", "POST", "/v1/widgets/existing/keys", `{"name":"K!"}`, want{422, "invalid", []string{"name"}}},
		"KeyUnknownField":   {"key bodies reject unknown fields", "POST", "/v1/widgets/existing/keys", `{"name":"k","secret":"mine"}`, want{422, "invalid", []string{"secret"}}},
		"PutRegionChange":   {"region is immutable", "PUT", "/v1/widgets/existing", `{"region":"eu-west-1"}`, want{422, "invalid", []string{"region"}}},
		"PatchEmptySize":    {"an empty size in a patch is invalid", "PATCH", "/v1/widgets/existing", `{"size":""}`, want{422, "invalid", []string{"size"}}},
		"PatchNameField":    {"name cannot be patched", "PATCH", "/v1/widgets/existing", `{"name":"new"}`, want{422, "invalid", []string{"name"}}},
		"BadLimit":          {"limit is bounded", "GET", "/v1/widgets?limit=0", ``, want{422, "invalid", []string{"limit"}}},
		"BadSelector":       {"selectors are key=value", "GET", "/v1/widgets?labelSelector=novalue", ``, want{422, "invalid", []string{"labelSelector"}}},
		"BadAfter":          {"after is a number or latest", "GET", "/v1/changes?after=soon", ``, want{422, "invalid", []string{"after"}}},
		"BadWait":           {"wait is seconds", "GET", "/v1/changes?wait=-1", ``, want{422, "invalid", []string{"wait"}}},
		"UnknownRoute":      {"unknown routes are 404 problems", "GET", "/v1/gadgets", ``, want{404, "not_found", nil}},
		"BadIfMatch":        {"a mismatched If-Match is 412", "PUT", "/v1/widgets/existing", `{"size":"large"}`, want{412, "precondition_failed", nil}},
		"BodyTooLarge":      {"huge bodies are refused", "POST", "/v1/widgets", `{"name":"a","description":"` + strings.Repeat("x", 70000) + `"}`, want{400, "malformed_request", nil}},
		"ControlCharsLabel": {"label values are printable", "POST", "/v1/widgets", `{"name":"a","labels":{"k":"a\u0000b"}}`, want{422, "invalid", []string{"labels[k]"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
				o.Regions = []string{"us-east-1", "eu-west-1"}
				o.ProvisionDelay = time.Hour
			}))
			c := env.Client(t, apitest.TokenA)
			if _, err := c.CreateWidget(ctx(t), widgetapi.CreateWidgetRequest{Name: "existing"}); err != nil {
				t.Fatal(err)
			}
			before, err := c.Changes(ctx(t), widgetapi.ChangesOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var hdr []string
			if name == "BadIfMatch" {
				hdr = []string{"If-Match", `"41"`}
			}
			status, p := raw(t, env, tc.method, tc.path, tc.body, hdr...)
			if status != tc.want.status || p.Code != tc.want.code {
				t.Errorf("%s: got %d %q (%s), want %d %q", tc.reason, status, p.Code, p.Detail, tc.want.status, tc.want.code)
			}
			var fields []string
			for _, e := range p.Errors {
				fields = append(fields, e.Field)
				if e.Message == "" {
					t.Errorf("%s: field %s has no message", tc.reason, e.Field)
				}
			}
			if diff := cmp.Diff(tc.want.fields, fields); diff != "" {
				t.Errorf("%s: field paths -want, +got:\n%s", tc.reason, diff)
			}
			// Nothing was stored: no new change, existing widget unchanged.
			after, err := c.Changes(ctx(t), widgetapi.ChangesOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if after.LatestSeq != before.LatestSeq {
				t.Errorf("%s: a rejected request changed state (feed %d -> %d)", tc.reason, before.LatestSeq, after.LatestSeq)
			}
		})
	}
}

func TestConcurrentUpdatesWithStaleETag(t *testing.T) {
	env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) { o.ProvisionDelay = time.Hour }))
	c := env.Client(t, apitest.TokenA)
	w, err := c.CreateWidget(ctx(t), widgetapi.CreateWidgetRequest{Name: "race"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, lost := 0, 0
	var other []error
	for i := range n {
		wg.Go(func() {
			_, err := c.ReplaceWidget(ctx(t), "race", widgetapi.ReplaceWidgetRequest{Description: fmt.Sprintf("writer %d", i)}, widgetapi.IfGeneration(w.Generation))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case widgetapi.IsPreconditionFailed(err):
				lost++
			default:
				other = append(other, err)
			}
		})
	}
	wg.Wait()
	if won != 1 || lost != n-1 || len(other) > 0 {
		t.Errorf("%d writers with the same ETag: %d won, %d got 412, other errors %v; want exactly one winner", n, won, lost, other)
	}
	got, err := c.GetWidget(ctx(t), "race")
	if err != nil {
		t.Fatal(err)
	}
	if got.Generation != 2 {
		t.Errorf("generation after one successful update: %d, want 2", got.Generation)
	}
}

func TestRestartDurability(t *testing.T) {
	dir := t.TempDir()
	start := func() (*apitest.Env, *widgetapi.Client) {
		env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
			o.DataDir = dir
			o.ProvisionDelay = 300 * time.Millisecond
		}))
		return env, env.Client(t, apitest.TokenA)
	}
	env, c := start()
	w, err := c.CreateWidget(ctx(t), widgetapi.CreateWidgetRequest{Name: "durable", Size: "large", Labels: map[string]string{"a": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateKey(ctx(t), "durable", widgetapi.CreateKeyRequest{Name: "k1"}); err != nil {
		t.Fatal(err)
	}
	feed, err := c.Changes(ctx(t), widgetapi.ChangesOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Stop while the widget is still Provisioning.
	env.Server.Shutdown()
	env.HTTP.Close()
	if err := env.Server.Close(); err != nil {
		t.Fatal(err)
	}

	_, c = start()
	got, err := c.GetWidget(ctx(t), "durable")
	if err != nil {
		t.Fatalf("widget lost across restart: %v", err)
	}
	if got.ID != w.ID || got.Size != "large" || got.Labels["a"] != "b" {
		t.Errorf("widget changed across restart: %+v", got)
	}
	if _, err := c.GetKey(ctx(t), "durable", "k1"); err != nil {
		t.Errorf("key lost across restart: %v", err)
	}
	// The pending transition resumes after restart.
	deadline := time.Now().Add(10 * time.Second)
	for got.State != widgetapi.StateReady && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		got, _ = c.GetWidget(ctx(t), "durable")
	}
	if got.State != widgetapi.StateReady {
		t.Errorf("provisioning did not resume after restart: state %s", got.State)
	}
	// The feed resumes where it was: old entries kept, new ones numbered after.
	again, err := c.Changes(ctx(t), widgetapi.ChangesOptions{After: 0})
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Changes) < len(feed.Changes) || again.Changes[len(feed.Changes)-1] != feed.Changes[len(feed.Changes)-1] {
		t.Errorf("feed history changed across restart")
	}
	mustNew, err := c.CreateWidget(ctx(t), widgetapi.CreateWidgetRequest{Name: "after"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Changes(ctx(t), widgetapi.ChangesOptions{After: feed.LatestSeq})
	if err != nil {
		t.Fatal(err)
	}
	var created int64
	for _, ch := range l.Changes {
		if ch.Type == widgetapi.ChangeWidgetCreated && ch.Widget == mustNew.Name {
			created = ch.Seq
		}
	}
	if created <= feed.LatestSeq {
		t.Errorf("post-restart change has seq %d, want > %d (sequence must survive restarts)", created, feed.LatestSeq)
	}
}

func TestStateMachineTiming(t *testing.T) {
	const delay = 150 * time.Millisecond
	env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
		o.ProvisionDelay = delay
		o.ResizeDelay = delay
		o.FailingRegions = []string{"us-fail-1"}
	}))
	c := env.Client(t, apitest.TokenA)
	w, err := c.CreateWidget(ctx(t), widgetapi.CreateWidgetRequest{Name: "timed"})
	if err != nil {
		t.Fatal(err)
	}
	if w.State != widgetapi.StateProvisioning || w.Endpoint != "" {
		t.Errorf("new widget: state %s endpoint %q, want Provisioning and no endpoint", w.State, w.Endpoint)
	}
	ready := wait(t, c, "timed", widgetapi.StateReady)
	// Lower bounds only: the machine may be slow, never early.
	if d := ready.UpdatedAt.Sub(ready.CreatedAt); d < delay {
		t.Errorf("became Ready after %s, want at least the provision delay %s", d, delay)
	}
	r, err := c.PatchWidget(ctx(t), "timed", widgetapi.PatchWidgetRequest{Size: ptr("medium")})
	if err != nil {
		t.Fatal(err)
	}
	if r.State != widgetapi.StateResizing {
		t.Errorf("after size change: %s, want Resizing", r.State)
	}
	resized := wait(t, c, "timed", widgetapi.StateReady)
	if d := resized.UpdatedAt.Sub(r.UpdatedAt); d < delay {
		t.Errorf("resize finished after %s, want at least %s", d, delay)
	}

	if _, err := c.CreateWidget(ctx(t), widgetapi.CreateWidgetRequest{Name: "doomed", Region: "us-fail-1"}); err != nil {
		t.Fatal(err)
	}
	failed := wait(t, c, "doomed", widgetapi.StateFailed)
	if !strings.Contains(failed.Message, "us-fail-1") || failed.Endpoint != "" {
		t.Errorf("failed widget: message %q endpoint %q; want a message naming the region and no endpoint", failed.Message, failed.Endpoint)
	}
}

func wait(t *testing.T, c *widgetapi.Client, name string, want widgetapi.State) *widgetapi.Widget {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		w, err := c.GetWidget(ctx(t), name)
		if err != nil {
			t.Fatal(err)
		}
		if w.State == want {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("widget %s is %s, want %s", name, w.State, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ptr[T any](v T) *T { return &v }

func TestAccessLogHasNoToken(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), nil))
	env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) { o.Logger = log }))
	c := env.Client(t, apitest.TokenA)
	if _, err := c.CreateWidget(ctx(t), widgetapi.CreateWidgetRequest{Name: "logged"}); err != nil {
		t.Fatal(err)
	}
	k, err := c.CreateKey(ctx(t), "logged", widgetapi.CreateKeyRequest{Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = env.Client(t, "wrong-token-value").GetWidget(ctx(t), "logged")
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	for _, secret := range []string{apitest.TokenA, "wrong-token-value", k.Secret} {
		if strings.Contains(out, secret) {
			t.Errorf("access log contains a secret")
		}
	}
	if !strings.Contains(out, "project="+apitest.ProjectA) || !strings.Contains(out, "status=201") {
		t.Errorf("access log lacks project or status:\n%s", out)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestShutdownReleasesLongPolls(t *testing.T) {
	env := apitest.Start(t)
	c := env.Client(t, apitest.TokenA)
	done := make(chan error, 1)
	go func() {
		_, err := c.Changes(context.Background(), widgetapi.ChangesOptions{After: 0, Wait: time.Minute})
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	env.Server.Shutdown()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("released long poll: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown did not release a long poll")
	}
}

func TestLoadTokens(t *testing.T) {
	cases := map[string]struct {
		reason  string
		content string
		want    map[string]string
		wantErr bool
	}{
		"Valid":     {"comments and blank lines are skipped", "# tokens\n\nt1 p1\nt2  p2\n", map[string]string{"t1": "p1", "t2": "p2"}, false},
		"BadLine":   {"a line without a project is an error", "t1\n", nil, true},
		"Duplicate": {"a repeated token is an error", "t1 p1\nt1 p2\n", nil, true},
		"Empty":     {"a file without tokens is an error", "# none\n", nil, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := t.TempDir() + "/tokens"
			if err := writeFile(path, tc.content); err != nil {
				t.Fatal(err)
			}
			got, err := server.LoadTokens(path)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s: err %v, wantErr %v", tc.reason, err, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "t1") {
				t.Errorf("%s: error reveals a token: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestMetricsByRoute: request metrics name the API route, so load can be
// broken down by operation.
func TestMetricsByRoute(t *testing.T) {
	env := apitest.Start(t)
	c := env.Client(t, apitest.TokenA)
	if _, err := c.CreateWidget(ctx(t), widgetapi.CreateWidgetRequest{Name: "m"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetWidget(ctx(t), "m"); err != nil {
		t.Fatal(err)
	}
	mfs, err := env.Server.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	routes := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "widgetapi_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "route" {
					routes[l.GetValue()] = true
				}
			}
		}
	}
	for _, want := range []string{"POST /v1/widgets", "GET /v1/widgets/{name}"} {
		if !routes[want] {
			t.Errorf("no request metric for route %q; have %v", want, routes)
		}
	}
}
