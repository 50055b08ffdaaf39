package doccmd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	md := "# Page\n" + // 1
		"\n" + // 2
		"<!-- demo: run -->\n" + // 3
		"```\n" + // 4
		"$ kubectl get xwidgets.platform.widgetco.io -n team-a\n" + // 5
		"NAME   STATE   KEYS\n" + // 6
		"web    Ready   2/2\n" + // 7
		"$ kubectl patch widgetkeys.widget.m.widgetco.io app --type merge \\\n" + // 8
		"    -p '{}'\n" + // 9
		"widgetkey.widget.m.widgetco.io/app patched\n" + // 10
		"```\n" + // 11
		"\n" + // 12
		"```yaml\n" + // 13
		"kind: XWidget\n" + // 14
		"```\n" + // 15
		"1. A step:\n" + // 16
		"   <!-- demo: skip: installs into your own cluster -->\n" + // 17
		"   ```sh\n" + // 18
		"   # a comment is not a command\n" + // 19
		"   PROVIDER=widgetco-provider-widget\n" + // 20
		"   kubectl logs -l pkg.crossplane.io/provider=$PROVIDER \\\n" + // 21
		"     | jq -r .msg\n" + // 22
		"   for crd in a b; do\n" + // 23
		"     kubectl get \"$crd\"\n" + // 24
		"   done\n" + // 25
		"   until (exec 3<>/dev/tcp/localhost/9444) 2>/dev/null; do sleep 1; done\n" + // 26
		"     | wc -l\n" + // 27
		"   ```\n" + // 28
		"<!-- demo: run, output varies -->\n" + // 29
		"```console\n" + // 30
		"$ date\n" + // 31
		"Fri Nov 27\n" + // 32
		"```\n" + // 33
		"```sh\n" + // 34
		"make demo\n" + // 35
		"```\n" + // 36
		"<!-- demo: maybe -->\n" + // 37
		"```sh\n" + // 38
		"make test\n" + // 39
		"```\n" // 40
	want := []Block{
		{Page: "docs/p.md", Line: 4, Mark: "run", Run: true, Commands: []Command{
			{Line: 5, Text: "kubectl get xwidgets.platform.widgetco.io -n team-a", Output: []string{"NAME   STATE   KEYS", "web    Ready   2/2"}},
			{Line: 8, Text: "kubectl patch widgetkeys.widget.m.widgetco.io app --type merge \\\n    -p '{}'", Output: []string{"widgetkey.widget.m.widgetco.io/app patched"}},
		}},
		{Page: "docs/p.md", Line: 18, Mark: "skip: installs into your own cluster", Skip: "installs into your own cluster", Commands: []Command{
			{Line: 20, Text: "PROVIDER=widgetco-provider-widget"},
			{Line: 21, Text: "kubectl logs -l pkg.crossplane.io/provider=$PROVIDER \\\n  | jq -r .msg"},
			{Line: 23, Text: "for crd in a b; do\n  kubectl get \"$crd\"\ndone"},
			{Line: 26, Text: "until (exec 3<>/dev/tcp/localhost/9444) 2>/dev/null; do sleep 1; done\n  | wc -l"},
		}},
		{Page: "docs/p.md", Line: 30, Mark: "run, output varies", Run: true, Varies: true, Commands: []Command{
			{Line: 31, Text: "date", Output: []string{"Fri Nov 27"}},
		}},
		{Page: "docs/p.md", Line: 34, Commands: []Command{{Line: 35, Text: "make demo"}}},
		{Page: "docs/p.md", Line: 38, Mark: "maybe", Commands: []Command{{Line: 39, Text: "make test"}}},
	}
	got := Parse("docs/p.md", md)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse(...): -want, +got:\n%s", diff)
	}
	problems := map[int]bool{}
	for _, b := range got {
		problems[b.Line] = b.Problem() != ""
	}
	if diff := cmp.Diff(map[int]bool{4: false, 18: false, 30: false, 34: true, 38: true}, problems); diff != "" {
		t.Errorf("Problem() != \"\" by block: -want, +got:\n%s", diff)
	}
}

func TestParseOneLineLoop(t *testing.T) {
	md := "<!-- demo: run -->\n```sh\nserve &\nuntil nc -z localhost 9444; do sleep 1; done   # until it listens\nkubectl get pods\n  | wc -l\n```\n"
	want := []Command{
		{Line: 3, Text: "serve &"},
		{Line: 4, Text: "until nc -z localhost 9444; do sleep 1; done   # until it listens"},
		{Line: 5, Text: "kubectl get pods\n  | wc -l"},
	}
	got := Parse("p.md", md)
	if len(got) != 1 {
		t.Fatalf("Parse(...) = %d blocks, want 1", len(got))
	}
	if diff := cmp.Diff(want, got[0].Commands); diff != "" {
		t.Errorf("Parse(...) commands: -want, +got:\n%s", diff)
	}
}

func TestCheckOutput(t *testing.T) {
	cases := map[string]struct {
		reason string
		shown  []string
		got    string
		ok     bool
	}{
		"Header": {
			reason: "The header the page shows is the real one, spacing aside; the rows may differ.",
			shown:  []string{"NAME                     SYNCED   READY   STATUS", "WidgetClaim/web (team-b)   True   True   Available"},
			got:    "NAME              SYNCED   READY   STATUS\nWidgetClaim/web (team-b)   True  False  Creating\n",
			ok:     true,
		},
		"MissingColumn": {
			reason: "A column that the command does not print fails.",
			shown:  []string{"NAME   RESOURCE   SYNCED   READY   STATUS"},
			got:    "NAME   SYNCED   READY   STATUS\n",
		},
		"Error": {
			reason: "An error instead of the output fails.",
			shown:  []string{"KeepWidgetAndKeys"},
			got:    "error: you must specify only one resource\n",
		},
		"LaterLine": {
			reason: "An excerpt may start at a later line of the output.",
			shown:  []string{"Events:", "  Type  Reason  Age"},
			got:    "Name: web\nEvents:\n  Type  Reason  Age\n",
			ok:     true,
		},
		"NothingShown": {
			reason: "A command whose output the page does not show is not checked.",
			shown:  []string{"", ""},
			got:    "anything",
			ok:     true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := CheckOutput(tc.shown, tc.got)
			if (err == nil) != tc.ok {
				t.Errorf("%s\nCheckOutput(...) = %v, want ok %v", tc.reason, err, tc.ok)
			}
		})
	}
}
