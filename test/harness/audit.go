package harness

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// auditPolicy makes kube-apiserver record every request a ServiceAccount
// makes - the package runtimes' requests, made with exactly the permissions
// Crossplane's RBAC manager gave them - and nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: None
`

// maxAuditLine bounds one audit event the parser reads.
const maxAuditLine = 1 << 20

// A Forbidden is a request kube-apiserver refused with 403 Forbidden.
type Forbidden struct {
	User      string
	Verb      string
	Resource  string
	Namespace string
	Name      string
	// Count is how often the same request was refused.
	Count int
	// Starting is true for requests kube-apiserver refused while it was
	// starting again (StartAPIServer): it serves before its RBAC authorizer
	// has read every role, and refuses what the roles allow for a moment.
	Starting bool
	// Rollout is true for requests refused while a package revision was
	// being replaced (ExpectRollout).
	Rollout bool
}

func (f Forbidden) String() string {
	obj := f.Resource
	if f.Namespace != "" {
		obj += " in namespace " + f.Namespace
	}
	if f.Name != "" {
		obj += " named " + f.Name
	}
	when := ""
	if f.Starting {
		when = ", while kube-apiserver was starting"
	}
	if f.Rollout {
		when += ", during a package rollout"
	}
	return fmt.Sprintf("%s may not %s %s (%d times%s)", f.User, f.Verb, obj, f.Count, when)
}

// Forbidden returns the requests of ServiceAccounts (the package runtimes)
// that kube-apiserver refused because RBAC does not allow them, read from
// its audit log. A missing rule in what Crossplane grants a provider shows up
// here first.
func (h *Harness) Forbidden() ([]Forbidden, error) {
	h.mu.Lock()
	starts := slices.Clone(h.apiStarts)
	rollouts := slices.Clone(h.rollouts)
	h.mu.Unlock()
	within := func(ws [][2]time.Time, t time.Time) bool {
		return slices.ContainsFunc(ws, func(w [2]time.Time) bool { return !t.Before(w[0]) && !t.After(w[1]) })
	}
	seen := map[Forbidden]int{}
	err := h.eachAuditEvent([]string{`"code":403`}, func(e auditEvent) {
		if e.ResponseStatus.Code != 403 {
			return
		}
		r := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			r += "/" + e.ObjectRef.Subresource
		}
		if e.ObjectRef.APIGroup != "" {
			r += "." + e.ObjectRef.APIGroup
		}
		seen[Forbidden{
			User: e.User.Username, Verb: e.Verb, Resource: r, Namespace: e.ObjectRef.Namespace, Name: e.ObjectRef.Name,
			Starting: within(starts, e.Received), Rollout: within(rollouts, e.Received),
		}]++
	})
	if err != nil {
		return nil, err
	}
	out := make([]Forbidden, 0, len(seen))
	for k, n := range seen {
		k.Count = n
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// auditEvent is what the checks here read of one audit event.
type auditEvent struct {
	Verb      string                    `json:"verb"`
	User      struct{ Username string } `json:"user"`
	ObjectRef struct {
		Resource, Subresource, Namespace, Name, APIGroup string
	} `json:"objectRef"`
	ResponseStatus struct{ Code int } `json:"responseStatus"`
	Received       time.Time          `json:"requestReceivedTimestamp"`
}

// eachAuditEvent calls fn with each event of kube-apiserver's audit log
// whose line contains every string in must (a cheap filter before parsing).
func (h *Harness) eachAuditEvent(must []string, fn func(auditEvent)) error {
	f, err := os.Open(h.auditLog())
	if err != nil {
		return errors.Wrap(err, "cannot read kube-apiserver's audit log")
	}
	defer f.Close() //nolint:errcheck // Read only.
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxAuditLine)
lines:
	for sc.Scan() {
		for _, m := range must {
			if !strings.Contains(sc.Text(), m) {
				continue lines
			}
		}
		var e auditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			continue
		}
		fn(e)
	}
	return errors.Wrap(sc.Err(), "cannot read kube-apiserver's audit log")
}

// ExpectRollout marks the time from now until done is called as a package
// rollout: a Provider or Function gets a new revision (an upgrade, another
// runtime config). Crossplane gives each revision its own ServiceAccount, so
// for a moment the outgoing pods run with a ServiceAccount whose binding is
// gone and the incoming ones with one the RBAC manager has not bound yet;
// Forbidden marks what kube-apiserver refused then as Rollout. Call done
// once the old pods are gone (DependencyProvider and DependencyFunction wait
// for that).
func (h *Harness) ExpectRollout() (done func()) {
	start := time.Now()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.rollouts = append(h.rollouts, [2]time.Time{start, time.Now()})
	}
}

func (h *Harness) auditLog() string { return h.dir + "/logs/kube-apiserver-audit.log" }

// EventCreates is how many Events a ServiceAccount asked kube-apiserver to
// create during the run, and how many of those kube-apiserver refused as
// already existing. An event recorder names each Event after its object and
// the time, so a refusal means the same Event was sent again: a retry after
// a lost response, rarely; every Event twice, when a process runs two sinks
// for one recorder.
type EventCreates struct {
	User      string
	Created   int
	Conflicts int
}

// EventCreates returns the Event creates of each ServiceAccount, read from
// kube-apiserver's audit log, by user name.
func (h *Harness) EventCreates() ([]EventCreates, error) {
	by := map[string]*EventCreates{}
	err := h.eachAuditEvent([]string{`"resource":"events"`, `"verb":"create"`}, func(e auditEvent) {
		if e.Verb != "create" || e.ObjectRef.Resource != "events" {
			return
		}
		c, ok := by[e.User.Username]
		if !ok {
			c = &EventCreates{User: e.User.Username}
			by[e.User.Username] = c
		}
		switch e.ResponseStatus.Code {
		case 201:
			c.Created++
		case 409:
			c.Conflicts++
		}
	})
	if err != nil {
		return nil, err
	}
	out := make([]EventCreates, 0, len(by))
	for _, c := range by {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].User < out[j].User })
	return out, nil
}
