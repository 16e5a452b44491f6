package runs

import (
	"regexp"
	"strings"
	"testing"
)

// TestValidIDMatchesItsPattern checks ValidID against the pattern it
// documents, ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$, at the edges.
func TestValidIDMatchesItsPattern(t *testing.T) {
	pattern := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)
	for _, id := range []string{
		"", "a", "Z", "0", "-", ".", "_", ":", "a-b", "a.b_c:d", "a b", "a/b", "é", "aé", "a\n",
		strings.Repeat("a", 127), strings.Repeat("a", 128), strings.Repeat("a", 129),
		"-" + strings.Repeat("a", 127), "run:2026-11-27T07:00:00Z",
	} {
		if got, want := ValidID(id), pattern.MatchString(id); got != want {
			t.Errorf("ValidID(%q) = %v, the pattern says %v", id, got, want)
		}
	}
}
