package server

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

// query reads a request's query parameters strictly, collecting a field
// error named after each parameter that is malformed, repeated or out of
// range. Parameters a handler does not read are ignored.
type query struct {
	vals url.Values
	errs fieldErrors
}

func parseQuery(r *http.Request) *query {
	q := &query{}
	vals, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		q.errs.add("query", "is not a valid query string: use name=value pairs joined by '&', percent-encoded")
	}
	q.vals = vals
	return q
}

// get returns the parameter's value and whether it is present (possibly
// empty). Giving a parameter more than once is an error.
func (q *query) get(name string) (string, bool) {
	vs := q.vals[name]
	switch {
	case len(vs) == 0:
		return "", false
	case len(vs) > 1:
		q.errs.add(name, "must be given at most once")
		return "", false
	}
	return vs[0], true
}

// integer returns the parameter as a decimal integer from lo to hi (ASCII
// digits only: no sign, no space; not empty), or def when it is absent.
func (q *query) integer(name string, lo, hi, def int64) int64 {
	v, ok := q.get(name)
	if !ok {
		return def
	}
	n, err := parseDecimal(v)
	if err != nil || n < lo || n > hi {
		q.errs.add(name, fmt.Sprintf("must be an integer from %d to %d", lo, hi))
		return def
	}
	return n
}

// parseDecimal parses a non-negative decimal integer of ASCII digits.
func parseDecimal(v string) (int64, error) {
	if v == "" {
		return 0, strconv.ErrSyntax
	}
	for i := range len(v) {
		if v[i] < '0' || v[i] > '9' {
			return 0, strconv.ErrSyntax
		}
	}
	return strconv.ParseInt(v, 10, 64)
}

// labelSelector returns the labelSelector parameter: at most maxLabels
// key=value pairs with keys and values a label may have, each key once.
// Absent or empty, it selects everything.
func (q *query) labelSelector() map[string]string {
	v, ok := q.get("labelSelector")
	if !ok || v == "" {
		return nil
	}
	sel, err := widgetapi.ParseLabelSelector(v)
	if err != nil {
		q.errs.add("labelSelector", err.Error())
		return nil
	}
	if n := len(sel); n > widgetapi.MaxLabels || n != countPairs(v) {
		q.errs.add("labelSelector", fmt.Sprintf("must be at most %d key=value pairs with distinct keys", widgetapi.MaxLabels))
		return nil
	}
	var errs fieldErrors
	validLabels(sel, &errs)
	if len(errs) > 0 {
		q.errs.add("labelSelector", "must select labels a widget can have: "+errs[0].Message)
		return nil
	}
	return sel
}

func countPairs(s string) int {
	n := 1
	for i := range len(s) {
		if s[i] == ',' {
			n++
		}
	}
	return n
}

// maxPageToken bounds a pageToken: the base64 of a widget name.
const maxPageToken = 2 * widgetapi.MaxNameLength

// pageToken returns the widget name a pageToken this server issued encodes;
// absent or empty, the first page.
func (q *query) pageToken() string {
	v, ok := q.get("pageToken")
	if !ok || v == "" {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if len(v) > maxPageToken || err != nil || !widgetapi.ValidName(string(b)) {
		q.errs.add("pageToken", "is not a token this server returned; start again without it")
		return ""
	}
	return string(b)
}
