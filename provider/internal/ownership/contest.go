package ownership

import (
	"strconv"
	"time"

	commonv1beta1 "github.com/widgetco/crossplane-widget/apis/common/v1beta1"
)

// ControlPlaneLabel names the control plane whose managed resource manages a
// widget, or created a key (see Labels). A provider writes only to widgets
// that name its own control plane, or none: when a restored or migrated
// control plane runs beside the one it copies, both have a resource with
// the same owner marker for each widget, and this label says which of the
// two manages it. The other one reports that, and leaves the widget alone.
const ControlPlaneLabel = commonv1beta1.OwnershipLabelPrefix + "control-plane"

// ContenderLabel names a control plane that has a managed resource for a
// widget another control plane manages, and leaves the widget to it;
// ContendedAtLabel says when it last said so, in Unix seconds. The owner
// reports the contest on its own resource while it is fresh (ContestTTL),
// and never removes it: only a take-over, or a release, does.
const (
	ContenderLabel   = commonv1beta1.OwnershipLabelPrefix + "contender"
	ContendedAtLabel = commonv1beta1.OwnershipLabelPrefix + "contended-at"
)

// TakenOverAtLabel says when, in Unix seconds, the widget's control plane
// took it over from another (see TakeOverAnnotation). While it is fresh
// (ContestTTL), no control plane may take the widget over again: two
// resources annotated to take over from each other would otherwise hand
// the widget back and forth.
const TakenOverAtLabel = commonv1beta1.OwnershipLabelPrefix + "taken-over-at"

// TakeOverAnnotation names, on a managed resource, the control plane that
// its widget may be taken over from: when the widget's ControlPlaneLabel
// says that control plane, the resource manages the widget from then on,
// and the label says the resource's control plane.
const TakeOverAnnotation = commonv1beta1.OwnershipLabelPrefix + "take-over-from"

// ContestTTL is how long a contest, or a take-over, counts after it was
// said. A contender says it again every ContestRefresh while it runs, so a
// contender that stopped (its resource deleted, its control plane gone)
// stops counting within ContestTTL.
const (
	ContestTTL     = 15 * time.Minute
	ContestRefresh = 5 * time.Minute
)

// maxClockSkew is how far in the future a contest's or take-over's time may
// be and still count: a time further ahead was not written by a provider
// (whose clocks agree within that), and would otherwise count for ever.
const maxClockSkew = time.Minute

// contestKeys are a contest's labels, and a take-over's.
var contestKeys = []string{ContenderLabel, ContendedAtLabel, TakenOverAtLabel}

// Elsewhere returns the control plane that labels name as the widget's when
// it is not cp: another control plane's resource manages the widget. A
// provider that knows no control plane (cp is empty), and labels that name
// none, are never elsewhere.
func Elsewhere(labels map[string]string, cp string) (string, bool) {
	other := labels[ControlPlaneLabel]
	return other, cp != "" && other != "" && other != cp
}

// A Contest is what a contender said on a widget.
type Contest struct {
	// By is the contender's control plane.
	By string
	// At is when it last said so.
	At time.Time
}

// ContestOf returns the contest that labels record, when a control plane
// other than cp said it within ContestTTL before now.
func ContestOf(labels map[string]string, cp string, now time.Time) (Contest, bool) {
	by := labels[ContenderLabel]
	at, ok := unixLabel(labels, ContendedAtLabel, now)
	if by == "" || by == cp || !ok || now.Sub(at) > ContestTTL {
		return Contest{}, false
	}
	return Contest{By: by, At: at}, true
}

// Said reports whether labels record cp's own contest, said within
// ContestRefresh before now: cp need not say it again yet.
func Said(labels map[string]string, cp string, now time.Time) bool {
	at, ok := unixLabel(labels, ContendedAtLabel, now)
	return labels[ContenderLabel] == cp && ok && now.Sub(at) <= ContestRefresh
}

// ContestLabels are the labels contender cp puts on a widget at now.
func ContestLabels(cp string, now time.Time) map[string]string {
	return map[string]string{ContenderLabel: cp, ContendedAtLabel: strconv.FormatInt(now.Unix(), 10)}
}

// TakeOverLabels are the labels a control plane that takes a widget over at
// now puts on it, besides its markers.
func TakeOverLabels(now time.Time) map[string]string {
	return map[string]string{TakenOverAtLabel: strconv.FormatInt(now.Unix(), 10)}
}

// TakenOver returns when labels say the widget was last taken over, when
// that was within ContestTTL before now.
func TakenOver(labels map[string]string, now time.Time) (time.Time, bool) {
	at, ok := unixLabel(labels, TakenOverAtLabel, now)
	if !ok || now.Sub(at) > ContestTTL {
		return time.Time{}, false
	}
	return at, true
}

// ContestLabelsOf returns the contest's and take-over's labels among
// labels, as they are: an owner that rewrites its widget keeps them.
func ContestLabelsOf(labels map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range contestKeys {
		if v, ok := labels[k]; ok {
			out[k] = v
		}
	}
	return out
}

// unixLabel parses the Unix seconds of label k. A value that is not a
// number, or further ahead of now than maxClockSkew, does not count.
func unixLabel(labels map[string]string, k string, now time.Time) (time.Time, bool) {
	n, err := strconv.ParseInt(labels[k], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	at := time.Unix(n, 0)
	if at.After(now.Add(maxClockSkew)) {
		return time.Time{}, false
	}
	return at, true
}
