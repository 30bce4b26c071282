package daemon_test

import (
	"flag"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/informerd/informerd/internal/config"
	"github.com/informerd/informerd/internal/daemon"
)

// TestDocumentedFlags: the flag table of docs/configuration.md lists every
// flag AddFlags registers, with its default, and no other flag.
func TestDocumentedFlags(t *testing.T) {
	documented := table(t, "Flags")
	o := daemon.NewOptions()
	fs := flag.NewFlagSet("informerd", flag.ContinueOnError)
	o.AddFlags(fs)
	fs.VisitAll(func(f *flag.Flag) {
		doc, ok := documented["--"+f.Name]
		if !ok {
			t.Errorf("--%s is not in the flag table of docs/configuration.md", f.Name)
			return
		}
		delete(documented, "--"+f.Name)
		if !same(f.DefValue, doc) {
			t.Errorf("--%s: docs/configuration.md says its default is %q; the flag's is %q", f.Name, doc, f.DefValue)
		}
	})
	for name := range documented {
		t.Errorf("%s is in the flag table of docs/configuration.md, but informerd has no such flag", name)
	}
}

// TestDocumentedConfigDefaults: the field table of docs/configuration.md
// states the defaults config applies.
func TestDocumentedConfigDefaults(t *testing.T) {
	documented := table(t, "Fields")
	for _, f := range []struct{ field, value string }{
		{"history.maxEvents", strconv.Itoa(config.DefaultHistoryMaxEvents)},
		{"history.maxAge", config.DefaultHistoryMaxAge.String()},
		{"queueLength", strconv.Itoa(config.DefaultQueueLength)},
	} {
		if doc := documented[f.field]; !same(f.value, doc) {
			t.Errorf("%s: docs/configuration.md says its default is %q; config's is %q", f.field, doc, f.value)
		}
	}
}

var (
	// name is a code span in a table's first cell: `--flag` (`--flag
	// FILE` too) or `field.path`.
	name     = regexp.MustCompile("`([^` ]+)[^`]*`")
	codeSpan = regexp.MustCompile("^`([^`]*)`$")
	number   = regexp.MustCompile(`^[0-9][^ ]*$`)
)

// table reads the table under the heading "## <heading>" of
// docs/configuration.md: each name's default cell, as a value ("" for a
// description such as "—" or "all namespaces"). A row may name several
// flags (`--a`, `--b`) with a default each (`1`, `2`), or one for all.
func table(t *testing.T, heading string) map[string]string {
	t.Helper()
	md, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(md), "\n## "+heading+"\n")
	if !ok {
		t.Fatalf("docs/configuration.md has no %q section", "## "+heading)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	defaults := map[string]string{}
	for line := range strings.Lines(section) {
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), " | ")
		if len(cells) < 3 || !strings.HasPrefix(strings.TrimSpace(cells[0]), "`") {
			continue // the header, its rule, or prose
		}
		names := name.FindAllStringSubmatch(cells[0], -1)
		values := strings.Split(cells[1], ", ")
		if len(values) != len(names) {
			values = []string{cells[1]}
		}
		for i, n := range names {
			if _, dup := defaults[n[1]]; dup {
				t.Errorf("%s is in the %s table of docs/configuration.md twice", n[1], heading)
			}
			defaults[n[1]] = value(values[min(i, len(values)-1)])
		}
	}
	return defaults
}

// value is the value a default cell states: a code span's content or a
// bare number; "" when the cell describes instead.
func value(cell string) string {
	if m := codeSpan.FindStringSubmatch(cell); m != nil {
		return m[1]
	}
	if number.MatchString(cell) {
		return cell
	}
	return ""
}

// same says whether the documented value doc states want: durations
// compare as durations (2m is 2m0s), numbers as numbers (0660 is 432).
func same(want, doc string) bool {
	if a, err := time.ParseDuration(want); err == nil && want != "0" {
		b, err := time.ParseDuration(doc)
		return err == nil && a == b
	}
	if a, err := strconv.ParseFloat(want, 64); err == nil {
		if b, err := strconv.ParseInt(doc, 0, 64); err == nil {
			return float64(b) == a
		}
		b, err := strconv.ParseFloat(doc, 64)
		return err == nil && a == b
	}
	return want == doc
}
