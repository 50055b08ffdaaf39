package server

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

// errAnswered aborts a transaction whose HTTP answer is already written.
var errAnswered = errors.New("answered")

func decodeRecord(v []byte) (*widgetRecord, error) {
	r := &widgetRecord{}
	return r, json.Unmarshal(v, r)
}

func newID(prefix string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// readBody decodes a request body strictly (see decode), at most
// maxBodyBytes of it, and answers 400/422 itself; it reports whether the
// handler may go on.
func readBody[T any](w http.ResponseWriter, r *http.Request, s *Server, v *T) bool {
	ferrs, err := decode(http.MaxBytesReader(w, r.Body, maxBodyBytes), v)
	var bad errBadJSON
	switch {
	case errors.As(err, &bad):
		problem(w, http.StatusBadRequest, widgetapi.CodeMalformed, bad.Error())
		return false
	case err != nil:
		s.log.Error("cannot decode a request body", "error", err)
		problem(w, http.StatusInternalServerError, widgetapi.CodeInternal, "the server could not read the request body")
		return false
	case len(ferrs) > 0:
		invalid(w, ferrs)
		return false
	}
	return true
}

// notFound answers 404 for what (which may repeat a path; the problem is
// clipped).
func notFound(w http.ResponseWriter, what string) {
	problem(w, http.StatusNotFound, widgetapi.CodeNotFound, what+" not found")
}

func storeFailed(w http.ResponseWriter, s *Server, err error) {
	s.log.Error("store operation failed", "error", err)
	problem(w, http.StatusInternalServerError, widgetapi.CodeInternal, "the server could not complete the request; retry later")
}

// ifMatch checks an If-Match header against the widget's generation and
// answers 412 itself when it does not match.
func ifMatch(w http.ResponseWriter, r *http.Request, cur *widgetapi.Widget) bool {
	h := r.Header.Get("If-Match")
	if h == "" || h == "*" {
		return true
	}
	for _, tag := range strings.Split(h, ",") {
		if strings.TrimPrefix(strings.TrimSpace(tag), "W/") == widgetapi.ETag(cur.Generation) {
			return true
		}
	}
	w.Header().Set("ETag", widgetapi.ETag(cur.Generation))
	problem(w, http.StatusPreconditionFailed, widgetapi.CodePreconditionFailed,
		"the widget changed since it was read (generation is now "+strconv.FormatInt(cur.Generation, 10)+"); read it again and retry")
	return false
}

func (s *Server) createWidget(w http.ResponseWriter, r *http.Request) {
	req := widgetapi.CreateWidgetRequest{}
	if !readBody(w, r, s, &req) {
		return
	}
	logWidget(w, req.Name)
	if errs := s.validateCreate(&req); len(errs) > 0 {
		invalid(w, errs)
		return
	}
	project := projectOf(r)
	now := s.opts.Now().UTC()
	rec := &widgetRecord{
		Project: project,
		Widget: widgetapi.Widget{
			ID:          newID("w-"),
			Name:        req.Name,
			Size:        req.Size,
			Region:      req.Region,
			Labels:      req.Labels,
			Description: req.Description,
			State:       widgetapi.StateProvisioning,
			Generation:  1,
			CreatedAt:   now,
			UpdatedAt:   now,
		},
		DueAt: now.Add(s.opts.ProvisionDelay),
	}
	if rec.Widget.Size == "" {
		rec.Widget.Size = widgetapi.SizeSmall
	}
	if rec.Widget.Region == "" {
		rec.Widget.Region = s.opts.DefaultRegion
	}
	changes, err := s.store.update(func(t *tx) error {
		if cur, err := t.getWidget(project, req.Name); err == nil {
			detail := "a widget named " + req.Name + " already exists in this project"
			if cur.Widget.State == widgetapi.StateDeleting {
				detail = "a widget named " + req.Name + " is being deleted; retry once it is gone"
			}
			problem(w, http.StatusConflict, widgetapi.CodeAlreadyExists, detail)
			return errAnswered
		}
		if err := t.putWidget(rec); err != nil {
			return err
		}
		return t.appendChange(project, widgetapi.Change{Type: widgetapi.ChangeWidgetCreated, Widget: req.Name, Generation: 1, State: widgetapi.StateProvisioning, Time: now})
	})
	if errors.Is(err, errAnswered) {
		return
	}
	if err != nil {
		storeFailed(w, s, err)
		return
	}
	s.sched.add(project, req.Name, rec.DueAt)
	s.committed(changes)
	w.Header().Set("Location", "/v1/widgets/"+req.Name)
	writeWidget(w, http.StatusCreated, &rec.Widget)
}

func (s *Server) getWidget(w http.ResponseWriter, r *http.Request) {
	var rec *widgetRecord
	err := s.store.view(func(t *tx) error {
		var err error
		rec, err = t.getWidget(projectOf(r), r.PathValue("name"))
		return err
	})
	switch {
	case errors.Is(err, errNotFound):
		notFound(w, "widget "+r.PathValue("name"))
	case err != nil:
		storeFailed(w, s, err)
	default:
		writeWidget(w, http.StatusOK, &rec.Widget)
	}
}

const (
	defaultPageSize = 100
	maxPageSize     = 500
)

func (s *Server) listWidgets(w http.ResponseWriter, r *http.Request) {
	q := parseQuery(r)
	sel := q.labelSelector()
	limit := int(q.integer("limit", 1, maxPageSize, defaultPageSize))
	after := q.pageToken()
	if len(q.errs) > 0 {
		invalid(w, q.errs)
		return
	}
	list := widgetapi.WidgetList{}
	err := s.store.view(func(t *tx) error {
		items, more, err := t.listWidgets(projectOf(r), after, sel, limit)
		list.Items = items
		if more && len(items) > 0 {
			list.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(items[len(items)-1].Name))
		}
		return err
	})
	if err != nil {
		storeFailed(w, s, err)
		return
	}
	if list.Items == nil {
		list.Items = []widgetapi.Widget{}
	}
	writeJSON(w, http.StatusOK, list)
}

// spec is the mutable part of a widget.
type spec struct {
	size, description string
	labels            map[string]string
}

func (s *Server) replaceWidget(w http.ResponseWriter, r *http.Request) {
	req := widgetapi.ReplaceWidgetRequest{}
	if !readBody(w, r, s, &req) {
		return
	}
	s.update(w, r, func(cur *widgetapi.Widget) (spec, fieldErrors) {
		sp := spec{size: req.Size, description: req.Description, labels: req.Labels}
		if sp.size == "" {
			sp.size = widgetapi.SizeSmall
		}
		return sp, validateReplace(&req, cur)
	})
}

func (s *Server) patchWidget(w http.ResponseWriter, r *http.Request) {
	req := widgetapi.PatchWidgetRequest{}
	if !readBody(w, r, s, &req) {
		return
	}
	s.update(w, r, func(cur *widgetapi.Widget) (spec, fieldErrors) {
		sp := spec{size: cur.Size, description: cur.Description, labels: cur.Labels}
		if req.Size != nil {
			sp.size = *req.Size
		}
		if req.Description != nil {
			sp.description = *req.Description
		}
		if req.Labels != nil {
			sp.labels = *req.Labels
		}
		return sp, validatePatch(&req, cur)
	})
}

// update applies a PUT or PATCH: precondition, state and validation checks,
// then the change in one transaction. An update that changes nothing leaves
// the generation alone.
func (s *Server) update(w http.ResponseWriter, r *http.Request, desired func(cur *widgetapi.Widget) (spec, fieldErrors)) {
	project, name := projectOf(r), r.PathValue("name")
	now := s.opts.Now().UTC()
	var out widgetapi.Widget
	var due time.Time
	changes, err := s.store.update(func(t *tx) error {
		rec, err := t.getWidget(project, name)
		if errors.Is(err, errNotFound) {
			notFound(w, "widget "+name)
			return errAnswered
		}
		if err != nil {
			return err
		}
		cur := &rec.Widget
		if !ifMatch(w, r, cur) {
			return errAnswered
		}
		if cur.State == widgetapi.StateDeleting {
			problem(w, http.StatusConflict, widgetapi.CodeConflict, "widget "+name+" is being deleted and cannot be changed")
			return errAnswered
		}
		sp, errs := desired(cur)
		if len(errs) > 0 {
			invalid(w, errs)
			return errAnswered
		}
		if len(sp.labels) == 0 {
			sp.labels = nil
		}
		if sp.size == cur.Size && sp.description == cur.Description && maps.Equal(sp.labels, cur.Labels) {
			out = *cur
			return nil
		}
		if sp.size != cur.Size {
			switch cur.State {
			case widgetapi.StateReady, widgetapi.StateFailed, widgetapi.StateResizing:
				cur.State = widgetapi.StateResizing
				cur.Message = ""
				rec.DueAt = now.Add(s.opts.ResizeDelay)
				due = rec.DueAt
			default: // still provisioning: it comes up at the new size
			}
		}
		cur.Size, cur.Description, cur.Labels = sp.size, sp.description, sp.labels
		cur.Generation++
		cur.UpdatedAt = now
		out = *cur
		if err := t.putWidget(rec); err != nil {
			return err
		}
		return t.appendChange(project, widgetapi.Change{Type: widgetapi.ChangeWidgetUpdated, Widget: name, Generation: cur.Generation, State: cur.State, Time: now})
	})
	if errors.Is(err, errAnswered) {
		return
	}
	if err != nil {
		storeFailed(w, s, err)
		return
	}
	if !due.IsZero() {
		s.sched.add(project, name, due)
	}
	s.committed(changes)
	writeWidget(w, http.StatusOK, &out)
}

func (s *Server) deleteWidget(w http.ResponseWriter, r *http.Request) {
	project, name := projectOf(r), r.PathValue("name")
	now := s.opts.Now().UTC()
	var out widgetapi.Widget
	var due time.Time
	changes, err := s.store.update(func(t *tx) error {
		rec, err := t.getWidget(project, name)
		if errors.Is(err, errNotFound) {
			notFound(w, "widget "+name)
			return errAnswered
		}
		if err != nil {
			return err
		}
		if !ifMatch(w, r, &rec.Widget) {
			return errAnswered
		}
		if rec.Widget.State == widgetapi.StateDeleting {
			out = rec.Widget
			return nil
		}
		rec.Widget.State = widgetapi.StateDeleting
		rec.Widget.Message = ""
		rec.Widget.UpdatedAt = now
		rec.DueAt = now.Add(s.opts.DeleteDelay)
		due = rec.DueAt
		out = rec.Widget
		if err := t.putWidget(rec); err != nil {
			return err
		}
		return t.appendChange(project, widgetapi.Change{Type: widgetapi.ChangeWidgetState, Widget: name, Generation: rec.Widget.Generation, State: widgetapi.StateDeleting, Time: now})
	})
	if errors.Is(err, errAnswered) {
		return
	}
	if err != nil {
		storeFailed(w, s, err)
		return
	}
	if !due.IsZero() {
		s.sched.add(project, name, due)
	}
	s.committed(changes)
	writeWidget(w, http.StatusAccepted, &out)
}
