package server_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/widgetco/crossplane-widget/widgetapi"
	"github.com/widgetco/crossplane-widget/widgetapi/apitest"
)

// TestQueryParameters: every query parameter the server reads is validated;
// a bad one is a 422 naming it, never ignored or overflowed.
func TestQueryParameters(t *testing.T) {
	type want struct {
		status int
		fields []string
	}
	many := strings.TrimSuffix(strings.Repeat("k=v,", 33), ",")
	cases := map[string]struct {
		reason string
		path   string
		want   want
	}{
		"WaitOverflow":       {"a wait whose nanoseconds overflow int64 is invalid, not zero", "/v1/changes?after=0&wait=9223372037", want{422, []string{"wait"}}},
		"WaitHuge":           {"a wait beyond int64 is invalid", "/v1/changes?after=0&wait=99999999999999999999", want{422, []string{"wait"}}},
		"WaitAboveMax":       {"wait is at most 300 seconds", "/v1/changes?after=0&wait=301", want{422, []string{"wait"}}},
		"WaitMax":            {"300 seconds is allowed (capped by the server)", "/v1/changes?after=latest&wait=300", want{200, nil}},
		"WaitPlus":           {"a sign is not part of an integer here", "/v1/changes?after=0&wait=%2B1", want{422, []string{"wait"}}},
		"WaitTwice":          {"a parameter given twice is ambiguous", "/v1/changes?after=0&wait=1&wait=2", want{422, []string{"wait"}}},
		"AfterOverflow":      {"after fits in int64", "/v1/changes?after=9223372036854775808", want{422, []string{"after"}}},
		"AfterMax":           {"the largest int64 parses; as a position the feed never gave out it is feed_expired", "/v1/changes?after=9223372036854775807", want{410, nil}},
		"AfterPlus":          {"after is digits only", "/v1/changes?after=%2B1", want{422, []string{"after"}}},
		"ChangesLimitHuge":   {"the feed limit is at most 1000", "/v1/changes?limit=1001", want{422, []string{"limit"}}},
		"SeveralBad":         {"every bad parameter is named", "/v1/changes?after=x&wait=-1&limit=0", want{422, []string{"after", "wait", "limit"}}},
		"ListLimitSpace":     {"no spaces around numbers", "/v1/widgets?limit=%201", want{422, []string{"limit"}}},
		"ListLimitOverflow":  {"an overflowing limit is invalid", "/v1/widgets?limit=18446744073709551617", want{422, []string{"limit"}}},
		"PageTokenGarbage":   {"a page token is base64", "/v1/widgets?pageToken=!!!", want{422, []string{"pageToken"}}},
		"PageTokenNotAName":  {"a page token encodes a widget name", "/v1/widgets?pageToken=" + base64.RawURLEncoding.EncodeToString([]byte("Not A Name")), want{422, []string{"pageToken"}}},
		"PageTokenLong":      {"a page token is short", "/v1/widgets?pageToken=" + strings.Repeat("YQ", 100), want{422, []string{"pageToken"}}},
		"PageTokenValid":     {"a name's token is accepted", "/v1/widgets?pageToken=" + base64.RawURLEncoding.EncodeToString([]byte("existing")), want{200, nil}},
		"SelectorTooMany":    {"at most 32 pairs", "/v1/widgets?labelSelector=" + many, want{422, []string{"labelSelector"}}},
		"SelectorRepeated":   {"each key once", "/v1/widgets?labelSelector=a=1,a=2", want{422, []string{"labelSelector"}}},
		"SelectorBadKey":     {"keys are label keys", "/v1/widgets?labelSelector=Bad%20Key=1", want{422, []string{"labelSelector"}}},
		"SelectorLongValue":  {"values are label values", "/v1/widgets?labelSelector=k=" + strings.Repeat("v", 64), want{422, []string{"labelSelector"}}},
		"SelectorValid":      {"a valid selector and limit", "/v1/widgets?labelSelector=team=a,tier=web&limit=5", want{200, nil}},
		"MalformedEscape":    {"a query that does not parse is named as such", "/v1/widgets?limit=%zz", want{422, []string{"query"}}},
		"UnknownIsIgnored":   {"parameters the server does not read are ignored", "/v1/widgets?colour=red", want{200, nil}},
		"EmptyNumbers":       {"an empty number is invalid (the contract has no empty numbers)", "/v1/changes?after=&limit=", want{422, []string{"after", "limit"}}},
		"EmptyStrings":       {"an empty selector or page token means none", "/v1/widgets?labelSelector=&pageToken=", want{200, nil}},
		"LatestIgnoresWait":  {"after=latest answers at once", "/v1/changes?after=latest&wait=1", want{200, nil}},
		"NoParametersNeeded": {"no parameters at all is fine", "/v1/widgets", want{200, nil}},
	}
	env := apitest.Start(t)
	if _, err := env.Client(t, apitest.TokenA).CreateWidget(ctx(t), widgetapi.CreateWidgetRequest{Name: "existing"}); err != nil {
		t.Fatal(err)
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			status, p := raw(t, env, "GET", tc.path, "")
			var fields []string
			for _, e := range p.Errors {
				fields = append(fields, e.Field)
			}
			if diff := cmp.Diff(tc.want, want{status, fields}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
