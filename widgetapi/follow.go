package widgetapi

import (
	"context"
	"math/rand/v2"
	"time"
)

// A Follower reads a project's change feed continuously: it long-polls,
// delivers every change in order, resumes from the last delivered sequence
// after errors and reconnects with bounded exponential backoff.
//
// It paces itself against a server that answers too eagerly - which a
// server a tenant runs may do on purpose: polls start at least MinInterval
// apart; answers with nothing new that come back early (before the long
// poll could have waited) and feed_expired answers back off exponentially,
// with jitter, up to MaxBackoff, so a server that always says "expired"
// gets a resync at most every MaxBackoff; and a poll that the server holds
// longer than Wait plus Slack is abandoned.
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
	// MinBackoff and MaxBackoff bound reconnect delays, and the delays
	// after early empty and feed_expired answers (default 200ms, 30s).
	MinBackoff, MaxBackoff time.Duration
	// MinInterval is the least time between the starts of two polls
	// (default 250ms): at most four polls a second, however fast the
	// server answers.
	MinInterval time.Duration
	// Slack is how much longer than Wait a poll may take before the
	// follower gives up on it and polls again (default 30s): a server
	// that holds polls for ever does not stop the feed for good.
	Slack time.Duration
}

// NewFollower returns a follower that reads the feed through c. Set Handle
// before calling Run.
func (c *Client) NewFollower(handle func(ctx context.Context, c Change)) *Follower {
	return &Follower{client: c, Handle: handle, Wait: 30 * time.Second, MinBackoff: 200 * time.Millisecond, MaxBackoff: 30 * time.Second, MinInterval: 250 * time.Millisecond, Slack: 30 * time.Second}
}

// Run follows the feed from the change after `from` until ctx is done, and
// returns the last sequence it delivered (or learned), so a caller can resume
// from there later. Pass FromLatest to skip history.
//
//nolint:gocognit // One poll loop whose position and three back-off counters carry across iterations, every branch ending in continue or break; split, the counters would travel between helpers.
func (f *Follower) Run(ctx context.Context, from int64) int64 {
	pos := from
	// failures counts failed polls in a row; quiet, early answers with
	// nothing new in a row; expiries, feed_expired answers less than
	// 2*MaxBackoff apart in a row.
	failures, quiet, expiries := 0, 0, 0
	var started, expired time.Time
	for ctx.Err() == nil {
		if !started.IsZero() {
			if sleep(ctx, f.MinInterval-time.Since(started)) != nil {
				break
			}
		}
		started = time.Now()
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
		l, err := f.poll(ctx, pos)
		if latest, ok := IsFeedExpired(err); ok {
			failures = 0
			if time.Since(expired) > 2*f.MaxBackoff {
				expiries = 0
			}
			expiries++
			// A resync re-reads everything; one that follows another
			// closely waits longer each time.
			if sleep(ctx, f.backoff(expiries)) != nil {
				break
			}
			expired = time.Now()
			pos = latest
			if latest <= 0 {
				pos = FromLatest
			}
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
		before := pos
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
		if pos != before || time.Since(started) >= f.early() {
			quiet = 0
			continue
		}
		// Nothing new, and sooner than a long poll would have waited.
		quiet++
		if sleep(ctx, f.backoff(quiet)) != nil {
			break
		}
	}
	return pos
}

// poll long-polls the feed after pos, for at most Wait plus Slack.
func (f *Follower) poll(ctx context.Context, pos int64) (*ChangeList, error) {
	ctx, cancel := context.WithTimeout(ctx, f.Wait+f.Slack)
	defer cancel()
	return f.client.Changes(ctx, ChangesOptions{After: pos, Wait: f.Wait})
}

// early is how soon an answer with nothing new comes back early: before a
// server that holds long polls at all would have answered.
func (f *Follower) early() time.Duration { return min(f.Wait/2, time.Second) }

// backoff returns the wait after the n-th trouble in a row: MinBackoff
// doubled n-1 times, at most MaxBackoff, less up to a half of it at random
// so that followers do not retry in step.
func (f *Follower) backoff(n int) time.Duration {
	d := f.MinBackoff << min(n-1, 20)
	if d <= 0 || d > f.MaxBackoff {
		d = f.MaxBackoff
	}
	return d/2 + rand.N(d/2+1) //nolint:gosec // jitter needs no cryptographic randomness
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

// pause waits before the next attempt: exponential backoff with jitter
// bounded by MaxBackoff, or the server's Retry-After when it asks for
// longer.
func (f *Follower) pause(ctx context.Context, err error, failures int) {
	d := f.backoff(failures)
	if ra, ok := IsRateLimited(err); ok && ra > d {
		d = ra
	}
	if f.OnError != nil {
		f.OnError(err, d)
	}
	_ = sleep(ctx, d)
}
