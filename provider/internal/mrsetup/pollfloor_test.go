package mrsetup

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/controller"
	"github.com/crossplane/crossplane-runtime/v2/pkg/logging"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	"github.com/crossplane/crossplane-runtime/v2/pkg/ratelimiter"
	"github.com/crossplane/crossplane-runtime/v2/pkg/reconciler/managed"
	"github.com/crossplane/crossplane-runtime/v2/pkg/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlcontroller "sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	nsv1beta1 "github.com/widgetco/crossplane-widget/apis/namespaced/v1beta1"
)

// The crossplane.io/poll-interval annotation against the reconciler as
// build assembles it with the provider's defaults (--poll-interval=10m, the
// jitter a tenth of it, every layer on): what a tenant can make the
// provider do by annotating its own resources.

// providerPoll and providerJitter are the provider's default --poll-interval
// and the jitter main derives from it.
const (
	providerPoll   = 10 * time.Minute
	providerJitter = providerPoll / 10
)

// annotatedStack builds the provider's reconciler for Widgets on k and ext,
// with d's wake-up and clock, and feeds k's writes to its predicates as the
// watch would.
func annotatedStack(t *testing.T, k *fakeKube, ext managed.TypedExternalConnector[*nsv1beta1.Widget], o controller.Options, d Deps) *stack {
	t.Helper()
	o.Logger = logging.NewNopLogger()
	o.PollInterval = providerPoll
	d.PollJitter = providerJitter
	s, err := build(fakeManager{k: k}, o, d, nsv1beta1.WidgetGroupVersionKind,
		func() resource.ManagedList { return &nsv1beta1.WidgetList{} },
		func(Env) managed.TypedExternalConnector[*nsv1beta1.Widget] { return ext }, lean)
	if err != nil {
		t.Fatal(err)
	}
	k.onUpdate = func(old, updated client.Object) {
		for _, p := range s.predicates {
			p.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: updated})
		}
	}
	return s
}

// annotatedWidget returns a Widget named name that asks to be polled every
// interval (no annotation when it is empty).
func annotatedWidget(name, interval string) *nsv1beta1.Widget {
	w := &nsv1beta1.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, UID: types.UID("uid-" + name), Generation: 1}}
	if interval != "" {
		w.SetAnnotations(map[string]string{meta.AnnotationKeyPollInterval: interval})
	}
	w.Spec.ForProvider.Size = ptr("medium")
	return w
}

// TestAnnotatedPollInterval reconciles one Widget again and again and
// checks every requeue: an annotation below the floor waits the floor, and a
// Ready Widget whose interval is shorter than the jitter is never left
// without a requeue (a wait of zero or less requeues nothing).
func TestAnnotatedPollInterval(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		reason   string
		interval string
		ready    bool
		// wake, when set, is the Widget's next scheduled event (a
		// WidgetKey's rotation), from now.
		wake     time.Duration
		min, max time.Duration
	}{
		"NotReadyOneMillisecond": {
			reason:   "A Widget that is not Ready and asks for 1ms is polled every 10s (the floor), spread by at most 1s.",
			interval: "1ms",
			min:      10 * time.Second, max: 11 * time.Second,
		},
		"ReadyOneMillisecond": {
			reason:   "A Ready Widget that asks for 1ms is polled every 10s (the floor), spread by at most 1s.",
			interval: "1ms", ready: true,
			min: 10 * time.Second, max: 11 * time.Second,
		},
		"ReadyShorterThanJitter": {
			reason:   "A Ready Widget that asks for 30s, less than the 1m jitter, is spread by 3s and always requeued.",
			interval: "30s", ready: true,
			min: 27 * time.Second, max: 33 * time.Second,
		},
		"ReadyUnannotated": {
			reason: "A Ready Widget without the annotation waits the poll interval, spread by the jitter.",
			ready:  true,
			min:    9 * time.Minute, max: 11 * time.Minute,
		},
		"WakeUpKept": {
			reason:   "A Ready resource that asks for 20s and has an event due in 2s is reconciled in 2s, every time: the jitter never drops the wake-up.",
			interval: "20s", ready: true, wake: 2 * time.Second,
			min: 2 * time.Second, max: 2 * time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var log []string
			k := newFakeKube(&log)
			k.put(annotatedWidget("web", tc.interval))
			ext := &fakeWidgets{log: &log, exists: true, upToDate: true, ready: tc.ready}
			d := Deps{Now: func() time.Time { return now }}
			if tc.wake != 0 {
				d.wake = func(resource.Managed) time.Time { return now.Add(tc.wake) }
			}
			s := annotatedStack(t, k, ext, controller.Options{}, d)
			// The first reconcile adds the finalizer, and the update
			// returns the Widget as stored, not Ready yet.
			if _, err := s.reconciler.Reconcile(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			for i := range 200 {
				res, err := s.reconciler.Reconcile(t.Context(), req)
				if err != nil {
					t.Fatalf("reconcile %d: %v", i, err)
				}
				if res.RequeueAfter < tc.min || res.RequeueAfter > tc.max {
					t.Fatalf("%s\nreconcile %d: RequeueAfter %s, want within [%s, %s]", tc.reason, i, res.RequeueAfter, tc.min, tc.max)
				}
			}
		})
	}
}

// countingWidgets is an external system of Widgets that all exist, match
// their spec and are Ready or not (ready, by name): it counts and times the
// Observe calls of each. It is safe for concurrent use.
type countingWidgets struct {
	ready map[string]bool

	mu       sync.Mutex
	observed map[string][]time.Time
}

func (f *countingWidgets) Connect(context.Context, *nsv1beta1.Widget) (managed.TypedExternalClient[*nsv1beta1.Widget], error) {
	return f, nil
}

func (f *countingWidgets) Observe(_ context.Context, mg *nsv1beta1.Widget) (managed.ExternalObservation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.observed[mg.GetName()] = append(f.observed[mg.GetName()], time.Now())
	mg.SetConditions(readyCondition(f.ready[mg.GetName()]))
	return managed.ExternalObservation{ResourceExists: true, ResourceUpToDate: true}, nil
}

func (f *countingWidgets) Create(context.Context, *nsv1beta1.Widget) (managed.ExternalCreation, error) {
	return managed.ExternalCreation{}, nil
}

func (f *countingWidgets) Update(context.Context, *nsv1beta1.Widget) (managed.ExternalUpdate, error) {
	return managed.ExternalUpdate{}, nil
}

func (f *countingWidgets) Delete(context.Context, *nsv1beta1.Widget) (managed.ExternalDelete, error) {
	return managed.ExternalDelete{}, nil
}

func (f *countingWidgets) Disconnect(context.Context) error { return nil }

// between counts the Observe calls in [from, to).
func (f *countingWidgets) between(from, to time.Time) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, ts := range f.observed {
		for _, at := range ts {
			if !at.Before(from) && at.Before(to) {
				n++
			}
		}
	}
	return n
}

// first returns when name was first observed, if it was.
func (f *countingWidgets) first(name string) (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ts := f.observed[name]; len(ts) > 0 {
		return ts[0], true
	}
	return time.Time{}, false
}

// locked serialises calls to next: the fake API server is not safe for
// concurrent use.
type locked struct {
	mu   sync.Mutex
	next reconcile.Reconciler
}

func (l *locked) Reconcile(ctx context.Context, r reconcile.Request) (reconcile.Result, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next.Reconcile(ctx, r)
}

// TestAnnotatedPollLoad runs hot Widgets, not Ready and annotated 1ms,
// through a controller-runtime controller with the provider's global
// reconcile rate limit (--max-reconcile-rate=50) and measures what they
// cost everyone else: the reconciles they take per second, and how long a
// new request of another Widget then waits for its reconcile.
func TestAnnotatedPollLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about 6 seconds")
	}
	cases := map[string]struct {
		reason string
		hot    int
		// warm is how long the hot Widgets run before the measurement.
		warm time.Duration
		// window is how long hot reconciles are counted.
		window time.Duration
		// maxRate is the most hot reconciles a second allowed in the
		// window.
		maxRate float64
		// victim, when set, measures how long an unannotated Widget's
		// new request waits; maxWait is the longest allowed.
		victim  bool
		maxWait time.Duration
	}{
		"TenHot": {
			reason: "10 Widgets annotated 1ms reconcile once and then every 10s or more: they cannot take the provider's 50 reconciles a second.",
			hot:    10, warm: time.Second, window: 2 * time.Second,
			maxRate: 5,
		},
		"TwoHundredHot": {
			reason: "With 200 Widgets annotated 1ms, another Widget's request is reconciled at once, not after the 4s the hot ones would queue in the rate limiter.",
			hot:    200, warm: time.Second, victim: true, maxWait: time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var log []string
			k := newFakeKube(&log)
			ext := &countingWidgets{ready: map[string]bool{"victim": true}, observed: map[string][]time.Time{}}
			reqs := make([]reconcile.Request, 0, tc.hot)
			for i := range tc.hot {
				w := annotatedWidget(fmt.Sprintf("hot-%03d", i), "1ms")
				k.put(w)
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
			}
			victim := annotatedWidget("victim", "")
			k.put(victim)
			s := annotatedStack(t, k, ext, controller.Options{GlobalRateLimiter: ratelimiter.NewGlobal(50)}, Deps{})

			queue := make(chan workqueue.TypedRateLimitingInterface[reconcile.Request], 1)
			c, err := ctrlcontroller.NewTypedUnmanaged(name, ctrlcontroller.TypedOptions[reconcile.Request]{
				Reconciler:              &locked{next: s.handler},
				RateLimiter:             s.options.RateLimiter,
				MaxConcurrentReconciles: 1,
				SkipNameValidation:      ptr(true),
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Watch(source.TypedFunc[reconcile.Request](func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
				for _, r := range reqs {
					q.Add(r)
				}
				queue <- q
				return nil
			})); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			start := time.Now()
			go func() { done <- c.Start(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
			}()
			q := <-queue
			time.Sleep(tc.warm)

			if tc.window > 0 {
				from := time.Now()
				time.Sleep(tc.window)
				to := time.Now()
				n := ext.between(from, to)
				rate := float64(n) / to.Sub(from).Seconds()
				t.Logf("MEASURED: %d Widgets annotated 1ms, not Ready: %d reconciles in %s after %s (%.1f/s), %d since the start",
					tc.hot, n, to.Sub(from).Round(time.Millisecond), tc.warm, rate, ext.between(start, to))
				if rate > tc.maxRate {
					t.Errorf("%s\n%d hot Widgets: %.1f reconciles/s, want at most %.1f", tc.reason, tc.hot, rate, tc.maxRate)
				}
			}
			if tc.victim {
				asked := time.Now()
				q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(victim)})
				deadline := asked.Add(tc.maxWait + 10*time.Second)
				for {
					if at, ok := ext.first("victim"); ok {
						wait := at.Sub(asked)
						t.Logf("MEASURED: %d Widgets annotated 1ms, not Ready: another Widget's request waited %s for its reconcile", tc.hot, wait.Round(time.Microsecond))
						if wait > tc.maxWait {
							t.Errorf("%s\nvictim waited %s, want at most %s", tc.reason, wait, tc.maxWait)
						}
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s\nvictim not reconciled within %s", tc.reason, deadline.Sub(asked))
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
}
