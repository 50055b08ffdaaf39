package mrsetup

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// fakeFeed reports the keys in changed as changed, once each.
type fakeFeed struct {
	changed map[string]bool
}

func (f *fakeFeed) Source(string) source.Source { return nil }

func (f *fakeFeed) Forget(string, types.NamespacedName) {}

func (f *fakeFeed) Changed(kind string, key types.NamespacedName) bool {
	k := kind + "/" + key.String()
	ok := f.changed[k]
	delete(f.changed, k)
	return ok
}

// counting counts the requests it reconciles.
type counting struct{ got []string }

func (c *counting) Reconcile(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
	c.got = append(c.got, req.String())
	return reconcile.Result{}, nil
}

func TestDriftFirst(t *testing.T) {
	a := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "a"}}
	b := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team-a", Name: "b"}}
	cases := map[string]struct {
		reason      string
		changed     map[string]bool
		requests    []reconcile.Request
		wantDirect  []string
		wantLimited []string
	}{
		"Changed": {
			reason:      "A request the feed made because the widget changed skips the rate limit; the next request for the same resource does not.",
			changed:     map[string]bool{"Widget.widget.m.widgetco.io/team-a/a": true},
			requests:    []reconcile.Request{a, a},
			wantDirect:  []string{"team-a/a"},
			wantLimited: []string{"team-a/a"},
		},
		"NotChanged": {
			reason:      "Polls, watch events and new resources go through the rate limit.",
			changed:     map[string]bool{},
			requests:    []reconcile.Request{a, b},
			wantLimited: []string{"team-a/a", "team-a/b"},
		},
		"OtherKind": {
			reason:      "A change recorded for another kind's resource of the same name does not skip this kind's limit.",
			changed:     map[string]bool{"WidgetKey.widget.m.widgetco.io/team-a/a": true},
			requests:    []reconcile.Request{a},
			wantLimited: []string{"team-a/a"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			direct, limited := &counting{}, &counting{}
			d := &driftFirst{kind: "Widget.widget.m.widgetco.io", feed: &fakeFeed{changed: tc.changed}, direct: direct, limited: limited}
			for _, r := range tc.requests {
				if _, err := d.Reconcile(context.Background(), r); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(tc.wantDirect, direct.got); diff != "" {
				t.Errorf("%s\nreconciled without the rate limit: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantLimited, limited.got); diff != "" {
				t.Errorf("%s\nreconciled through the rate limit: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
