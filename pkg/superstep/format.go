//go:build !superstep.lambda

package superstep

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/superstep/superstep/pkg/pregel"
)

// readJSONArg reads a JSON flag value: the JSON itself, "@FILE" for the
// content of a file, or "-" or "@-" for standard input.
func readJSONArg(flag, value string, stdin io.Reader) (json.RawMessage, error) {
	var (
		data []byte
		from = "--" + flag
	)
	switch {
	case value == "-" || value == "@-":
		if stdin == nil {
			return nil, fmt.Errorf("--%s %s: no standard input", flag, value)
		}
		b, err := io.ReadAll(stdin)
		if err != nil {
			return nil, fmt.Errorf("--%s: read standard input: %w", flag, err)
		}
		data, from = b, "standard input"
	case strings.HasPrefix(value, "@"):
		b, err := os.ReadFile(value[1:])
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", flag, err)
		}
		data, from = b, value[1:]
	default:
		data = []byte(value)
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, fmt.Errorf("%s is empty; give a JSON value such as '{\"limit\": 3}'", from)
	}
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		return nil, fmt.Errorf("%s is not valid JSON: %w", from, err)
	}
	return json.RawMessage(data), nil
}

// parseAnswer turns an answer into the JSON value that resumes an
// interrupt: JSON as given (true, 42, {"approved": true}, "quoted"), any
// other text as a JSON string (approve -> "approve").
func parseAnswer(s string) json.RawMessage {
	t := strings.TrimSpace(s)
	if t != "" && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	raw, _ := json.Marshal(s) // a string always encodes
	return raw
}

// indentJSON pretty-prints a JSON value, or returns it as is when it is
// not valid JSON.
func indentJSON(raw []byte, prefix string) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, prefix, "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// marshal encodes v as compact JSON without escaping <, > and &.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// writeJSON writes v as indented JSON followed by a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	return nil
}

// newTable returns a tabwriter for aligned columns; Flush it when done.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// oneLine shortens s to one line of at most n runes, for table cells.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// orDash returns s, or "-" when it is empty, for table cells.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// fmtDuration rounds d for display.
func fmtDuration(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(100 * time.Microsecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}

// fmtTime formats a record's timestamp for tables.
func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// writeUsage prints a run's token usage per node and in total, after a
// blank line; nothing when u is nil.
func writeUsage(w io.Writer, u *pregel.UsageTotals) error {
	if u == nil {
		return nil
	}
	fmt.Fprintln(w, "\nTokens:")
	tw := newTable(w)
	fmt.Fprintln(tw, "NODE\tINPUT\tOUTPUT\tTOTAL")
	nodes := slices.Sorted(maps.Keys(u.ByNode))
	for _, n := range append(nodes, "(run)") {
		t, ok := u.ByNode[n]
		if !ok {
			t = u.Total
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", n, t.InputTokens, t.OutputTokens, t.TotalTokens)
	}
	return tw.Flush()
}
