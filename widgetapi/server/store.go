package server

import (
	"bytes"
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
var (
	bucketWidgets = []byte("widgets")
	bucketKeys    = []byte("keys")
	bucketChanges = []byte("changes")
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

// changeRecord is a stored change feed entry.
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
		for _, b := range [][]byte{bucketWidgets, bucketKeys, bucketChanges} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
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

// appendChange adds a change to the feed with the next sequence number and
// drops the entry that fell out of the retention window. Sequence numbers
// are allocated inside the transaction, so they are gap-free across the
// whole server and roll back with it.
func (t *tx) appendChange(project string, c widgetapi.Change) error {
	b := t.Bucket(bucketChanges)
	seq, err := b.NextSequence()
	if err != nil {
		return err
	}
	c.Seq = seqToInt(seq)
	v, err := json.Marshal(changeRecord{Project: project, Change: c})
	if err != nil {
		return err
	}
	if err := b.Put(seqKey(seq), v); err != nil {
		return err
	}
	t.changes = append(t.changes, c)
	if t.retention > 0 && seq > t.retention {
		return b.Delete(seqKey(seq - t.retention))
	}
	return nil
}

// latestSeq is the newest sequence number assigned.
func (t *tx) latestSeq() int64 { return seqToInt(t.Bucket(bucketChanges).Sequence()) }

// oldestRetained is the smallest sequence number still stored (latest+1 when
// the feed is empty).
func (t *tx) oldestRetained() int64 {
	k, _ := t.Bucket(bucketChanges).Cursor().First()
	if k == nil {
		return t.latestSeq() + 1
	}
	return seqToInt(binary.BigEndian.Uint64(k))
}

// changesAfter returns up to limit changes of project with a sequence greater
// than after.
func (t *tx) changesAfter(project string, after int64, limit int) ([]widgetapi.Change, error) {
	c := t.Bucket(bucketChanges).Cursor()
	out := []widgetapi.Change{}
	start := uint64(max(after, 0)) + 1 //nolint:gosec // clamped to non-negative
	for k, v := c.Seek(seqKey(start)); k != nil && len(out) < limit; k, v = c.Next() {
		r := changeRecord{}
		if err := json.Unmarshal(v, &r); err != nil {
			return nil, err
		}
		if r.Project == project {
			out = append(out, r.Change)
		}
	}
	return out, nil
}
