package server

import (
	"bytes"
	"crypto/subtle"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

// Buckets of the bbolt file. Keys are "<project>\x00<widget>[\x00<key>]" so a
// project's widgets (and a widget's keys) form one ordered range.
//
// The change feed is per project: "feed" holds "<project>\x00<seq>" (seq as
// 8 big-endian bytes) -> widgetapi.Change, "feedHeads" holds each project's
// feedHead, and "meta" the feedHead of projects that have none yet. Files
// written before the feed was per project hold one server-wide feed in
// "changes"; openStore moves it (see migrateFeed).
var (
	bucketWidgets   = []byte("widgets")
	bucketKeys      = []byte("keys")
	bucketFeed      = []byte("feed")
	bucketFeedHeads = []byte("feedHeads")
	bucketMeta      = []byte("meta")
	bucketChanges   = []byte("changes") // the server-wide feed of older files

	metaFeedBase = []byte("feedBase")
)

const sep = "\x00"

// widgetRecord is a stored widget and the server's bookkeeping for it.
type widgetRecord struct {
	Project string           `json:"project"`
	Widget  widgetapi.Widget `json:"widget"`
	// DueAt is when the widget's current transitional state ends
	// (Provisioning, Resizing, Deleting); zero when none is pending.
	DueAt time.Time `json:"dueAt,omitzero"`
}

// keyRecord is a stored access key. Only a hash of the secret is kept.
type keyRecord struct {
	Key        widgetapi.Key `json:"key"`
	SecretHash []byte        `json:"secretHash"`
}

// changeRecord is a change feed entry of the server-wide feed older files
// hold.
type changeRecord struct {
	Project string           `json:"project"`
	Change  widgetapi.Change `json:"change"`
}

// store persists widgets, keys and the change feed in a bbolt file. Every
// write is one fsynced transaction, so an acknowledged write survives a crash.
type store struct {
	db        *bolt.DB
	retention uint64
}

func openStore(path string, retention uint64) (*store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("cannot open database %s (is another widget-api using this data directory?): %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketWidgets, bucketKeys, bucketFeed, bucketFeedHeads, bucketMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return migrateFeed(tx)
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("cannot initialise database: %w", err)
	}
	return &store{db: db, retention: retention}, nil
}

func (s *store) close() error { return s.db.Close() }

func widgetKey(project, name string) []byte { return []byte(project + sep + name + sep) }

func keyKey(project, widget, key string) []byte {
	return []byte(project + sep + widget + sep + key)
}

func seqKey(seq uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, seq)
	return b
}

// seqToInt converts a bbolt sequence to the API's int64. Sequences start at
// 1 and grow by one per change, so they cannot reach 2^63.
func seqToInt(u uint64) int64 {
	return int64(u & (1<<63 - 1)) //nolint:gosec // masked to 63 bits above
}

var errNotFound = errors.New("not found")

// tx wraps a bbolt transaction with typed accessors.
type tx struct {
	*bolt.Tx
	retention uint64
	// changes collects the feed entries this transaction appended, for
	// waking feed readers after commit.
	changes []widgetapi.Change
}

// update runs fn in a read-write transaction and returns the changes it
// appended once they are durable.
func (s *store) update(fn func(t *tx) error) ([]widgetapi.Change, error) {
	var changes []widgetapi.Change
	err := s.db.Update(func(btx *bolt.Tx) error {
		t := &tx{Tx: btx, retention: s.retention}
		if err := fn(t); err != nil {
			return err
		}
		changes = t.changes
		return nil
	})
	return changes, err
}

// view runs fn in a read-only transaction.
func (s *store) view(fn func(t *tx) error) error {
	return s.db.View(func(btx *bolt.Tx) error { return fn(&tx{Tx: btx, retention: s.retention}) })
}

func (t *tx) getWidget(project, name string) (*widgetRecord, error) {
	v := t.Bucket(bucketWidgets).Get(widgetKey(project, name))
	if v == nil {
		return nil, errNotFound
	}
	r := &widgetRecord{}
	return r, json.Unmarshal(v, r)
}

func (t *tx) putWidget(r *widgetRecord) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return t.Bucket(bucketWidgets).Put(widgetKey(r.Project, r.Widget.Name), v)
}

// deleteWidget removes a widget and all of its keys.
func (t *tx) deleteWidget(project, name string) error {
	if err := t.Bucket(bucketWidgets).Delete(widgetKey(project, name)); err != nil {
		return err
	}
	prefix := widgetKey(project, name)
	c := t.Bucket(bucketKeys).Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Seek(prefix) {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// listWidgets returns up to limit widgets of project named after `after`
// that carry every label in sel, and whether more match.
func (t *tx) listWidgets(project, after string, sel map[string]string, limit int) ([]widgetapi.Widget, bool, error) {
	prefix := []byte(project + sep)
	c := t.Bucket(bucketWidgets).Cursor()
	start := prefix
	if after != "" {
		start = []byte(project + sep + after + sep + sep)
	}
	var out []widgetapi.Widget
	for k, v := c.Seek(start); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		r := widgetRecord{}
		if err := json.Unmarshal(v, &r); err != nil {
			return nil, false, err
		}
		if !matches(r.Widget.Labels, sel) {
			continue
		}
		if len(out) == limit {
			return out, true, nil
		}
		out = append(out, r.Widget)
	}
	return out, false, nil
}

func matches(labels, sel map[string]string) bool {
	for k, v := range sel {
		if lv, ok := labels[k]; !ok || lv != v {
			return false
		}
	}
	return true
}

func (t *tx) getKey(project, widget, key string) (*keyRecord, error) {
	v := t.Bucket(bucketKeys).Get(keyKey(project, widget, key))
	if v == nil {
		return nil, errNotFound
	}
	r := &keyRecord{}
	return r, json.Unmarshal(v, r)
}

func (t *tx) putKey(project string, r *keyRecord) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return t.Bucket(bucketKeys).Put(keyKey(project, r.Key.Widget, r.Key.Name), v)
}

func (t *tx) deleteKey(project, widget, key string) error {
	return t.Bucket(bucketKeys).Delete(keyKey(project, widget, key))
}

// keyBySecret returns the key of widget whose secret hashes to sum, or
// errNotFound. It compares every key's hash in constant time.
func (t *tx) keyBySecret(project, widget string, sum []byte) (*widgetapi.Key, error) {
	prefix := widgetKey(project, widget)
	c := t.Bucket(bucketKeys).Cursor()
	var found *widgetapi.Key
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		r := keyRecord{}
		if err := json.Unmarshal(v, &r); err != nil {
			return nil, err
		}
		if subtle.ConstantTimeCompare(r.SecretHash, sum) == 1 {
			found = &r.Key
		}
	}
	if found == nil {
		return nil, errNotFound
	}
	return found, nil
}

func (t *tx) listKeys(project, widget string) ([]widgetapi.Key, error) {
	prefix := widgetKey(project, widget)
	c := t.Bucket(bucketKeys).Cursor()
	out := []widgetapi.Key{}
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		r := keyRecord{}
		if err := json.Unmarshal(v, &r); err != nil {
			return nil, err
		}
		out = append(out, r.Key)
	}
	return out, nil
}

// feedHead is where a project's change feed stands: latest is the newest
// sequence number assigned to one of its changes, and the feed holds every
// change of the project after floor (floor <= latest). A position before
// floor has lost changes (feed_expired); one after latest was never given
// out by this feed.
type feedHead struct {
	latest, floor int64
}

func (h feedHead) bytes() []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, uint64(h.latest))    //nolint:gosec // never negative
	binary.BigEndian.PutUint64(b[8:], uint64(h.floor)) //nolint:gosec // never negative
	return b
}

func parseFeedHead(b []byte) (feedHead, error) {
	if len(b) != 16 {
		return feedHead{}, fmt.Errorf("change feed head of %d bytes, want 16", len(b))
	}
	return feedHead{latest: seqToInt(binary.BigEndian.Uint64(b)), floor: seqToInt(binary.BigEndian.Uint64(b[8:]))}, nil
}

// feedHead returns project's feed head: the stored one, or the base every
// project starts from (zero, or where the server-wide feed stood when it was
// migrated).
func (t *tx) feedHead(project string) (feedHead, error) {
	if v := t.Bucket(bucketFeedHeads).Get([]byte(project)); v != nil {
		return parseFeedHead(v)
	}
	if v := t.Bucket(bucketMeta).Get(metaFeedBase); v != nil {
		return parseFeedHead(v)
	}
	return feedHead{}, nil
}

func feedKey(project string, seq int64) []byte {
	return append([]byte(project+sep), seqKey(uint64(max(seq, 0)))...) //nolint:gosec // clamped to non-negative
}

// appendChange adds a change to project's feed with the project's next
// sequence number, and drops the project's entries that fell out of the
// retention window. Sequence numbers are per project, so a project's feed
// tells it nothing of other projects' writes; they are allocated inside the
// transaction, so they are gap-free and roll back with it.
func (t *tx) appendChange(project string, c widgetapi.Change) error {
	h, err := t.feedHead(project)
	if err != nil {
		return err
	}
	h.latest++
	c.Seq = h.latest
	v, err := json.Marshal(c)
	if err != nil {
		return err
	}
	b := t.Bucket(bucketFeed)
	if err := b.Put(feedKey(project, h.latest), v); err != nil {
		return err
	}
	t.changes = append(t.changes, c)
	if r := int64(min(t.retention, 1<<62)); r > 0 && h.latest-r > h.floor { //nolint:gosec // bounded above
		h.floor = h.latest - r
		// Entries at or before the new floor, oldest first. Usually one;
		// more after a migration, whose entries have gaps.
		prefix := []byte(project + sep)
		end := feedKey(project, h.floor)
		cur := b.Cursor()
		for k, _ := cur.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && bytes.Compare(k, end) <= 0; k, _ = cur.Seek(prefix) {
			if err := cur.Delete(); err != nil {
				return err
			}
		}
	}
	return t.Bucket(bucketFeedHeads).Put([]byte(project), h.bytes())
}

// changesAfter returns up to limit changes of project with a sequence greater
// than after.
func (t *tx) changesAfter(project string, after int64, limit int) ([]widgetapi.Change, error) {
	prefix := []byte(project + sep)
	c := t.Bucket(bucketFeed).Cursor()
	out := []widgetapi.Change{}
	for k, v := c.Seek(feedKey(project, after+1)); k != nil && bytes.HasPrefix(k, prefix) && len(out) < limit; k, v = c.Next() {
		ch := widgetapi.Change{}
		if err := json.Unmarshal(v, &ch); err != nil {
			return nil, err
		}
		out = append(out, ch)
	}
	return out, nil
}

// migrateFeed moves the server-wide feed of a file written before feeds
// were per project into per-project feeds, keeping every retained change
// with its sequence number and giving every project the server-wide latest
// and floor. Positions clients hold stay valid: nothing is re-numbered and
// no client has to resync; new changes are numbered per project from there.
// Files without the old feed are left alone.
func migrateFeed(tx *bolt.Tx) error {
	old := tx.Bucket(bucketChanges)
	if old == nil {
		return nil
	}
	base := feedHead{latest: seqToInt(old.Sequence())}
	base.floor = base.latest
	if k, _ := old.Cursor().First(); len(k) == 8 {
		base.floor = seqToInt(binary.BigEndian.Uint64(k)) - 1
	}
	if err := tx.Bucket(bucketMeta).Put(metaFeedBase, base.bytes()); err != nil {
		return err
	}
	feed, heads := tx.Bucket(bucketFeed), tx.Bucket(bucketFeedHeads)
	err := old.ForEach(func(k, v []byte) error {
		if len(k) != 8 {
			return fmt.Errorf("change feed entry with a key of %d bytes, want 8", len(k))
		}
		r := changeRecord{}
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("cannot decode change feed entry: %w", err)
		}
		r.Change.Seq = seqToInt(binary.BigEndian.Uint64(k))
		c, err := json.Marshal(r.Change)
		if err != nil {
			return err
		}
		if err := feed.Put(feedKey(r.Project, r.Change.Seq), c); err != nil {
			return err
		}
		return heads.Put([]byte(r.Project), base.bytes())
	})
	if err != nil {
		return fmt.Errorf("cannot move the change feed to per-project feeds: %w", err)
	}
	return tx.DeleteBucket(bucketChanges)
}
