// Package mrsetup wires a managed resource kind into a controller:
// crossplane-runtime v2.4.0's managed reconciler, built the way
// crossplane/provider-template builds it, with this provider's layers around
// and inside it. docs/reconciler.md is the long form of this comment, with
// what each layer saves, measured.
//
// # The stock path
//
// build (mrsetup.go) assembles what provider-template does, in the stock
// stages of stock.go: managed.NewReconciler with the kind's typed
// connector, crossplane-runtime's default initializer, finalizer, reference
// resolver, connection publisher and critical annotation updater, all on the
// manager's client; an API event recorder; the poll interval; management
// policies and metrics when enabled; and a controller that watches the kind
// through generation, annotation and label changes and calls the reconciler
// behind the global reconcile rate limit. It does so in three stages (client
// and recorder; the reconciler's pieces; watch and handler), each stock
// first, then the hooks of that stage of the layers switched on. A request
// then goes:
//
//	watch event of the kind ──► predicates ─┐
//	change feed (Deps.Feed) ────────────────┼─► work queue
//	                                        ▼
//	                                 [fresh gate] ─► [drift first] ─► ratelimiter.Reconciler ─► managed.Reconciler
//	managed.Reconciler.Reconcile:
//	  Get ─► Initialize ─► ResolveReferences ─► Connect ─► Observe ─► PublishConnection ─► AddFinalizer
//	  ─► new: Update (create-pending) ─► Create ─► UpdateCriticalAnnotations (create-succeeded) ─► PublishConnection ─► Status().Update
//	  ─► else: [Update (late init)] ─► [Update (external)] ─► [PublishConnection] ─► Status().Update
//	every read and write: the manager's client, replaced (WithClient) by
//	  [write recorder: fresh gate, unchanged status] ─► [secret memo] ─► the manager's client
//	every event: [one event per update] ─► [own event broadcaster]
//
// # The layers, in the order a request meets them
//
// Each is one entry of order (layers.go), by number and name, with hooks
// into the stages of build, and one field of layers, switched on in one
// place (lean). It departs from the stock path above in one piece, whose
// types are in the file named:
//
//  1. ownAnnotationsIgnored (predicate.go): the annotation predicate
//     ignores the external-create annotations and default external name the
//     reconciler writes itself.
//  2. freshGate (fresh.go): a reconcile whose cache has not yet seen the
//     controller's own last write of the resource is put off.
//  3. driftFirst (driftfirst.go): a reconcile the change feed asked for skips
//     the global rate limit.
//  4. defaultNameUnwritten (writes.go): the default external name is set in
//     memory and saved by the create-pending update.
//  5. deferredFinalizer (writes.go): the finalizer of a resource whose
//     external resource this reconcile found absent is saved by the
//     create-pending update.
//  6. succeededUnwritten (writes.go): the external-create-succeeded
//     annotation is not written.
//  7. unchangedStatus (status.go, client.go): a status update equal to
//     what the API server has is not sent.
//  8. secretMemo (secrets.go): connection Secrets read again soon are read
//     from memory.
//  9. oneEventPerUpdate (events.go): crossplane-runtime's generic
//     UpdatedExternalResource event is dropped.
//  10. ownEventBroadcaster (events.go): events go through a broadcaster
//     with a smaller correlator cache.
//  11. copyFreeStateMetrics (state.go): the state metrics count the cache
//     in place.
//
// build runs each stage's hooks from the last layer to the first, so that a
// layer a request meets sooner wraps those it meets later.
//
// Layers 1 and 4 to 7 rely on the order of the managed reconciler's calls
// and writes; contract_test.go pins each such assumption in a test named
// TestRuntime..., so that a crossplane-runtime upgrade that breaks one fails
// that test. layers_test.go runs a resource's life through the stock path
// and through each layer switched off, and states the writes each saves.
//
// Not layers but deliberate choices of behaviour, on in every build:
// deterministic external names (names.NewInitializer,
// managed.WithDeterministicExternalName), no creation grace period, a poll
// interval hook (PollInterval) with a floor for the crossplane.io/poll-interval
// annotation (managed.WithMinPollInterval), a work queue rate limiter that
// honours the Widget API's Retry-After (ratelimit), references confined to
// the resource's namespace (LocalReferences), new resources that wait quietly
// for what their references select (WithPendingReferences, pending.go),
// the change feed as a second source of requests, which forgets a resource
// once its finalizer is removed (forgettingFinalizer, stock.go), and an
// orphaned external resource released before its finalizer goes (orphan.go).
package mrsetup
