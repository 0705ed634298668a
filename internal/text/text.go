// Package text lays out the prose the lab prints beside its tables.
package text

import "strings"

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
