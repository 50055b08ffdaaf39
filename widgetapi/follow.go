package widgetapi

import (
	"context"
	"time"
)

// A Follower reads a project's change feed continuously: it long-polls,
// delivers every change in order, resumes from the last delivered sequence
// after errors and reconnects with bounded exponential backoff.
type Follower struct {
	client *Client

	// Handle is called with each change, in sequence order. It must not
	// block for long; the next poll waits for it.
	Handle func(ctx context.Context, c Change)
	// OnResync is called when the follower lost its position (the server no
	// longer retains it): changes were missed, so the caller should re-read
	// what it cares about. Optional.
	OnResync func(ctx context.Context)
	// OnError is told about every failed poll and the wait before the next
	// one. Optional.
	OnError func(err error, retryIn time.Duration)
	// OnPoll is called after every successful poll, before its changes are
	// handled: the follower has a position, so every change from then on
	// will be delivered. Optional.
	OnPoll func()
	// Wait is the long-poll duration (default 30s).
	Wait time.Duration
	// MinBackoff and MaxBackoff bound reconnect delays (default 200ms, 30s).
	MinBackoff, MaxBackoff time.Duration
}

// NewFollower returns a follower that reads the feed through c. Set Handle
// before calling Run.
func (c *Client) NewFollower(handle func(ctx context.Context, c Change)) *Follower {
	return &Follower{client: c, Handle: handle, Wait: 30 * time.Second, MinBackoff: 200 * time.Millisecond, MaxBackoff: 30 * time.Second}
}

// Run follows the feed from the change after `from` until ctx is done, and
// returns the last sequence it delivered (or learned), so a caller can resume
// from there later. Pass FromLatest to skip history.
func (f *Follower) Run(ctx context.Context, from int64) int64 {
	pos := from
	failures := 0
	for ctx.Err() == nil {
		if pos == FromLatest {
			l, err := f.client.Changes(ctx, ChangesOptions{After: FromLatest})
			if err != nil {
				failures++
				f.pause(ctx, err, failures)
				continue
			}
			pos, failures = l.LatestSeq, 0
			f.polled()
			continue
		}
		l, err := f.client.Changes(ctx, ChangesOptions{After: pos, Wait: f.Wait})
		if latest, expired := IsFeedExpired(err); expired {
			pos, failures = latest, 0
			f.polled()
			f.resync(ctx)
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			failures++
			f.pause(ctx, err, failures)
			continue
		}
		failures = 0
		f.polled()
		for _, c := range l.Changes {
			if c.Seq <= pos {
				continue
			}
			f.Handle(ctx, c)
			pos = c.Seq
		}
		if len(l.Changes) == 0 && l.LatestSeq > pos {
			// Other projects' changes advanced the sequence; skip them.
			pos = l.LatestSeq
		}
	}
	return pos
}

func (f *Follower) polled() {
	if f.OnPoll != nil {
		f.OnPoll()
	}
}

func (f *Follower) resync(ctx context.Context) {
	if f.OnResync != nil {
		f.OnResync(ctx)
	}
}

// pause waits before the next attempt: exponential backoff bounded by
// MaxBackoff, or the server's Retry-After when it asks for longer.
func (f *Follower) pause(ctx context.Context, err error, failures int) {
	d := f.MinBackoff << min(failures-1, 20)
	if d <= 0 || d > f.MaxBackoff {
		d = f.MaxBackoff
	}
	if ra, ok := IsRateLimited(err); ok && ra > d {
		d = ra
	}
	if f.OnError != nil {
		f.OnError(err, d)
	}
	_ = sleep(ctx, d)
}
