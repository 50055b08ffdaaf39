package mrsetup

// layers switches on, one by one, this provider's departures from
// crossplane-runtime's stock managed reconciler that exist to do less work
// (fewer writes, reads, reconciles or bytes). The zero value is the stock
// path; lean, which Setup uses, has every layer on. Each field is one named
// layer of the package comment, in its order; docs/reconciler.md gives what
// each one saves, measured, and the contract test that pins what it assumes
// of crossplane-runtime v2.4.0.
type layers struct {
	// ownAnnotationsIgnored: watch events that change only the
	// annotations the reconciler writes while creating do not queue a
	// reconcile (predicate.go).
	ownAnnotationsIgnored bool
	// freshGate: a reconcile whose cache has not seen the controller's own
	// last write of the resource waits for it (fresh.go).
	freshGate bool
	// driftFirst: a reconcile the change feed asked for skips the global
	// reconcile rate limit (mrsetup.go).
	driftFirst bool
	// defaultNameUnwritten: the default external name is saved by the
	// create-pending update, not by an update of its own (writes.go).
	defaultNameUnwritten bool
	// deferredFinalizer: the finalizer of a resource whose external
	// resource does not exist is saved by the create-pending update, not
	// by an update of its own (writes.go).
	deferredFinalizer bool
	// succeededUnwritten: the external-create-succeeded annotation is not
	// written (writes.go).
	succeededUnwritten bool
	// unchangedStatus: a status update that changes nothing is not sent
	// (status.go, client.go).
	unchangedStatus bool
	// secretMemo: a connection Secret read again within half a poll
	// interval is read from memory (secrets.go).
	secretMemo bool
	// oneEventPerUpdate: crossplane-runtime's generic event after an
	// external update is dropped; the connector records its own
	// (mrsetup.go).
	oneEventPerUpdate bool
	// ownEventBroadcaster: events go through Deps.Recorders, when set: a
	// broadcaster whose correlator remembers fewer objects (events.go).
	ownEventBroadcaster bool
	// copyFreeStateMetrics: the managed resource state metrics count the
	// cache in place instead of listing a copy of it (state.go).
	copyFreeStateMetrics bool
}

// lean is every layer switched on: the one place where they are.
var lean = layers{
	ownAnnotationsIgnored: true,
	freshGate:             true,
	driftFirst:            true,
	defaultNameUnwritten:  true,
	deferredFinalizer:     true,
	succeededUnwritten:    true,
	unchangedStatus:       true,
	secretMemo:            true,
	oneEventPerUpdate:     true,
	ownEventBroadcaster:   true,
	copyFreeStateMetrics:  true,
}
