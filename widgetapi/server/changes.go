package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

const (
	defaultChangesLimit = 500
	maxChangesLimit     = 1000
)

// listChanges serves the change feed: the project's changes after a
// sequence number, waiting up to `wait` seconds for the first one. wait may
// be up to widgetapi.MaxChangesWait; the server holds a request at most
// Options.MaxWait, and gives it that long on top of its write timeout. A
// token holds at most Options.MaxPollsPerToken such waits at once.
func (s *Server) listChanges(w http.ResponseWriter, r *http.Request) {
	q := parseQuery(r)
	var after int64
	latestOnly := false
	switch v, ok := q.get("after"); {
	case !ok:
	case v == "latest":
		latestOnly = true
	default:
		n, err := parseDecimal(v)
		if err != nil {
			q.errs.add("after", "must be a sequence number (0 for the beginning) or \"latest\"")
		}
		after = n
	}
	maxWait := int64(widgetapi.MaxChangesWait / time.Second)
	wait := min(time.Duration(q.integer("wait", 0, maxWait, 0))*time.Second, s.opts.MaxWait)
	limit := int(q.integer("limit", 1, maxChangesLimit, defaultChangesLimit))
	if len(q.errs) > 0 {
		invalid(w, q.errs)
		return
	}

	project := projectOf(r)
	var deadline <-chan time.Time
	if wait > 0 && !latestOnly {
		release, ok := s.holdPoll(r)
		if !ok {
			s.metrics.pollsRefused.Inc()
			setRetryAfter(w, pollRetryAfter)
			problem(w, http.StatusTooManyRequests, widgetapi.CodeRateLimited,
				"this token holds the most change feed long polls allowed at once; follow the feed with one long poll per connection")
			return
		}
		defer release()
		s.extendWriteDeadline(w, wait)
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
	}
	scanAfter := after
	for first := true; ; first = false {
		// Take the wake-up channel before reading so a commit between the
		// read and the wait cannot be missed.
		woken := s.feed.wait()
		out := widgetapi.ChangeList{Changes: []widgetapi.Change{}}
		expired := ""
		err := s.store.view(func(t *tx) error {
			h, err := t.feedHead(project)
			if err != nil {
				return err
			}
			out.LatestSeq = h.latest
			switch {
			case latestOnly:
				return nil
			case first && after < h.floor:
				expired = "changes after " + strconv.FormatInt(after, 10) + " are no longer retained; re-read all widgets, then follow from latestSeq"
				return nil
			case first && after > h.latest:
				// Not a position this feed gave out: the client followed
				// another server, or one restored from an older backup.
				expired = "the feed has no position " + strconv.FormatInt(after, 10) + "; re-read all widgets, then follow from latestSeq"
				return nil
			}
			out.Changes, err = t.changesAfter(project, scanAfter, limit)
			return err
		})
		if err != nil {
			storeFailed(w, s, err)
			return
		}
		if expired != "" {
			writeProblem(w, widgetapi.Problem{
				Type: "https://widgetco.io/problems/" + widgetapi.CodeFeedExpired, Title: http.StatusText(http.StatusGone),
				Status: http.StatusGone, Code: widgetapi.CodeFeedExpired, LatestSeq: out.LatestSeq,
				Detail: expired,
			})
			return
		}
		if len(out.Changes) > 0 || deadline == nil {
			writeJSON(w, http.StatusOK, out)
			return
		}
		// Nothing of this project's up to LatestSeq: later reads start there.
		scanAfter = max(scanAfter, out.LatestSeq)
		select {
		case <-woken:
		case <-deadline:
			deadline = nil
		case <-r.Context().Done():
			return
		case <-s.stop:
			deadline = nil
		}
	}
}

// pollRetryAfter is the Retry-After of a long poll refused for the token's
// cap: a held poll answers within Options.MaxWait, usually much sooner.
const pollRetryAfter = 5 * time.Second

// holdPoll takes one of the long-poll slots of r's token, and returns the
// function that gives it back; ok is false when the token holds them all.
func (s *Server) holdPoll(r *http.Request) (release func(), ok bool) {
	h, _ := r.Context().Value(tokenKey{}).([32]byte)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.MaxPollsPerToken > 0 && s.polls[h] >= s.opts.MaxPollsPerToken {
		return nil, false
	}
	s.polls[h]++
	s.metrics.longPolls.Inc()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.polls[h]--; s.polls[h] <= 0 {
			delete(s.polls, h)
		}
		s.metrics.longPolls.Dec()
	}, true
}
