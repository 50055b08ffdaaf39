// Package audit reads kube-apiserver's audit log: what ServiceAccounts
// asked for, what RBAC refused, how many Events each sent twice, and what
// each write changed. Start kube-apiserver with a Log's policy file and
// path (kube.Options.AuditPolicy and AuditLog).
package audit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// auditPolicy makes kube-apiserver record every request a ServiceAccount
// makes - the package runtimes' requests, made with exactly the permissions
// Crossplane's RBAC manager gave them - and nothing else. A watch is
// recorded when it starts (ResponseStarted) as well as when it ends: client-go
// informers start with a watch, not a list, and keep it open for minutes, so
// a run shorter than that would otherwise record none.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: None
`

// auditBodiesPolicy is auditPolicy that also records the request and
// response bodies of every write a ServiceAccount makes to a managed
// resource, an XR or a claim of this project's APIs, so that what each write
// changed can be read from the log
// (notes/convergence-log.md#2026-11-26-third-session-what-every-write-changed-by-client). Set
// WIDGET_AUDIT_BODIES=1 to use it; the log grows by a few kilobytes per
// write.
const auditBodiesPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: RequestResponse
  userGroups: ["system:serviceaccounts"]
  verbs: ["create", "update", "patch"]
  resources:
  - group: widget.m.widgetco.io
  - group: widget.widgetco.io
  - group: platform.widgetco.io
  - group: legacy.platform.widgetco.io
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: None
`

// Policy returns the audit policy the environment asks for.
func Policy() string {
	if os.Getenv("WIDGET_AUDIT_BODIES") != "" {
		return auditBodiesPolicy
	}
	return auditPolicy
}

// A Log is kube-apiserver's audit log at Path (rotated files beside it),
// with the windows in which refusals are expected.
type Log struct {
	// Path is the audit log kube-apiserver writes (--audit-log-path).
	Path string

	mu sync.Mutex
	// apiStarts are the windows in which kube-apiserver started again,
	// with a few seconds' grace.
	apiStarts [][2]time.Time
	// rollouts are the windows in which a package revision was replaced
	// (ExpectRollout).
	rollouts [][2]time.Time
}

// APIServerStarting marks [from, to] as a time in which kube-apiserver was
// starting again: it serves before its RBAC authorizer has read every
// role, and refuses for a moment what the roles allow (Forbidden marks
// those refusals Starting).
func (l *Log) APIServerStarting(from, to time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.apiStarts = append(l.apiStarts, [2]time.Time{from, to})
}

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
	// starting again (APIServerStarting): it serves before its RBAC authorizer
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
func (l *Log) Forbidden() ([]Forbidden, error) {
	l.mu.Lock()
	starts := slices.Clone(l.apiStarts)
	rollouts := slices.Clone(l.rollouts)
	l.mu.Unlock()
	within := func(ws [][2]time.Time, t time.Time) bool {
		return slices.ContainsFunc(ws, func(w [2]time.Time) bool { return !t.Before(w[0]) && !t.After(w[1]) })
	}
	seen := map[Forbidden]int{}
	err := l.eachAuditEvent([]string{`"code":403`}, func(e auditEvent) {
		// A 403 that RBAC allowed was refused for another reason: a create
		// in a namespace being deleted, say, which a scenario's cleanup
		// causes while controllers still write Events there.
		if e.ResponseStatus.Code != 403 || e.Annotations["authorization.k8s.io/decision"] == "allow" {
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

// A Request is one kind of request a ServiceAccount made, read from
// kube-apiserver's audit log.
type Request struct {
	User string
	Verb string
	// Resource is named as Forbidden names it: resource, "/subresource"
	// and ".group" where there are any; a request for no resource
	// (discovery, say) is its URL path.
	Resource string
	// Namespaced is true when the request named a namespace.
	Namespaced bool
	// Count is how often the request was made, whatever the answer.
	Count int
}

func (r Request) String() string {
	scope := "cluster-wide"
	if r.Namespaced {
		scope = "in a namespace"
	}
	return fmt.Sprintf("%s %s %s (%d times)", r.Verb, r.Resource, scope, r.Count)
}

// Requests returns every kind of request that the ServiceAccounts whose user
// names start with userPrefix made during the run, read from
// kube-apiserver's audit log: what a package runtime actually uses of what
// Crossplane's RBAC manager grants it. A request recorded at two stages (a
// watch: started, then ended) counts once; a watch still open counts too.
func (l *Log) Requests(userPrefix string) ([]Request, error) {
	seen := map[Request]int{}
	ids := map[string]bool{}
	err := l.eachAuditEvent([]string{`"username":"` + userPrefix}, func(e auditEvent) {
		if !strings.HasPrefix(e.User.Username, userPrefix) || e.AuditID != "" && ids[e.AuditID] {
			return
		}
		if e.AuditID != "" {
			ids[e.AuditID] = true
		}
		r := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			r += "/" + e.ObjectRef.Subresource
		}
		if e.ObjectRef.APIGroup != "" {
			r += "." + e.ObjectRef.APIGroup
		}
		if r == "" {
			r, _, _ = strings.Cut(e.RequestURI, "?")
		}
		seen[Request{User: e.User.Username, Verb: e.Verb, Resource: r, Namespaced: e.ObjectRef.Namespace != ""}]++
	})
	if err != nil {
		return nil, err
	}
	out := make([]Request, 0, len(seen))
	for k, n := range seen {
		k.Count = n
		out = append(out, k)
	}
	sortRequests(out)
	return out, nil
}

// sortRequests sorts requests by user, resource, verb and scope.
func sortRequests(out []Request) {
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.User != b.User {
			return a.User < b.User
		}
		if a.Resource != b.Resource {
			return a.Resource < b.Resource
		}
		if a.Verb != b.Verb {
			return a.Verb < b.Verb
		}
		return !a.Namespaced && b.Namespaced
	})
}

// WritesIn returns the writes (create, update, patch, delete) that the
// ServiceAccounts whose user names start with userPrefix made to objects in
// namespace ns and that kube-apiserver received in [from, to), by kind, in
// Requests' order. Scenarios that run at once in namespaces of their own can
// so each count their own share of a package runtime's writes.
func (l *Log) WritesIn(userPrefix, ns string, from, to time.Time) ([]Request, error) {
	seen := map[Request]int{}
	ids := map[string]bool{}
	err := l.eachAuditEvent([]string{`"username":"` + userPrefix, `"namespace":"` + ns + `"`}, func(e auditEvent) {
		switch {
		case !strings.HasPrefix(e.User.Username, userPrefix), e.ObjectRef.Namespace != ns:
			return
		case e.Received.Before(from), !e.Received.Before(to):
			return
		case e.AuditID != "" && ids[e.AuditID]:
			return
		}
		if !slices.Contains([]string{"create", "update", "patch", "delete"}, e.Verb) {
			return
		}
		if e.AuditID != "" {
			ids[e.AuditID] = true
		}
		r := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			r += "/" + e.ObjectRef.Subresource
		}
		if e.ObjectRef.APIGroup != "" {
			r += "." + e.ObjectRef.APIGroup
		}
		seen[Request{User: e.User.Username, Verb: e.Verb, Resource: r, Namespaced: true}]++
	})
	if err != nil {
		return nil, err
	}
	out := make([]Request, 0, len(seen))
	for k, n := range seen {
		k.Count = n
		out = append(out, k)
	}
	sortRequests(out)
	return out, nil
}

// auditEvent is what the checks here read of one audit event.
type auditEvent struct {
	AuditID    string                    `json:"auditID"`
	Verb       string                    `json:"verb"`
	RequestURI string                    `json:"requestURI"`
	User       struct{ Username string } `json:"user"`
	ObjectRef  struct {
		Resource, Subresource, Namespace, Name, APIGroup string
	} `json:"objectRef"`
	ResponseStatus struct{ Code int } `json:"responseStatus"`
	// Annotations hold the authorizer's decision
	// (authorization.k8s.io/decision: allow or forbid).
	Annotations map[string]string `json:"annotations"`
	Received    time.Time         `json:"requestReceivedTimestamp"`
	// ResponseObject is recorded for the writes auditBodiesPolicy selects.
	ResponseObject *struct {
		Metadata struct {
			Name            string `json:"name"`
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	} `json:"responseObject"`
}

// eachAuditEvent calls fn with each event of kube-apiserver's audit log
// whose line contains every string in must (a cheap filter before parsing).
// kube-apiserver rotates its audit log at 100 MB (a long benchmark writes
// several); the rotated files are read first, oldest first.
func (l *Log) eachAuditEvent(must []string, fn func(auditEvent)) error {
	files, err := l.auditLogs()
	if err != nil {
		return err
	}
	for _, name := range files {
		if err := eachAuditEventIn(name, must, fn); err != nil {
			return err
		}
	}
	return nil
}

// auditLogs returns the audit log's files, oldest first: the rotated ones
// (named after the time they were rotated), then the current one.
func (l *Log) auditLogs() ([]string, error) {
	if l.Path == "" {
		return nil, errors.New("no audit log to read: kube-apiserver's audit log is on the machine that runs it")
	}
	rotated, err := filepath.Glob(strings.TrimSuffix(l.Path, ".log") + "-*.log")
	if err != nil {
		return nil, errors.Wrap(err, "cannot list kube-apiserver's audit logs")
	}
	sort.Strings(rotated)
	return append(rotated, l.Path), nil
}

func eachAuditEventIn(name string, must []string, fn func(auditEvent)) error {
	f, err := os.Open(name)
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
	return errors.Wrapf(sc.Err(), "cannot read kube-apiserver's audit log %s", name)
}

// ExpectRollout marks the time from now until done is called as a package
// rollout: a Provider or Function gets a new revision (an upgrade, another
// runtime config). Crossplane gives each revision its own ServiceAccount, so
// for a moment the outgoing pods run with a ServiceAccount whose binding is
// gone and the incoming ones with one the RBAC manager has not bound yet;
// Forbidden marks what kube-apiserver refused then as Rollout. Call done
// once the old pods are gone (DependencyProvider and DependencyFunction wait
// for that).
func (l *Log) ExpectRollout() (done func()) {
	start := time.Now()
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.rollouts = append(l.rollouts, [2]time.Time{start, time.Now()})
	}
}

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
func (l *Log) EventCreates() ([]EventCreates, error) {
	by := map[string]*EventCreates{}
	err := l.eachAuditEvent([]string{`"resource":"events"`, `"verb":"create"`}, func(e auditEvent) {
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

// Writes counts one client's writes of one kind of object (its resource and
// subresource, by verb) and what they did. A write changed its object when
// the object's resourceVersion after it differs from the one after the
// object's previous write; a write that left it as it was changed nothing
// (server-side apply of what is already there, an update with equal
// content).
type Writes struct {
	User        string
	Resource    string // group/resource, or resource for the core group
	Subresource string
	Verb        string
	Changed     int
	Unchanged   int
	// Failed were refused (a 4xx or 5xx answer: 409 conflicts, mostly).
	Failed int
}

// Writes reads what every write a ServiceAccount made to a managed
// resource, XR or claim did, from kube-apiserver's audit log: it needs the
// log written with WIDGET_AUDIT_BODIES=1 (see auditBodiesPolicy). A write
// whose object's earlier state the log does not show counts as a change.
func (l *Log) Writes() ([]Writes, error) {
	type object struct{ group, resource, namespace, name string }
	type kind struct{ user, resource, subresource, verb string }
	last := map[object]string{}
	by := map[kind]*Writes{}
	err := l.eachAuditEvent([]string{`"level":"RequestResponse"`}, func(e auditEvent) {
		switch e.Verb {
		case "create", "update", "patch":
		default:
			return
		}
		r := e.ObjectRef
		res := r.Resource
		if r.APIGroup != "" {
			res = r.APIGroup + "/" + r.Resource
		}
		k := kind{user: e.User.Username, resource: res, subresource: r.Subresource, verb: e.Verb}
		w, ok := by[k]
		if !ok {
			w = &Writes{User: k.user, Resource: k.resource, Subresource: k.subresource, Verb: k.verb}
			by[k] = w
		}
		if e.ResponseStatus.Code >= 300 || e.ResponseObject == nil {
			w.Failed++
			return
		}
		o := object{group: r.APIGroup, resource: r.Resource, namespace: r.Namespace, name: r.Name}
		if o.name == "" {
			o.name = e.ResponseObject.Metadata.Name // a create with generateName
		}
		rv := e.ResponseObject.Metadata.ResourceVersion
		if prev, ok := last[o]; ok && prev == rv {
			w.Unchanged++
		} else {
			w.Changed++
		}
		last[o] = rv
	})
	if err != nil {
		return nil, err
	}
	out := make([]Writes, 0, len(by))
	for _, w := range by {
		out = append(out, *w)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if n, m := a.Changed+a.Unchanged+a.Failed, b.Changed+b.Unchanged+b.Failed; n != m {
			return n > m
		}
		return fmt.Sprint(a) < fmt.Sprint(b)
	})
	return out, nil
}
