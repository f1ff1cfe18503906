package metrics

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The README's table of metrics sits between these lines.
const (
	tableBegin = "<!-- metrics table: generated from metrics.Families, checked by TestREADMETableListsEveryFamily -->"
	tableEnd   = "<!-- end of metrics table -->"
)

// readmeTable renders the table of families the README shows.
func readmeTable(families []Family) string {
	var b strings.Builder
	b.WriteString("| metric | type | labels | meaning |\n|---|---|---|---|\n")
	for _, f := range families {
		labels := "`" + strings.Join(f.Labels, "`, `") + "`"
		help := strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;").Replace(f.Help)
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", f.Name, f.Type, labels, help)
	}
	return b.String()
}

// TestREADMETableListsEveryFamily checks that the README's table of
// metrics is the one Families gives: every metric, its type, labels and
// meaning, and nothing that is not exported.
func TestREADMETableListsEveryFamily(t *testing.T) {
	data, err := os.ReadFile("../docs/operators-guide.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	begin, end := strings.Index(readme, tableBegin), strings.Index(readme, tableEnd)
	if begin < 0 || end < begin {
		t.Fatalf("docs/operators-guide.md lacks the lines %q and %q around the table of metrics", tableBegin, tableEnd)
	}
	got := strings.TrimSpace(readme[begin+len(tableBegin) : end])
	want := strings.TrimSpace(readmeTable(Families()))
	if got != want {
		t.Errorf("docs/operators-guide.md's table of metrics is out of date; replace it with:\n%s", want)
	}
}
