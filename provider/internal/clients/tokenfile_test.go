package clients

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"

	commonv1alpha1 "github.com/widgetco/crossplane-widget/apis/common/v1alpha1"
	nsv1alpha1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1alpha1"
	"github.com/widgetco/crossplane-widget/provider/internal/fakes"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken"
	"github.com/widgetco/crossplane-widget/widgetapi/server/idtoken/idtokentest"
)

var fileNow = time.Unix(1_900_000_000, 0)

// jwtExpiring returns an (unsigned, for the provider never verifies) JWT
// that expires at exp.
func jwtExpiring(exp time.Time) string {
	enc := func(v any) string {
		b, _ := json.Marshal(v)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	return enc(map[string]string{"alg": "RS256"}) + "." + enc(map[string]any{"sub": "system:serviceaccount:crossplane-system:provider-widget", "exp": exp.Unix()}) + ".c2ln"
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// projected lays out dir like the kubelet lays out a projected volume:
// token -> ..data/token, ..data -> ..<version>, and swaps ..data
// atomically to rotate.
func projected(t *testing.T, dir, version, token string) {
	t.Helper()
	write(t, filepath.Join(dir, "..", filepath.Base(dir), ".."+version, "token"), token)
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(".."+version, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "token")); os.IsNotExist(err) {
		if err := os.Symlink(filepath.Join("..data", "token"), filepath.Join(dir, "token")); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTokenFile(t *testing.T) {
	valid := jwtExpiring(fileNow.Add(time.Hour))
	cases := map[string]struct {
		reason string
		setup  func(t *testing.T, dir, outside string) string // returns the path to read
		want   string                                         // the token; empty when an error is wanted
		errHas string
	}{
		"PlainToken": {
			reason: "A file holding a token, with the newline of `echo`.",
			setup: func(t *testing.T, dir, _ string) string {
				write(t, filepath.Join(dir, "token"), "static-token\n")
				return filepath.Join(dir, "token")
			},
			want: "static-token",
		},
		"ProjectedToken": {
			reason: "A projected ServiceAccount token: symbolic links inside the volume.",
			setup: func(t *testing.T, dir, _ string) string {
				projected(t, filepath.Join(dir, "serviceaccount"), "v1", valid)
				return filepath.Join(dir, "serviceaccount", "token")
			},
			want: valid,
		},
		"Expired": {
			reason: "A token whose exp has passed is never sent.",
			setup: func(t *testing.T, dir, _ string) string {
				write(t, filepath.Join(dir, "token"), jwtExpiring(fileNow.Add(-time.Second)))
				return filepath.Join(dir, "token")
			},
			errHas: "expired",
		},
		"OutsideTheDirectory": {
			reason: "The provider's own Kubernetes token, or any file outside the directory, is refused.",
			setup: func(t *testing.T, _, outside string) string {
				write(t, filepath.Join(outside, "token"), "kube-token")
				return filepath.Join(outside, "token")
			},
			errHas: "inside",
		},
		"DotDot": {
			reason: "A path that climbs out is not clean.",
			setup: func(t *testing.T, dir, outside string) string {
				write(t, filepath.Join(outside, "token"), "kube-token")
				return dir + "/../" + filepath.Base(outside) + "/token"
			},
			errHas: "clean absolute path",
		},
		"Relative": {
			reason: "A relative path is refused.",
			setup:  func(*testing.T, string, string) string { return "token" },
			errHas: "clean absolute path",
		},
		"LinkOutside": {
			reason: "A link inside the directory to a file outside it is refused.",
			setup: func(t *testing.T, dir, outside string) string {
				write(t, filepath.Join(outside, "token"), "kube-token")
				if err := os.Symlink(filepath.Join(outside, "token"), filepath.Join(dir, "token")); err != nil {
					t.Fatal(err)
				}
				return filepath.Join(dir, "token")
			},
			errHas: "links outside",
		},
		"Missing": {
			reason: "A missing file says where to mount the token.",
			setup:  func(_ *testing.T, dir, _ string) string { return filepath.Join(dir, "token") },
			errHas: "mount the token",
		},
		"Empty": {
			reason: "An empty file is an error.",
			setup: func(t *testing.T, dir, _ string) string {
				write(t, filepath.Join(dir, "token"), "\n")
				return filepath.Join(dir, "token")
			},
			errHas: "empty",
		},
		"TooLarge": {
			reason: "A file over MaxTokenBytes is refused, not held.",
			setup: func(t *testing.T, dir, _ string) string {
				write(t, filepath.Join(dir, "token"), strings.Repeat("x", MaxTokenBytes+1))
				return filepath.Join(dir, "token")
			},
			errHas: "more than 4096 bytes",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			dir, outside := filepath.Join(root, "widgetco.io"), filepath.Join(root, "kubernetes.io")
			for _, d := range []string{dir, outside} {
				if err := os.MkdirAll(d, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			path := tc.setup(t, dir, outside)
			f := newTokenFiles(dir)
			f.now = func() time.Time { return fileNow }
			got, err := f.get(path)
			if tc.errHas == "" {
				if err != nil || got != tc.want {
					t.Errorf("%s\nget(...): want the token, got %q, %v", tc.reason, got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("%s\nget(...): want an error containing %q, got %q, %v", tc.reason, tc.errHas, got, err)
			}
			if err != nil && (strings.Contains(err.Error(), "kube-token") || strings.Contains(err.Error(), "eyJ")) {
				t.Errorf("%s\nthe error repeats the file's content: %v", tc.reason, err)
			}
		})
	}
}

// TestTokenFileRotation: a rotated token is used within TokenTTL, and a
// token is never used past its exp, however recently it was read.
func TestTokenFileRotation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "widgetco.io")
	sa := filepath.Join(dir, "serviceaccount")
	path := filepath.Join(sa, "token")
	now := fileNow
	f := newTokenFiles(dir)
	f.now = func() time.Time { return now }
	get := func() string {
		tok, err := f.get(path)
		if err != nil {
			return "error: " + err.Error()
		}
		return tok
	}
	first := jwtExpiring(now.Add(time.Hour))
	second := jwtExpiring(now.Add(2 * time.Hour))
	third := jwtExpiring(now.Add(3 * time.Hour))

	var got []string
	projected(t, sa, "v1", first)
	got = append(got, get())
	projected(t, sa, "v2", second) // the kubelet rotates
	now = now.Add(TokenTTL / 2)
	got = append(got, get()) // still cached
	now = now.Add(TokenTTL / 2)
	got = append(got, get()) // re-read
	now = now.Add(TokenTTL)
	short := jwtExpiring(now.Add(3 * time.Second))
	projected(t, sa, "v3", short)
	got = append(got, get()) // read; cached only until its exp, 3s on
	now = now.Add(3 * time.Second)
	got = append(got, get()[:len("error: ")]) // expired and not rotated
	projected(t, sa, "v4", third)
	got = append(got, get())

	want := []string{first, first, second, short, "error: ", third}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tokens read over rotations, -want, +got:\n%s", diff)
	}
}

// TestResolveTokenFile: a ClusterProviderConfig reads its token from a file
// and keeps its connection key across rotations; a namespaced
// ProviderConfig cannot name a file.
func TestResolveTokenFile(t *testing.T) {
	env := apitest.Start(t)
	dir := filepath.Join(t.TempDir(), "widgetco.io")
	path := filepath.Join(dir, "serviceaccount", "token")
	write(t, path, apitest.TokenA)
	fromFile := func(s *commonv1alpha1.ProviderConfigSpec) {
		s.Credentials = commonv1alpha1.ProviderCredentials{Source: xpv2.CredentialsSourceFilesystem, Fs: &commonv1alpha1.TokenFileSelector{Path: path}}
	}
	now := fileNow
	r := NewResolver(fakes.NewKube(clusterPC(env.URL, fromFile)), WithTokenFileDir(dir))
	r.files.now = func() time.Time { return now }
	cpcRef := &xpv2.ProviderConfigReference{Kind: nsv1alpha1.ClusterProviderConfigKind, Name: testPC}

	c, err := r.Resolve(t.Context(), nsMR(cpcRef))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.ListWidgets(t.Context(), widgetapi.ListWidgetsOptions{}); err != nil {
		t.Errorf("the client with the file's token cannot call the Widget API: %v", err)
	}
	write(t, path, apitest.TokenB)
	now = now.Add(TokenTTL)
	rotated, err := r.Resolve(t.Context(), nsMR(cpcRef))
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Key != c.Key {
		t.Error("rotating the token in the file changed the connection key")
	}
	if secret := connectionKey(env.URL, path, ""); secret == c.Key {
		t.Error("a Secret whose token is the file's path shares the file's connection key")
	}
	if _, err := rotated.Client.ListWidgets(t.Context(), widgetapi.ListWidgetsOptions{}); err != nil {
		t.Errorf("the client with the rotated token cannot call the Widget API: %v", err)
	}

	pcRef := &xpv2.ProviderConfigReference{Kind: nsv1alpha1.ProviderConfigKind, Name: testPC}
	tenant := nsPC(env.URL, func(s *commonv1alpha1.LocalProviderConfigSpec) {
		s.Credentials.Source = xpv2.CredentialsSourceFilesystem
	})
	r = NewResolver(fakes.NewKube(tenant), WithTokenFileDir(dir))
	if _, err := r.Resolve(t.Context(), nsMR(pcRef)); err == nil || !strings.Contains(err.Error(), "not supported in a namespaced ProviderConfig") {
		t.Errorf("a namespaced ProviderConfig with source Filesystem: want an error saying it is not supported, got %v", err)
	}
}

// TestResolveIdentityTokenFile: the provider sends the identity token in
// its file, and a Widget API that trusts the token's issuer acts in the
// project the token's subject maps to.
func TestResolveIdentityTokenFile(t *testing.T) {
	const issuer = "https://cluster.test"
	key := idtokentest.RSA(t, "sa-key")
	cfg := &idtoken.Config{Issuers: []idtoken.Issuer{{
		Issuer:   issuer,
		Audience: "widget-api",
		Keys:     idtoken.Keys{JWKSURL: issuer + "/openid/v1/jwks"},
		Subjects: []idtoken.Subject{{Subject: "system:serviceaccount:crossplane-system:provider-widget", Project: apitest.ProjectB, Role: idtoken.RoleEditor}},
	}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	jwks := idtokentest.JWKS(key)
	env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
		o.IdentityTokens = cfg
		o.IdentityTokenOptions.Fetchers = map[string]idtoken.Fetcher{issuer: idtoken.FetcherFunc(func(context.Context) ([]byte, error) { return jwks, nil })}
	}))
	dir := filepath.Join(t.TempDir(), "widgetco.io")
	sa := filepath.Join(dir, "serviceaccount")
	now := time.Now()
	projected(t, sa, "v1", idtokentest.Sign(t, key, map[string]any{
		"iss": issuer, "aud": []string{"widget-api"}, "sub": "system:serviceaccount:crossplane-system:provider-widget",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}))
	spec := func(s *commonv1alpha1.ProviderConfigSpec) {
		s.Credentials = commonv1alpha1.ProviderCredentials{Source: xpv2.CredentialsSourceFilesystem, Fs: &commonv1alpha1.TokenFileSelector{Path: filepath.Join(sa, "token")}}
	}
	r := NewResolver(fakes.NewKube(clusterPC(env.URL, spec)), WithTokenFileDir(dir))
	c, err := r.Resolve(t.Context(), nsMR(&xpv2.ProviderConfigReference{Kind: nsv1alpha1.ClusterProviderConfigKind, Name: testPC}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CreateWidget(t.Context(), widgetapi.CreateWidgetRequest{Name: "by-identity"}); err != nil {
		t.Fatalf("create with the identity token: %v", err)
	}
	if _, err := env.Client(t, apitest.TokenB).GetWidget(t.Context(), "by-identity"); err != nil {
		t.Errorf("the widget is not in project-b, where the subject maps: %v", err)
	}
}

// TestRotatedTokenFileIsNotPaused: a token file keeps its connection key
// across rotations, but a pause is per token: once the kubelet rotates a
// refused token, the new one is sent at once.
func TestRotatedTokenFileIsNotPaused(t *testing.T) {
	env := apitest.Start(t)
	dir := filepath.Join(t.TempDir(), "widgetco.io")
	path := filepath.Join(dir, "serviceaccount", "token")
	write(t, path, "expired-token")
	fromFile := func(s *commonv1alpha1.ProviderConfigSpec) {
		s.Credentials = commonv1alpha1.ProviderCredentials{Source: xpv2.CredentialsSourceFilesystem, Fs: &commonv1alpha1.TokenFileSelector{Path: path}}
	}
	now := fileNow
	r := NewResolver(fakes.NewKube(clusterPC(env.URL, fromFile)), WithTokenFileDir(dir), WithPauses(NewPauses(time.Hour, time.Hour)))
	r.files.now = func() time.Time { return now }
	cpcRef := &xpv2.ProviderConfigReference{Kind: nsv1alpha1.ClusterProviderConfigKind, Name: testPC}

	c, err := r.Resolve(t.Context(), nsMR(cpcRef))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.ListWidgets(t.Context(), widgetapi.ListWidgetsOptions{}); !widgetapi.IsUnauthorized(err) {
		t.Fatalf("ListWidgets(...) with the expired token: want 401, got %v", err)
	}
	if _, err := c.Client.ListWidgets(t.Context(), widgetapi.ListWidgetsOptions{}); !IsPaused(err) {
		t.Errorf("ListWidgets(...) with the refused token again: want a *PausedError, got %v", err)
	}
	write(t, path, apitest.TokenA)
	now = now.Add(TokenTTL)
	rotated, err := r.Resolve(t.Context(), nsMR(cpcRef))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rotated.Paused(); err != nil || rotated.Key != c.Key {
		t.Errorf("after the rotation: want the same connection key (%t) and no pause, got %v", rotated.Key == c.Key, err)
	}
	if _, err := rotated.Client.ListWidgets(t.Context(), widgetapi.ListWidgetsOptions{}); err != nil {
		t.Errorf("ListWidgets(...) with the rotated token: %v", err)
	}
}
