package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/widgetco/crossplane-widget/widgetapi"
)

// errBadJSON marks a body that is not a single JSON object (400); problems
// with its fields are field errors (422) instead.
type errBadJSON struct{ err error }

func (e errBadJSON) Error() string { return e.err.Error() }

// decode reads a request body of at most maxBodyBytes into v, strictly, as
// the contract's additionalProperties: false means it: field names must be
// exactly the ones v's json tags declare (case-sensitive) and appear at most
// once, label keys too; strings must be valid UTF-8 (no lone surrogate
// escapes); values must have their field's type (null counts as absent).
// Those problems come back as field errors with their paths. A body that is
// not one JSON object, or has anything but white space after it, is an
// errBadJSON. Any other error is the server's fault.
//
// encoding/json alone matches names case-insensitively, lets the last of
// duplicate names win and replaces invalid UTF-8, so a token-level pass over
// the raw body comes first and json.Unmarshal only sees bodies it passed.
func decode[T any](r io.Reader, v *T) ([]widgetapi.FieldError, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxBodyBytes+1))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig) || len(data) > maxBodyBytes:
		return nil, errBadJSON{fmt.Errorf("request body exceeds %d bytes", maxBodyBytes)}
	case err != nil:
		return nil, errBadJSON{fmt.Errorf("cannot read request body: %w", err)}
	}
	errs, err := checkBody(data, schemaFor[T]())
	if err != nil {
		return nil, errBadJSON{err}
	}
	if len(errs) > 0 {
		return errs, nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return nil, fmt.Errorf("cannot decode a checked request body: %w", err)
	}
	return nil, nil
}

// fieldKind is the JSON type a request body field takes.
type fieldKind int

const (
	kindString    fieldKind = iota + 1 // a string, or null
	kindStringMap                      // an object of strings, or null
)

// bodySchema maps a request body's exact field names to their kinds.
type bodySchema map[string]fieldKind

var bodySchemas sync.Map // reflect.Type -> bodySchema

// schemaFor derives T's body schema from its json tags, once. It panics on
// a field type the strict decoder does not know: a programming error every
// test of that body finds.
func schemaFor[T any]() bodySchema {
	t := reflect.TypeFor[T]()
	if s, ok := bodySchemas.Load(t); ok {
		return s.(bodySchema) // only bodySchemas are stored
	}
	s := bodySchema{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft.Kind() == reflect.String:
			s[name] = kindString
		case ft.Kind() == reflect.Map && ft.Key().Kind() == reflect.String && ft.Elem().Kind() == reflect.String:
			s[name] = kindStringMap
		default:
			panic(fmt.Sprintf("request body %s: field %s has type %s, which the strict decoder does not handle", t, f.Name, f.Type))
		}
	}
	bodySchemas.Store(t, s)
	return s
}

// checkBody checks data against sch without decoding it: see decode.
func checkBody(data []byte, sch bodySchema) (fieldErrors, error) {
	t := &tokens{dec: json.NewDecoder(bytes.NewReader(data)), data: data}
	tok, _, err := t.next()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, errors.New("request body must be a JSON object")
	}
	var errs fieldErrors
	seen := map[string]bool{}
	for t.dec.More() {
		tok, raw, err := t.next()
		if err != nil {
			return nil, err
		}
		name, _ := tok.(string) // object keys are strings
		kind, known := sch[name]
		switch {
		case !validString(raw):
			errs.add(pathName(name), "field name must be valid UTF-8")
			known = false
		case seen[name]:
			errs.add(pathName(name), "is given more than once")
			known = false
		case !known:
			errs.add(pathName(name), unknownField(sch, name))
		}
		seen[name] = true
		switch {
		case !known:
			err = t.skip()
		case kind == kindString:
			err = t.checkString(name, &errs)
		default:
			err = t.checkStringMap(name, &errs)
		}
		if err != nil {
			return nil, err
		}
	}
	if _, _, err := t.next(); err != nil { // the closing '}'
		return nil, err
	}
	if _, err := t.dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("request body has data after the JSON object")
	}
	return errs, nil
}

// pathName is a field name as a path: the empty name shows as "".
func pathName(name string) string {
	if name == "" {
		return `""`
	}
	return name
}

// unknownField explains an unknown name, pointing out a known one it
// matches but for case (encoding/json's folding, which this refuses).
func unknownField(sch bodySchema, name string) string {
	for known := range sch {
		if strings.EqualFold(known, name) {
			return fmt.Sprintf("unknown field; field names are case-sensitive: did you mean %q?", known)
		}
	}
	return "unknown field"
}

// tokens walks a body token by token, keeping each token's raw bytes.
type tokens struct {
	dec  *json.Decoder
	data []byte
}

// next returns the next token and the raw bytes since the previous one (the
// token and any separators before it). Syntax errors are reported without
// echoing the body.
func (t *tokens) next() (json.Token, []byte, error) {
	start := t.dec.InputOffset()
	tok, err := t.dec.Token()
	switch {
	case errors.Is(err, io.EOF) && start == 0:
		return nil, nil, errors.New("request body is empty; send a JSON object")
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return nil, nil, errors.New("request body ends before its JSON object does")
	case err != nil:
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, nil, fmt.Errorf("request body is not valid JSON at byte %d: %s", se.Offset, se.Error())
		}
		return nil, nil, fmt.Errorf("request body is not valid JSON: %w", err)
	}
	return tok, t.data[start:t.dec.InputOffset()], nil
}

// skip consumes one value, however deeply nested, without recursion.
func (t *tokens) skip() error {
	tok, _, err := t.next()
	if err != nil {
		return err
	}
	return t.skipRest(tok)
}

// skipRest consumes the rest of the value that tok opened, if it opened
// one.
func (t *tokens) skipRest(tok json.Token) error {
	depth := 0
	if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
		depth = 1
	}
	for depth > 0 {
		tok, _, err := t.next()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// checkString checks that the next value is a string of valid UTF-8, or
// null.
func (t *tokens) checkString(path string, errs *fieldErrors) error {
	tok, raw, err := t.next()
	if err != nil {
		return err
	}
	switch tok.(type) {
	case nil:
	case string:
		if !validString(raw) {
			errs.add(path, "must be valid UTF-8")
		}
	default:
		errs.add(path, "must be a string")
	}
	return t.skipRest(tok)
}

// checkStringMap checks that the next value is an object of strings, or
// null, whose keys are valid UTF-8 and appear once each.
func (t *tokens) checkStringMap(path string, errs *fieldErrors) error {
	tok, _, err := t.next()
	if err != nil {
		return err
	}
	if tok == nil {
		return nil
	}
	if tok != json.Delim('{') {
		errs.add(path, "must be a JSON object")
		return t.skipRest(tok)
	}
	seen := map[string]bool{}
	for t.dec.More() {
		tok, raw, err := t.next()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		kpath := path + "[" + key + "]"
		switch {
		case !validString(raw):
			errs.add(kpath, "key must be valid UTF-8")
		case seen[key]:
			errs.add(kpath, "is given more than once")
		}
		seen[key] = true
		if err := t.checkString(kpath, errs); err != nil {
			return err
		}
	}
	_, _, err = t.next() // the closing '}'
	return err
}

// validString reports whether the raw bytes of a JSON string token are
// valid UTF-8 and escape no lone UTF-16 surrogate (encoding/json would turn
// either into U+FFFD).
func validString(raw []byte) bool {
	if !utf8.Valid(raw) {
		return false
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++
		if i >= len(raw) || raw[i] != 'u' {
			continue // a one-character escape
		}
		r, ok := hex4(raw, i+1)
		if !ok {
			return false
		}
		i += 4
		switch {
		case r >= 0xDC00 && r <= 0xDFFF: // a low surrogate first
			return false
		case r >= 0xD800 && r <= 0xDBFF: // a high surrogate needs a low one
			if i+2 >= len(raw) || raw[i+1] != '\\' || raw[i+2] != 'u' {
				return false
			}
			lo, ok := hex4(raw, i+3)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return false
			}
			i += 6
		}
	}
	return true
}

// hex4 parses the four hex digits at raw[i:].
func hex4(raw []byte, i int) (rune, bool) {
	if i+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
