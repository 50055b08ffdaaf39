// Package widgetapi is the Go client for the Widget API, the external system
// that provider-widget manages. The API's contract is openapi.yaml in this
// directory; the reference server lives in widgetapi/server.
//
// A Client is safe for concurrent use. Every method takes a context and
// returns *Error for responses the API rejected; use IsNotFound, IsConflict,
// IsPreconditionFailed, IsRateLimited and IsInvalid rather than comparing
// status codes or messages.
package widgetapi

import "time"

// State is the lifecycle state of a widget. The server drives it.
type State string

// Widget lifecycle states.
const (
	// StateProvisioning: created, not usable yet.
	StateProvisioning State = "Provisioning"
	// StateReady: usable; Endpoint is set.
	StateReady State = "Ready"
	// StateResizing: a size change is being applied.
	StateResizing State = "Resizing"
	// StateFailed: provisioning failed; Message says why.
	StateFailed State = "Failed"
	// StateDeleting: deletion accepted; the widget disappears (404) soon.
	StateDeleting State = "Deleting"
)

// Widget sizes.
const (
	SizeSmall  = "small"
	SizeMedium = "medium"
	SizeLarge  = "large"
)

// Widget is a widget as the API reports it.
type Widget struct {
	// ID is the server-assigned identifier. It never changes.
	ID string `json:"id"`
	// Name is unique within a project and immutable.
	Name string `json:"name"`
	// Size is one of small, medium or large.
	Size string `json:"size"`
	// Region is fixed at creation.
	Region string `json:"region"`
	// Labels are free-form key/value pairs.
	Labels map[string]string `json:"labels,omitempty"`
	// Description is free text.
	Description string `json:"description,omitempty"`

	// State is the lifecycle state.
	State State `json:"state"`
	// Message explains the state when it is Failed.
	Message string `json:"message,omitempty"`
	// Endpoint is where the widget serves; set once it is Ready.
	Endpoint string `json:"endpoint,omitempty"`
	// Generation is bumped by every change to size, labels or description.
	// It is the widget's ETag for conditional updates.
	Generation int64 `json:"generation"`
	// CreatedAt is when the widget was created.
	CreatedAt time.Time `json:"createdAt"`
	// UpdatedAt is when the widget's spec or state last changed.
	UpdatedAt time.Time `json:"updatedAt"`
}

// CreateWidgetRequest is the body of a create call. Size and Region are
// optional; the server applies its defaults (size small, the server's default
// region).
type CreateWidgetRequest struct {
	Name        string            `json:"name"`
	Size        string            `json:"size,omitempty"`
	Region      string            `json:"region,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Description string            `json:"description,omitempty"`
}

// ReplaceWidgetRequest is the body of a PUT: it replaces every mutable field.
// An empty Size means the default size; nil Labels means no labels. Region,
// when set, must equal the widget's region (it is immutable).
type ReplaceWidgetRequest struct {
	Size        string            `json:"size,omitempty"`
	Region      string            `json:"region,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Description string            `json:"description,omitempty"`
}

// PatchWidgetRequest is the body of a PATCH: only the fields that are set
// change. Labels, when set, replaces the whole label map (point it at an empty
// map to remove all labels).
type PatchWidgetRequest struct {
	Size        *string            `json:"size,omitempty"`
	Region      *string            `json:"region,omitempty"`
	Labels      *map[string]string `json:"labels,omitempty"`
	Description *string            `json:"description,omitempty"`
}

// WidgetList is one page of widgets, ordered by name.
type WidgetList struct {
	Items []Widget `json:"items"`
	// NextPageToken fetches the next page; empty on the last page.
	NextPageToken string `json:"nextPageToken,omitempty"`
}

// ListWidgetsOptions filters and pages a list call.
type ListWidgetsOptions struct {
	// Labels selects widgets carrying all of these labels.
	Labels map[string]string
	// Limit is the page size; 0 means the server default (100), max 500.
	Limit int
	// PageToken continues a previous list call.
	PageToken string
}

// Key is an access key of a widget. The secret is never part of it.
type Key struct {
	// ID is the server-assigned identifier.
	ID string `json:"id"`
	// Name is unique within the widget.
	Name string `json:"name"`
	// Widget is the name of the widget the key belongs to.
	Widget string `json:"widget"`
	// Labels are free-form key/value pairs, set when the key is created
	// (keys cannot change). Clients use them to mark who created a key.
	Labels map[string]string `json:"labels,omitempty"`
	// Description is free text.
	Description string `json:"description,omitempty"`
	// CreatedAt is when the key was created.
	CreatedAt time.Time `json:"createdAt"`
}

// KeyWithSecret is the answer to a key create call, the only time the API
// reveals the secret. String() redacts the secret so it cannot leak through
// %v formatting.
type KeyWithSecret struct {
	Key
	// Secret authenticates clients of the widget. Store it now; it cannot
	// be read again.
	Secret string `json:"secret"`
}

// String returns a description of the key without its secret.
func (k KeyWithSecret) String() string {
	return "key " + k.Name + " of widget " + k.Widget + " (secret redacted)"
}

// GoString implements fmt.GoStringer so %#v redacts the secret too.
func (k KeyWithSecret) GoString() string { return k.String() }

// CreateKeyRequest is the body of a key create call.
type CreateKeyRequest struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels,omitempty"`
	Description string            `json:"description,omitempty"`
}

// VerifyKeyRequest is the body of a key verification: what a client of a
// widget presents.
type VerifyKeyRequest struct {
	Secret string `json:"secret"`
}

// String returns a description of the request without its secret.
func (VerifyKeyRequest) String() string { return "verify key (secret redacted)" }

// GoString implements fmt.GoStringer so %#v redacts the secret too.
func (r VerifyKeyRequest) GoString() string { return r.String() }

// KeyList is the keys of one widget, ordered by name.
type KeyList struct {
	Items []Key `json:"items"`
}

// ChangeType says what happened to a widget or key.
type ChangeType string

// Change types.
const (
	ChangeWidgetCreated ChangeType = "widget.created"
	ChangeWidgetUpdated ChangeType = "widget.updated"
	ChangeWidgetState   ChangeType = "widget.state"
	ChangeWidgetDeleted ChangeType = "widget.deleted"
	ChangeKeyCreated    ChangeType = "key.created"
	ChangeKeyDeleted    ChangeType = "key.deleted"
)

// Change is one entry of a project's change feed.
type Change struct {
	// Seq increases with every change; a project's feed may skip numbers.
	Seq int64 `json:"seq"`
	// Type says what happened.
	Type ChangeType `json:"type"`
	// Widget names the widget that changed (or whose key changed).
	Widget string `json:"widget"`
	// Key names the key for key.* changes.
	Key string `json:"key,omitempty"`
	// Generation is the widget's generation after the change.
	Generation int64 `json:"generation"`
	// State is the widget's state after the change.
	State State `json:"state,omitempty"`
	// Time is when the change happened.
	Time time.Time `json:"time"`
}

// ChangeList is the answer to a change feed call.
type ChangeList struct {
	// Changes after the requested sequence, oldest first.
	Changes []Change `json:"changes"`
	// LatestSeq is the newest sequence number the server has assigned. Resume
	// from it when Changes is empty.
	LatestSeq int64 `json:"latestSeq"`
}
