package fakes

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

// A Follow is one call of Follower.Follow.
type Follow struct {
	// Key names the connection, when the Follower has a KeyOf; "" otherwise.
	Key    string
	Kind   string
	Widget string
	// MR is the managed resource to requeue.
	MR types.NamespacedName
}

// A Seen is one call of Follower.Seen: the widget version MR read or wrote.
type Seen struct {
	Follow     Follow
	Generation int64
	State      widgetapi.State
}

// A Follower is a clients.Follower that records the calls made to it and
// follows nothing. Use it as a Follower[*clients.Connection]: the
// connection's type is a type parameter only so that this package need not
// import package clients, whose own tests use it. Its zero value is ready;
// it is safe for concurrent use.
type Follower[C any] struct {
	// KeyOf, when set, returns the key of a call's connection, recorded as
	// Follow.Key. Set it before the first call.
	KeyOf func(c C) string

	// Live is what Following answers.
	Live bool

	mu      sync.Mutex
	follows []Follow
	seen    []Seen
}

// Following answers Live.
func (f *Follower[C]) Following(C) bool { return f.Live }

func (f *Follower[C]) follow(c C, kind, widget string, key types.NamespacedName) Follow {
	fl := Follow{Kind: kind, Widget: widget, MR: key}
	if f.KeyOf != nil {
		fl.Key = f.KeyOf(c)
	}
	return fl
}

// Follow records that the resource key of kind follows widget's changes.
func (f *Follower[C]) Follow(c C, kind, widget string, key types.NamespacedName) {
	fl := f.follow(c, kind, widget, key)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.follows = append(f.follows, fl)
}

// Seen records that the resource key of kind read or wrote the widget's
// version generation, in state.
func (f *Follower[C]) Seen(c C, kind, widget string, key types.NamespacedName, generation int64, state widgetapi.State) {
	s := Seen{Follow: f.follow(c, kind, widget, key), Generation: generation, State: state}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, s)
}

// Follows returns the Follow calls so far, in order; nil for none.
func (f *Follower[C]) Follows() []Follow {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Follow(nil), f.follows...)
}

// SeenCalls returns the Seen calls so far, in order; nil for none.
func (f *Follower[C]) SeenCalls() []Seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Seen(nil), f.seen...)
}
