package server

import (
	"container/heap"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

// notifier wakes change feed long polls after commits. Waiters take the
// current channel; a commit closes it and installs a new one.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func newNotifier() *notifier { return &notifier{ch: make(chan struct{})} }

func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

func (n *notifier) broadcast() {
	n.mu.Lock()
	defer n.mu.Unlock()
	close(n.ch)
	n.ch = make(chan struct{})
}

// transition is a pending end of a transitional state.
type transition struct {
	project, name string
	due           time.Time
}

type transitions []transition

func (t transitions) Len() int           { return len(t) }
func (t transitions) Less(i, j int) bool { return t[i].due.Before(t[j].due) }
func (t transitions) Swap(i, j int)      { t[i], t[j] = t[j], t[i] }
func (t *transitions) Push(x any)        { *t = append(*t, x.(transition)) } // heap.Interface
func (t *transitions) Pop() any {
	old := *t
	x := old[len(old)-1]
	*t = old[:len(old)-1]
	return x
}

// scheduler fires transitions when they fall due. Firing is advisory: the
// callback re-reads the widget and acts only if a transition is still due,
// so duplicate or stale entries are harmless.
type scheduler struct {
	now  func() time.Time
	fire func(project, name string)

	mu    sync.Mutex
	queue transitions
	wake  chan struct{}
}

func newScheduler(now func() time.Time, fire func(project, name string)) *scheduler {
	return &scheduler{now: now, fire: fire, wake: make(chan struct{}, 1)}
}

func (s *scheduler) add(project, name string, due time.Time) {
	s.mu.Lock()
	heap.Push(&s.queue, transition{project: project, name: name, due: due})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *scheduler) run(stop <-chan struct{}) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		next := time.Hour
		var due []transition
		now := s.now()
		for s.queue.Len() > 0 && !s.queue[0].due.After(now) {
			due = append(due, heap.Pop(&s.queue).(transition)) // heap of transitions
		}
		if s.queue.Len() > 0 {
			next = s.queue[0].due.Sub(now)
		}
		s.mu.Unlock()
		for _, t := range due {
			s.fire(t.project, t.name)
		}
		if len(due) > 0 {
			continue
		}
		timer.Reset(next)
		select {
		case <-stop:
			return
		case <-s.wake:
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		case <-timer.C:
		}
	}
}

// resumeTransitions schedules every transition that was pending when the
// server last stopped; overdue ones fire at once.
func (s *Server) resumeTransitions() error {
	return s.store.view(func(t *tx) error {
		return t.Bucket(bucketWidgets).ForEach(func(_, v []byte) error {
			r, err := decodeRecord(v)
			if err != nil {
				return err
			}
			if !r.DueAt.IsZero() {
				s.sched.add(r.Project, r.Widget.Name, r.DueAt)
			}
			return nil
		})
	})
}

// advance ends a widget's transitional state if it is due: Provisioning ->
// Ready (or Failed), Resizing -> Ready, Deleting -> gone.
func (s *Server) advance(project, name string) {
	now := s.opts.Now().UTC()
	var reschedule time.Time
	changes, err := s.store.update(func(t *tx) error {
		r, err := t.getWidget(project, name)
		if errors.Is(err, errNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if r.DueAt.IsZero() {
			return nil
		}
		if r.DueAt.After(now) {
			reschedule = r.DueAt
			return nil
		}
		w := &r.Widget
		switch w.State {
		case widgetapi.StateDeleting:
			if err := t.deleteWidget(project, name); err != nil {
				return err
			}
			return t.appendChange(project, widgetapi.Change{Type: widgetapi.ChangeWidgetDeleted, Widget: name, Generation: w.Generation, Time: now})
		case widgetapi.StateProvisioning, widgetapi.StateResizing:
			if slices.Contains(s.opts.FailingRegions, w.Region) {
				w.State = widgetapi.StateFailed
				w.Message = "region " + w.Region + " has no capacity for new widgets; delete this widget and create it in another region"
				w.Endpoint = ""
			} else {
				w.State = widgetapi.StateReady
				w.Message = ""
				w.Endpoint = endpointFor(w)
			}
		default:
		}
		r.DueAt = time.Time{}
		w.UpdatedAt = now
		if err := t.putWidget(r); err != nil {
			return err
		}
		return t.appendChange(project, widgetapi.Change{Type: widgetapi.ChangeWidgetState, Widget: name, Generation: w.Generation, State: w.State, Time: now})
	})
	if err != nil {
		s.log.Error("cannot advance widget state; retrying in 1s", "project", project, "widget", name, "error", err)
		s.sched.add(project, name, now.Add(time.Second))
		return
	}
	if !reschedule.IsZero() {
		s.sched.add(project, name, reschedule)
	}
	s.committed(changes)
}

// committed wakes feed readers and logs lifecycle changes.
func (s *Server) committed(changes []widgetapi.Change) {
	if len(changes) == 0 {
		return
	}
	for _, c := range changes {
		if c.Type == widgetapi.ChangeWidgetState || c.Type == widgetapi.ChangeWidgetDeleted {
			s.log.Info("widget state", "widget", c.Widget, "type", string(c.Type), "state", string(c.State), "seq", c.Seq)
		}
	}
	s.feed.broadcast()
}

// endpointFor is where a ready widget serves. It is derived from the widget's
// immutable identity, so it is stable across resizes and restarts.
func endpointFor(w *widgetapi.Widget) string {
	return "https://" + w.ID + "." + w.Region + ".widgets.widgetco.example"
}
