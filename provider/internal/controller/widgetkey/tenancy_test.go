package widgetkey

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/event"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	xpv2 "github.com/crossplane/crossplane/apis/v2/core/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
	"github.com/widgetco/crossplane-widget/provider/internal/fakes"
	"github.com/widgetco/crossplane-widget/provider/internal/ownership"
	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
)

// Ownership labels of widgets and keys in these tests. The resource under
// test is a WidgetKey in namespace team-a (newNamespaced) or the
// cluster-scoped WidgetKey ci (newCluster).
var (
	widgetOfTeamA   = map[string]string{ownership.OwnerLabel: "n_team-a.w"}
	widgetOfTeamB   = map[string]string{ownership.OwnerLabel: "n_team-b.w"}
	widgetOfCluster = map[string]string{ownership.OwnerLabel: "c_w"}
	// A long namespace cannot be read back from the marker, only from the
	// namespace label.
	widgetOfTeamALongMarker = map[string]string{ownership.OwnerLabel: "n_team-a-with-a-very-long-name-that-is-cut-0123456-1a2b3c4d5e", ownership.NamespaceLabel: "team-a"}
	keyOfTeamA              = map[string]string{ownership.OwnerLabel: "n_team-a.ci"}
	keyOfTeamAOther         = map[string]string{ownership.OwnerLabel: "n_team-a.other"}
	keyOfTeamB              = map[string]string{ownership.OwnerLabel: "n_team-b.ci"}
	// team-b's widget with a namespace label that claims team-a: forged.
	widgetOfTeamBClaimingTeamA = map[string]string{ownership.OwnerLabel: "n_team-b.w", ownership.NamespaceLabel: "team-a"}
	// This WidgetKey's own marker with a namespace label of team-b: forged.
	keyOfTeamAClaimingTeamB = map[string]string{ownership.OwnerLabel: "n_team-a.ci", ownership.NamespaceLabel: "team-b"}
)

// alpha and bravo are two 55-character namespaces that share their first 50
// characters (finding M4 of issue 42). Provider versions before 128-bit
// markers gave their resources markers with the same 52-character head and
// a 40-bit hash: the legacy markers below.
const (
	alpha = "team-payments-europe-west-production-cluster-00001alpha"
	bravo = "team-payments-europe-west-production-cluster-00001bravo"
)

var (
	// widgetOfAlphaLegacy is marked by alpha/w-owner-of-widget.
	widgetOfAlphaLegacy = map[string]string{ownership.OwnerLabel: "n_team-payments-europe-west-production-cluster-00001-ec97e3e9e0", ownership.NamespaceLabel: alpha}
	// keyOfAlphaLegacy was created by the WidgetKey alpha/web-frontend-key.
	keyOfAlphaLegacy = map[string]string{ownership.OwnerLabel: "n_team-payments-europe-west-production-cluster-00001-25dd0cf4e3", ownership.NamespaceLabel: alpha}
	// keyOfAlphaCollidingWithBravo is a key of alpha whose legacy marker
	// equals that of bravo/probe-000001: what a search of 2^40 names of
	// bravo can find.
	keyOfAlphaCollidingWithBravo = map[string]string{ownership.OwnerLabel: "n_team-payments-europe-west-production-cluster-00001-b89f23b543", ownership.NamespaceLabel: alpha}
)

// movedTo puts the WidgetKey in namespace ns under name.
func movedTo(ns, name string) mod {
	return func(mg commonv1beta1.WidgetKeyResource) {
		mg.SetNamespace(ns)
		mg.SetName(name)
	}
}

// The events that say why deleting a WidgetKey of namespace team-a revoked
// nothing. A key on team-b's widget is not even confirmed to exist.
var outOfReachNotRevokedEvent = event.Warning(ReasonNotRevoked, errors.New("widget w is not managed by a Widget in namespace team-a, "+
	"and no key of it that this WidgetKey created was found: revoked none"))

func notOursEvent(key string) event.Event {
	return event.Warning(ReasonNotRevoked, errors.New("key "+key+" of widget w does not carry this WidgetKey's owner marker "+
		"(widgetco.io/owner=n_team-a.ci), so this WidgetKey did not create it: left the key in the Widget API; revoke it where it was created if it should go"))
}

// TestTenancy tries, as a hostile tenant in namespace team-a would, every
// way a WidgetKey could reach another namespace's widgets and keys, and
// checks what the Widget API saw: which calls were made, and that nothing
// was created, revoked or copied into status.
func TestTenancy(t *testing.T) {
	type want struct {
		err      bool
		mentions []string
		// exists is what Observe reports (Delete runs only if it is true).
		exists bool
		// status says status.atProvider shows the key.
		status bool
		// calls are the Widget API operations Observe, then Create or
		// Delete when the reconciler would call them, made.
		calls []string
		// keys are the names of the widget's keys afterwards.
		keys []string
		// createFails, when set, is what the error of the Create that
		// follows Observe mentions.
		createFails []string
		// events are the events recorded.
		events []event.Event
	}
	cases := map[string]struct {
		reason  string
		cluster bool
		widget  map[string]string
		// key is the labels of a key seeded under the resource's external
		// name; nil for none.
		key     map[string]string
		mods    []mod
		deleted bool
		// recorded records the seeded key's ID in status, as Observe does
		// once it has seen the key - or as anyone who may edit the
		// resource's status can.
		recorded bool
		want     want
	}{
		"KeyOnAnotherNamespacesWidget": {
			reason: "A key for team-b's widget is refused before the key is read, and none is created.",
			widget: widgetOfTeamB,
			mods:   []mod{defaultName(), forWidget(widgetName)},
			want: want{err: true, mentions: []string{"widget w is not managed by a Widget in namespace team-a", "widgetNameRef"},
				calls: []string{"get widget"}},
		},
		"KeyOnUnownedWidget": {
			reason: "A widget no resource manages (e.g. only imported with Observe) is out of reach: no key is created on it.",
			widget: map[string]string{},
			mods:   []mod{defaultName(), forWidget(widgetName)},
			want:   want{err: true, mentions: []string{"an Observe-only import does not count"}, calls: []string{"get widget"}},
		},
		"KeyOnClusterScopedWidget": {
			reason: "A widget a cluster-scoped resource (a legacy claim's) manages is out of a namespace's reach.",
			widget: widgetOfCluster,
			mods:   []mod{defaultName(), forWidget(widgetName)},
			want:   want{err: true, calls: []string{"get widget"}},
		},
		"RevokeAnotherNamespacesKey": {
			reason:  "Deleting a WidgetKey whose external name is team-b's key on team-b's widget revokes nothing and does not even read the key.",
			widget:  widgetOfTeamB,
			key:     keyOfTeamB,
			mods:    []mod{explicitName("victim"), forWidget(widgetName)},
			deleted: true,
			want:    want{calls: []string{"get widget"}, keys: []string{"victim"}, events: []event.Event{outOfReachNotRevokedEvent}},
		},
		"ImportAnotherNamespacesKey": {
			reason: "Naming team-b's key on team-b's widget is refused before the key is read.",
			widget: widgetOfTeamB,
			key:    keyOfTeamB,
			mods:   []mod{explicitName("victim"), forWidget(widgetName)},
			want:   want{err: true, calls: []string{"get widget"}, keys: []string{"victim"}},
		},
		"KeyNotCreatedByThisResource": {
			reason: "A key of our namespace's widget that another resource created is not ours to manage: refused, and its details stay out of status.",
			widget: widgetOfTeamA,
			key:    keyOfTeamAOther,
			mods:   []mod{explicitName("shared-key"), forWidget(widgetName)},
			want: want{err: true, mentions: []string{"shared-key", "did not create"},
				calls: []string{"get widget", "get key"}, keys: []string{"shared-key"}},
		},
		"KeyNotCreatedByThisResourceWhileDeleting": {
			reason:  "Deleting a WidgetKey never revokes a key it did not create, and says so.",
			widget:  widgetOfTeamA,
			key:     keyOfTeamAOther,
			mods:    []mod{explicitName("shared-key"), forWidget(widgetName)},
			deleted: true,
			want:    want{calls: []string{"get widget", "get key"}, keys: []string{"shared-key"}, events: []event.Event{notOursEvent("shared-key")}},
		},
		"UnlabelledKeyWhileDeleting": {
			reason:  "A key made outside Crossplane is not revoked by a WidgetKey that names it.",
			widget:  widgetOfTeamA,
			key:     map[string]string{},
			mods:    []mod{explicitName("manual"), forWidget(widgetName)},
			deleted: true,
			want:    want{calls: []string{"get widget", "get key"}, keys: []string{"manual"}, events: []event.Event{notOursEvent("manual")}},
		},
		"AnotherNamespacesKeyByRecordedID": {
			reason:   "A WidgetKey whose status was edited to record team-b's key's ID (Crossplane's edit role may write status) revokes nothing when deleted: only a key that carries this resource's owner marker is its own.",
			widget:   widgetOfTeamB,
			key:      keyOfTeamB,
			mods:     []mod{explicitName("victim"), forWidget(widgetName)},
			deleted:  true,
			recorded: true,
			want:     want{calls: []string{"get widget", "get key"}, keys: []string{"victim"}, events: []event.Event{outOfReachNotRevokedEvent}},
		},
		"MissingKeyOnAnotherNamespacesWidgetByRecordedID": {
			reason:  "The same, when team-b's widget has no key of that name: the same event, so the tenant learns nothing of team-b's keys.",
			widget:  widgetOfTeamB,
			mods:    []mod{explicitName("victim"), forWidget(widgetName), recordedID("k-0123456789abcdef")},
			deleted: true,
			want:    want{calls: []string{"get widget", "get key"}, events: []event.Event{outOfReachNotRevokedEvent}},
		},
		"UnlabelledKeyByRecordedIDWhileDeleting": {
			reason:   "A key without an owner marker whose ID the status records is not revoked: the status is no proof of ownership.",
			widget:   widgetOfTeamA,
			key:      map[string]string{},
			mods:     []mod{explicitName("manual"), forWidget(widgetName)},
			deleted:  true,
			recorded: true,
			want:     want{calls: []string{"get widget", "get key"}, keys: []string{"manual"}, events: []event.Event{notOursEvent("manual")}},
		},
		"KeyNotCreatedByThisResourceByRecordedID": {
			reason:   "Another resource's key whose ID the status records is not managed by this one: refused, and its details stay out of status.",
			widget:   widgetOfTeamA,
			key:      keyOfTeamAOther,
			mods:     []mod{explicitName("shared-key"), forWidget(widgetName)},
			recorded: true,
			want: want{err: true, mentions: []string{"shared-key", "did not create"},
				calls: []string{"get widget", "get key"}, keys: []string{"shared-key"}},
		},
		"OwnKeyOnWidgetNowElsewhere": {
			reason:   "Our own key on a widget that another namespace now manages is still revoked on delete - it only takes access away - and nothing of the widget is read into status.",
			widget:   widgetOfTeamB,
			key:      keyOfTeamA,
			mods:     []mod{defaultName(), forWidget(widgetName)},
			deleted:  true,
			recorded: true,
			want:     want{exists: true, calls: []string{"get widget", "get key", "delete key"}},
		},
		"OwnNamespace": {
			reason: "A key of a widget that another Widget of the same namespace manages is created, carrying our marker.",
			widget: widgetOfTeamA,
			mods:   []mod{defaultName(), forWidget(widgetName)},
			want:   want{calls: []string{"get widget", "get key", "get widget", "create key"}, keys: []string{"{key}"}},
		},
		"NeverCreatedOwnNamespace": {
			reason: "A new key under the provider's name is created without reading it first; its widget is read again by Create, for the tenancy check that creates a key (Observe's read may come from memory).",
			widget: widgetOfTeamA,
			mods:   []mod{chosenName(), forWidget(widgetName)},
			want:   want{calls: []string{"get widget", "get widget", "create key"}, keys: []string{"{key}"}},
		},
		"NeverCreatedOnAnotherNamespacesWidget": {
			reason: "A new key for team-b's widget is refused as any other, and none is created.",
			widget: widgetOfTeamB,
			mods:   []mod{chosenName(), forWidget(widgetName)},
			want: want{err: true, mentions: []string{"widget w is not managed by a Widget in namespace team-a"},
				calls: []string{"get widget"}},
		},
		"NeverCreatedNameTaken": {
			reason: "A key of team-b under the name a new key would take is not read and not touched: the create fails as already existing, and the retry reads the key.",
			widget: widgetOfTeamA,
			key:    keyOfTeamB,
			mods:   []mod{chosenName(), forWidget(widgetName)},
			want:   want{createFails: []string{"already has a key named", "retrying"}, calls: []string{"get widget", "get widget", "create key"}, keys: []string{"{key}"}},
		},
		"OwnNamespaceLongMarker": {
			reason: "A widget whose marker was shortened is placed by its namespace label.",
			widget: widgetOfTeamALongMarker,
			mods:   []mod{defaultName(), forWidget(widgetName)},
			want:   want{calls: []string{"get widget", "get key", "get widget", "create key"}, keys: []string{"{key}"}},
		},
		"KeyOnWidgetWithForgedNamespace": {
			reason: "A widget whose namespace label contradicts its marker names no namespace: out of reach, and no key is created.",
			widget: widgetOfTeamBClaimingTeamA,
			mods:   []mod{defaultName(), forWidget(widgetName)},
			want:   want{err: true, mentions: []string{"widget w is not managed by a Widget in namespace team-a"}, calls: []string{"get widget"}},
		},
		"KeyWithForgedNamespaceWhileDeleting": {
			reason:   "A key carrying this WidgetKey's marker under another namespace's label did not come from this WidgetKey: deleting it revokes nothing.",
			widget:   widgetOfTeamA,
			key:      keyOfTeamAClaimingTeamB,
			mods:     []mod{explicitName("forged"), forWidget(widgetName)},
			deleted:  true,
			recorded: true,
			want:     want{calls: []string{"get widget", "get key"}, keys: []string{"forged"}, events: []event.Event{notOursEvent("forged")}},
		},
		"CollidingLegacyKeyMarkerWhileDeleting": {
			reason:   "A WidgetKey of bravo whose legacy marker equals that of alpha's key does not revoke it: the key's namespace is alpha.",
			widget:   widgetOfAlphaLegacy,
			key:      keyOfAlphaCollidingWithBravo,
			mods:     []mod{movedTo(bravo, "probe-000001"), explicitName("victim"), forWidget(widgetName)},
			deleted:  true,
			recorded: true,
			want: want{calls: []string{"get widget", "get key"}, keys: []string{"victim"}, events: []event.Event{event.Warning(ReasonNotRevoked, errors.New("widget w is not managed by a Widget in namespace "+bravo+", "+
				"and no key of it that this WidgetKey created was found: revoked none"))}},
		},
		"OwnLegacyKey": {
			reason: "A key an older provider created for this WidgetKey, marked in the old format, is still its own.",
			widget: widgetOfAlphaLegacy,
			key:    keyOfAlphaLegacy,
			mods:   []mod{movedTo(alpha, "web-frontend-key"), explicitName("old-key"), forWidget(widgetName)},
			want:   want{exists: true, status: true, calls: []string{"get widget", "get key"}, keys: []string{"old-key"}},
		},
		"OwnLegacyKeyWhileDeleting": {
			reason:   "Deleting that WidgetKey revokes that key.",
			widget:   widgetOfAlphaLegacy,
			key:      keyOfAlphaLegacy,
			mods:     []mod{movedTo(alpha, "web-frontend-key"), explicitName("old-key"), forWidget(widgetName)},
			deleted:  true,
			recorded: true,
			want:     want{exists: true, status: true, calls: []string{"get widget", "get key", "delete key"}},
		},
		"OwnKey": {
			reason: "Our own key of our namespace's widget is observed as usual.",
			widget: widgetOfTeamA,
			key:    keyOfTeamA,
			mods:   []mod{defaultName(), forWidget(widgetName)},
			want:   want{exists: true, status: true, calls: []string{"get widget", "get key"}, keys: []string{"{key}"}},
		},
		"ClusterScopedReachesAnyWidget": {
			reason:  "A cluster-scoped WidgetKey (the platform team's, or a legacy claim's) is not confined to a namespace.",
			cluster: true,
			widget:  widgetOfTeamB,
			mods:    []mod{defaultName(), forWidget(widgetName)},
			want:    want{calls: []string{"get widget", "get key", "get widget", "create key"}, keys: []string{"{key}"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			env := apitest.Start(t)
			seedAPI := env.Client(t, apitest.TokenA)
			api, calls := recordingClient(t, env)
			var mg commonv1beta1.WidgetKeyResource = newNamespaced()
			if tc.cluster {
				mg = newCluster()
			}
			for _, m := range tc.mods {
				m(mg)
			}
			if tc.deleted {
				deleted()(mg)
			}
			keyName := meta.GetExternalName(mg)
			seedWidget(t, seedAPI, widgetapi.StateReady, tc.widget)
			if tc.key != nil {
				k := seedKey(t, seedAPI, keyName, "", tc.key)
				if tc.recorded {
					mg.SetWidgetKeyObservation(commonv1beta1.WidgetKeyObservation{ID: k.ID})
				}
			}

			rec := &fakes.Recorder{}
			e := &external[commonv1beta1.WidgetKeyResource]{api: api,
				cache: reader(secretWithKey, nil), live: reader(secretWithKey, nil), record: rec}
			o, err := e.Observe(t.Context(), mg)
			if (err != nil) != tc.want.err {
				t.Fatalf("%s\nObserve(...): want error %t, got %v", tc.reason, tc.want.err, err)
			}
			for _, f := range tc.want.mentions {
				if !strings.Contains(err.Error(), f) {
					t.Errorf("%s\nObserve(...): error %q does not mention %q", tc.reason, err, f)
				}
			}
			if o.ResourceExists != tc.want.exists {
				t.Errorf("%s\nObserve(...).ResourceExists: want %t, got %t", tc.reason, tc.want.exists, o.ResourceExists)
			}
			// What the managed reconciler would do next.
			switch {
			case err != nil:
			case tc.deleted && o.ResourceExists:
				if _, err := e.Delete(t.Context(), mg); err != nil {
					t.Fatalf("%s\nDelete(...): %v", tc.reason, err)
				}
			case !tc.deleted && !o.ResourceExists:
				_, cerr := e.Create(t.Context(), mg)
				switch {
				case cerr != nil && len(tc.want.createFails) == 0:
					t.Fatalf("%s\nCreate(...): %v", tc.reason, cerr)
				case cerr == nil && len(tc.want.createFails) > 0:
					t.Errorf("%s\nCreate(...): want an error mentioning %q, got none", tc.reason, tc.want.createFails)
				}
				for _, f := range tc.want.createFails {
					if cerr != nil && !strings.Contains(cerr.Error(), f) {
						t.Errorf("%s\nCreate(...): error %q does not mention %q", tc.reason, cerr, f)
					}
				}
			}
			if diff := cmp.Diff(tc.want.calls, calls()); diff != "" {
				t.Errorf("%s\nWidget API calls: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.events, rec.Events()); diff != "" {
				t.Errorf("%s\nevents: -want, +got:\n%s", tc.reason, diff)
			}
			// A key is shown when Observe filled in what only reading it
			// gives (its widget); a recorded ID alone is what the test set.
			if got := mg.GetWidgetKeyObservation().WidgetName != ""; got != tc.want.status {
				t.Errorf("%s\nstatus.atProvider shows a key: want %t, got %t (%+v)", tc.reason, tc.want.status, got, *mg.GetWidgetKeyObservation())
			}
			if err != nil && mg.GetCondition(xpv2.TypeReady) != noReady {
				t.Errorf("%s\na refused resource got a Ready condition: %+v", tc.reason, mg.GetCondition(xpv2.TypeReady))
			}
			list, lerr := seedAPI.ListKeys(t.Context(), widgetName)
			if lerr != nil {
				t.Fatal(lerr)
			}
			var got []string
			for _, k := range list.Items {
				got = append(got, k.Name)
			}
			var wantKeys []string
			for _, k := range tc.want.keys {
				wantKeys = append(wantKeys, strings.ReplaceAll(k, "{key}", keyName))
			}
			if diff := cmp.Diff(wantKeys, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nkeys of widget %s afterwards: -want, +got:\n%s", tc.reason, widgetName, diff)
			}
		})
	}
}

// rememberedWidget is a RecentReader whose memory says widget w has labels.
type rememberedWidget struct{ labels map[string]string }

func (r rememberedWidget) RecentWidget(_ context.Context, name string) (*widgetapi.Widget, error) {
	return &widgetapi.Widget{Name: name, State: widgetapi.StateReady, Labels: r.labels}, nil
}

// TestCreateReadsTheWidgetAgain: Observe may decide from a widget read
// moments ago, but the check that creates a key - and hands out its secret -
// must not. Here the memory says team-a's widget, while the widget now is
// team-b's (deleted and made again under the same name, say): Observe goes
// on, Create refuses, and no key exists.
func TestCreateReadsTheWidgetAgain(t *testing.T) {
	env := apitest.Start(t)
	seedWidget(t, env.Client(t, apitest.TokenA), widgetapi.StateReady, widgetOfTeamB)
	api, calls := recordingClient(t, env)
	mg := newNamespaced()
	for _, m := range []mod{chosenName(), forWidget(widgetName)} {
		m(mg)
	}
	e := &external[commonv1beta1.WidgetKeyResource]{api: api, recent: rememberedWidget{labels: widgetOfTeamA},
		cache: reader(secretWithKey, nil), live: reader(secretWithKey, nil), record: event.NewNopRecorder()}

	o, err := e.Observe(t.Context(), mg)
	if err != nil || o.ResourceExists {
		t.Fatalf("Observe(...): want a key to create and no error (the memory says the widget is team-a's), got exists=%t, %v", o.ResourceExists, err)
	}
	if len(calls()) != 0 {
		t.Errorf("Observe(...) called the Widget API (%v); it should have used the widget it remembered", calls())
	}
	_, err = e.Create(t.Context(), mg)
	if err == nil || !strings.Contains(err.Error(), "is not managed by a Widget in namespace team-a") {
		t.Errorf("Create(...): want the tenancy error, got %v", err)
	}
	if diff := cmp.Diff([]string{"get widget"}, calls()); diff != "" {
		t.Errorf("Widget API calls: -want, +got:\n%s", diff)
	}
	list, err := env.Client(t, apitest.TokenA).ListKeys(t.Context(), widgetName)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("widget %s has %d keys after the refused create, want none", widgetName, len(list.Items))
	}
}

// recordingClient returns a client of env and a function that returns the
// Widget API operations the client has called so far.
func recordingClient(t *testing.T, env *apitest.Env) (*widgetapi.Client, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var calls []string
	api := env.Client(t, apitest.TokenA, widgetapi.WithObserver(func(op string, _ int, _ time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, op)
	}))
	return api, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(calls)
	}
}
