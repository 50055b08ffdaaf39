package server

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

// newSecret returns a random key secret. Only its SHA-256 is stored.
func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "wks_" + base64.RawURLEncoding.EncodeToString(b)
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) {
	req := widgetapi.CreateKeyRequest{}
	if !readBody(w, r, s, &req) {
		return
	}
	if errs := validateKey(&req); len(errs) > 0 {
		invalid(w, errs)
		return
	}
	project, widget := projectOf(r), r.PathValue("name")
	now := s.opts.Now().UTC()
	secret := newSecret()
	sum := sha256.Sum256([]byte(secret))
	out := widgetapi.KeyWithSecret{
		Key:    widgetapi.Key{ID: newID("k-"), Name: req.Name, Widget: widget, Labels: req.Labels, Description: req.Description, CreatedAt: now},
		Secret: secret,
	}
	changes, err := s.store.update(func(t *tx) error {
		wr, err := t.getWidget(project, widget)
		if errors.Is(err, errNotFound) {
			notFound(w, "widget "+widget)
			return errAnswered
		}
		if err != nil {
			return err
		}
		if wr.Widget.State == widgetapi.StateDeleting {
			problem(w, http.StatusConflict, widgetapi.CodeConflict, "widget "+widget+" is being deleted; it cannot get new keys")
			return errAnswered
		}
		if _, err := t.getKey(project, widget, req.Name); err == nil {
			problem(w, http.StatusConflict, widgetapi.CodeAlreadyExists, "widget "+widget+" already has a key named "+req.Name)
			return errAnswered
		}
		if err := t.putKey(project, &keyRecord{Key: out.Key, SecretHash: sum[:]}); err != nil {
			return err
		}
		return t.appendChange(project, widgetapi.Change{Type: widgetapi.ChangeKeyCreated, Widget: widget, Key: req.Name, Generation: wr.Widget.Generation, State: wr.Widget.State, Time: now})
	})
	if errors.Is(err, errAnswered) {
		return
	}
	if err != nil {
		storeFailed(w, s, err)
		return
	}
	s.committed(changes)
	w.Header().Set("Location", "/v1/widgets/"+widget+"/keys/"+req.Name)
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) getKey(w http.ResponseWriter, r *http.Request) {
	project, widget, key := projectOf(r), r.PathValue("name"), r.PathValue("key")
	var kr *keyRecord
	err := s.store.view(func(t *tx) error {
		if _, err := t.getWidget(project, widget); err != nil {
			return err
		}
		var err error
		kr, err = t.getKey(project, widget, key)
		return err
	})
	switch {
	case errors.Is(err, errNotFound):
		notFound(w, "key "+key+" of widget "+widget)
	case err != nil:
		storeFailed(w, s, err)
	default:
		writeJSON(w, http.StatusOK, kr.Key)
	}
}

// verifyKey answers whether a secret is a valid key of the widget: what the
// widget checks when one of its clients calls it. It is the data plane's
// view of the keys: a revoked key is not found, whoever asks. The secret
// travels in the body, never in the URL, so that it reaches no access log.
func (s *Server) verifyKey(w http.ResponseWriter, r *http.Request) {
	req := widgetapi.VerifyKeyRequest{}
	if !readBody(w, r, s, &req) {
		return
	}
	project, widget := projectOf(r), r.PathValue("name")
	sum := sha256.Sum256([]byte(req.Secret))
	var k *widgetapi.Key
	err := s.store.view(func(t *tx) error {
		if _, err := t.getWidget(project, widget); err != nil {
			return err
		}
		var err error
		k, err = t.keyBySecret(project, widget, sum[:])
		return err
	})
	switch {
	case errors.Is(err, errNotFound):
		notFound(w, "a valid key of widget "+widget+" with this secret")
	case err != nil:
		storeFailed(w, s, err)
	default:
		writeJSON(w, http.StatusOK, k)
	}
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) {
	project, widget := projectOf(r), r.PathValue("name")
	list := widgetapi.KeyList{}
	err := s.store.view(func(t *tx) error {
		if _, err := t.getWidget(project, widget); err != nil {
			return err
		}
		var err error
		list.Items, err = t.listKeys(project, widget)
		return err
	})
	switch {
	case errors.Is(err, errNotFound):
		notFound(w, "widget "+widget)
	case err != nil:
		storeFailed(w, s, err)
	default:
		writeJSON(w, http.StatusOK, list)
	}
}

func (s *Server) deleteKey(w http.ResponseWriter, r *http.Request) {
	project, widget, key := projectOf(r), r.PathValue("name"), r.PathValue("key")
	now := s.opts.Now().UTC()
	changes, err := s.store.update(func(t *tx) error {
		wr, err := t.getWidget(project, widget)
		if err != nil {
			return err
		}
		if _, err := t.getKey(project, widget, key); err != nil {
			return err
		}
		if err := t.deleteKey(project, widget, key); err != nil {
			return err
		}
		return t.appendChange(project, widgetapi.Change{Type: widgetapi.ChangeKeyDeleted, Widget: widget, Key: key, Generation: wr.Widget.Generation, State: wr.Widget.State, Time: now})
	})
	switch {
	case errors.Is(err, errNotFound):
		notFound(w, "key "+key+" of widget "+widget)
	case err != nil:
		storeFailed(w, s, err)
	default:
		s.committed(changes)
		w.WriteHeader(http.StatusNoContent)
	}
}
