// Package text lays out the prose the lab prints beside its tables.
package text

import (
	"strconv"
	"strings"
)

// Wrap cuts text into lines of at most width bytes, breaking at spaces;
// a word longer than width stands on a line of its own.
func Wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// Thousands writes n with commas between its thousands: "770,279",
// "-1,024".
func Thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Count writes n, its thousands separated, and the noun, plural when n is
// not 1: "1 event", "770,279 events", "2 other processes".
func Count(n int64, noun string) string {
	switch {
	case n == 1:
	case strings.HasSuffix(noun, "s"):
		noun += "es"
	default:
		noun += "s"
	}
	return Thousands(n) + " " + noun
}
