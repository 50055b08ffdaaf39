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
// Options.MaxWait, and gives it that long on top of its write timeout.
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
