package server_test

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
	"github.com/widgetco/crossplane-widget/widgetapi/server"
)

// feedAnswer is what a change feed read tells a client.
type feedAnswer struct {
	Seqs    []int64
	Latest  int64
	Expired bool
}

func readFeed(t *testing.T, c *widgetapi.Client, after int64) feedAnswer {
	t.Helper()
	l, err := c.Changes(ctx(t), widgetapi.ChangesOptions{After: after})
	if latest, ok := widgetapi.IsFeedExpired(err); ok {
		return feedAnswer{Latest: latest, Expired: true}
	}
	if err != nil {
		t.Fatalf("Changes after %d: %v", after, err)
	}
	a := feedAnswer{Latest: l.LatestSeq}
	for _, ch := range l.Changes {
		a.Seqs = append(a.Seqs, ch.Seq)
	}
	return a
}

func createWidgets(t *testing.T, c *widgetapi.Client, prefix string, n int) {
	t.Helper()
	for i := range n {
		if _, err := c.CreateWidget(ctx(t), widgetapi.CreateWidgetRequest{Name: fmt.Sprintf("%s-%d", prefix, i)}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFeedIsPerProject: a project's change feed (sequence numbers, latestSeq
// and retention) shows nothing of other projects' writes.
func TestFeedIsPerProject(t *testing.T) {
	env := apitest.Start(t, apitest.WithOptions(func(o *server.Options) {
		o.ProvisionDelay = time.Hour // one change per create
		o.FeedRetention = 3
	}))
	a, b := env.Client(t, apitest.TokenA), env.Client(t, apitest.TokenB)
	createWidgets(t, a, "a", 2)
	createWidgets(t, b, "b", 10)

	got := map[string]feedAnswer{
		"A from the beginning":  readFeed(t, a, 0),
		"A latest":              readFeed(t, a, widgetapi.FromLatest),
		"A beyond its latest":   readFeed(t, a, 5),
		"B from the beginning":  readFeed(t, b, 0),
		"B within retention":    readFeed(t, b, 7),
		"B latest":              readFeed(t, b, widgetapi.FromLatest),
		"B beyond its latest":   readFeed(t, b, 11),
		"B at its latest (now)": readFeed(t, b, 10),
	}
	want := map[string]feedAnswer{
		// B's ten changes neither number nor expire A's two.
		"A from the beginning": {Seqs: []int64{1, 2}, Latest: 2},
		"A latest":             {Latest: 2},
		// Not a position A's feed gave out.
		"A beyond its latest": {Latest: 2, Expired: true},
		// B keeps its last three.
		"B from the beginning":  {Latest: 10, Expired: true},
		"B within retention":    {Seqs: []int64{8, 9, 10}, Latest: 10},
		"B latest":              {Latest: 10},
		"B beyond its latest":   {Latest: 10, Expired: true},
		"B at its latest (now)": {Latest: 10},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("feeds after 2 changes in A and 10 in B (retention 3), -want, +got:\n%s", diff)
	}
}

// TestFeedMigratesServerWideFeed: a data file written when the feed was
// server-wide opens with each project's retained changes under their old
// numbers, so positions clients hold stay valid, and new changes are
// numbered per project from there, across restarts.
func TestFeedMigratesServerWideFeed(t *testing.T) {
	dir := t.TempDir()
	// The old layout: one "changes" bucket keyed by the server-wide
	// sequence; changes 1-5 fell out of retention.
	db, err := bolt.Open(filepath.Join(dir, "widgets.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, name := range []string{"widgets", "keys"} {
			if _, err := tx.CreateBucket([]byte(name)); err != nil {
				return err
			}
		}
		b, err := tx.CreateBucket([]byte("changes"))
		if err != nil {
			return err
		}
		if err := b.SetSequence(10); err != nil {
			return err
		}
		for seq, project := range map[uint64]string{6: apitest.ProjectA, 7: apitest.ProjectB, 8: apitest.ProjectA, 9: apitest.ProjectA, 10: apitest.ProjectB} {
			v, err := json.Marshal(map[string]any{"project": project, "change": map[string]any{
				"seq": seq, "type": "widget.updated", "widget": fmt.Sprintf("w%d", seq), "generation": 2, "time": "2030-01-01T00:00:00Z",
			}})
			if err != nil {
				return err
			}
			k := make([]byte, 8)
			binary.BigEndian.PutUint64(k, seq)
			if err := b.Put(k, v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	open := func() (a, b *widgetapi.Client, stop func()) {
		s, err := server.New(server.Options{DataDir: dir, ProvisionDelay: time.Hour, Tokens: map[string]string{apitest.TokenA: apitest.ProjectA, apitest.TokenB: apitest.ProjectB}})
		if err != nil {
			t.Fatalf("cannot open a data file with the server-wide feed: %v", err)
		}
		hs := httptest.NewServer(apitest.ContractChecker(t, s.Handler()))
		client := func(token string) *widgetapi.Client {
			c, err := widgetapi.New(hs.URL, widgetapi.WithToken(token), widgetapi.WithHTTPClient(hs.Client()))
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		return client(apitest.TokenA), client(apitest.TokenB), func() {
			hs.Close()
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		}
	}

	a, b, stop := open()
	got := map[string]feedAnswer{
		"A after the retained start": readFeed(t, a, 5),
		"A mid-feed":                 readFeed(t, a, 8),
		"A before the retained":      readFeed(t, a, 4),
		"B after the retained start": readFeed(t, b, 5),
	}
	createWidgets(t, a, "new", 1)
	got["A after its new change"] = readFeed(t, a, 9)
	got["B after A's new change"] = readFeed(t, b, widgetapi.FromLatest)
	stop()
	a, _, stop = open()
	defer stop()
	got["A after a restart"] = readFeed(t, a, 5)

	want := map[string]feedAnswer{
		"A after the retained start": {Seqs: []int64{6, 8, 9}, Latest: 10},
		"A mid-feed":                 {Seqs: []int64{9}, Latest: 10},
		"A before the retained":      {Latest: 10, Expired: true},
		"B after the retained start": {Seqs: []int64{7, 10}, Latest: 10},
		"A after its new change":     {Seqs: []int64{11}, Latest: 11},
		"B after A's new change":     {Latest: 10},
		"A after a restart":          {Seqs: []int64{6, 8, 9, 11}, Latest: 11},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("feeds of a migrated data file, -want, +got:\n%s", diff)
	}
}
