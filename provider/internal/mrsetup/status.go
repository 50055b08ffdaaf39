package mrsetup

import (
	"encoding/json"
	"hash/maphash"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Layer 7, unchangedStatus (see the package comment): status updates that
// change nothing (TestRuntimeEndsEveryReconcileWithAStatusUpdate pins the
// assumption). crossplane-runtime's managed
// reconciler ends every reconcile with a status update, also when the
// observation changed nothing (conditions keep their transition times when
// they are the same). kube-apiserver then writes nothing, but still runs
// the whole update (admission, conversion to every served version,
// validation) and the provider spends a request of its client's rate limit
// on it: one per Widget per poll, and one for each requeue that found
// nothing new. statusMemo remembers a fingerprint of each resource's status
// as the API server has it (as read, or as last written), and writeRecorder
// skips a status update whose status has that fingerprint.
type statusMemo struct {
	seed maphash.Seed
	mu   sync.Mutex
	m    map[types.NamespacedName]memo
}

type memo struct {
	uid types.UID
	fp  uint64
}

func newStatusMemo() *statusMemo {
	return &statusMemo{seed: maphash.MakeSeed(), m: map[types.NamespacedName]memo{}}
}

// fingerprint returns a hash of o's Status field, and false when o has none
// or it cannot be encoded.
func (s *statusMemo) fingerprint(o client.Object) (uint64, bool) {
	f, ok := statusField(o)
	if !ok {
		return 0, false
	}
	b, err := json.Marshal(f.Interface())
	if err != nil {
		return 0, false
	}
	return maphash.Bytes(s.seed, b), true
}

// remember records o's status as the API server has it.
func (s *statusMemo) remember(o client.Object) {
	fp, ok := s.fingerprint(o)
	key := client.ObjectKeyFromObject(o)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok {
		delete(s.m, key)
		return
	}
	s.m[key] = memo{uid: o.GetUID(), fp: fp}
}

// unchanged reports whether o's status is the one the API server has.
func (s *statusMemo) unchanged(o client.Object) bool {
	fp, ok := s.fingerprint(o)
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.m[client.ObjectKeyFromObject(o)]
	return ok && m.uid == o.GetUID() && m.fp == fp
}

// forget drops what is known about the resource key (it was deleted).
func (s *statusMemo) forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}
