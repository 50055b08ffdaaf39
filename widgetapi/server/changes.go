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
// sequence number, waiting up to `wait` seconds for the first one.
func (s *Server) listChanges(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var errs fieldErrors
	var after int64
	latestOnly := false
	switch v := q.Get("after"); v {
	case "":
	case "latest":
		latestOnly = true
	default:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			errs.add("after", "must be a sequence number (0 for the beginning) or \"latest\"")
		}
		after = n
	}
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs.add("wait", "must be a number of seconds, 0 or more")
		}
		wait = min(time.Duration(n)*time.Second, s.opts.MaxWait)
	}
	limit := defaultChangesLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxChangesLimit {
			errs.add("limit", "must be an integer from 1 to 1000")
		}
		limit = n
	}
	if len(errs) > 0 {
		invalid(w, errs)
		return
	}

	project := projectOf(r)
	var deadline <-chan time.Time
	if wait > 0 && !latestOnly {
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
		expired := false
		err := s.store.view(func(t *tx) error {
			out.LatestSeq = t.latestSeq()
			if latestOnly {
				return nil
			}
			if first && after+1 < t.oldestRetained() && after < out.LatestSeq {
				expired = true
				return nil
			}
			var err error
			out.Changes, err = t.changesAfter(project, scanAfter, limit)
			return err
		})
		if err != nil {
			storeFailed(w, s, err)
			return
		}
		if expired {
			writeProblem(w, widgetapi.Problem{
				Type: "https://widgetco.io/problems/" + widgetapi.CodeFeedExpired, Title: http.StatusText(http.StatusGone),
				Status: http.StatusGone, Code: widgetapi.CodeFeedExpired, LatestSeq: out.LatestSeq,
				Detail: "changes after " + strconv.FormatInt(after, 10) + " are no longer retained; re-read all widgets, then follow from latestSeq",
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
