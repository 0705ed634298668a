// Package text lays out the prose the lab prints beside its tables.
package text

import (
	"fmt"
	"strconv"
	"strings"
)

// Width is the most characters a line of carve's text output takes unless
// a command is asked for its wide form (--wide): a terminal's width, with
// room to spare.
const Width = 100

// Wrap cuts text into lines of at most width bytes, breaking at spaces
// but between a number and its unit (see Glue); a word longer than width
// stands on a line of its own.
func Wrap(text string, width int) []string { return Fill(Glue(strings.Fields(text)), width) }

// Hang lays words out as Fill does within width, the first line after
// first and the others after rest: a paragraph with a hanging indent. A
// width of 0 or less puts them all on the first line.
func Hang(first, rest string, words []string, width int) []string {
	lines := []string{strings.Join(words, " ")}
	if width > 0 {
		lines = Fill(Glue(words), max(width-max(len(first), len(rest)), 20))
	}
	for i := range lines {
		if i == 0 {
			lines[i] = first + lines[i]
		} else {
			lines[i] = rest + lines[i]
		}
	}
	return lines
}

// Lines re-lays out each line of s wider than width, as a paragraph
// with a hanging indent, and leaves the others as they are: help text
// written a paragraph or an entry a line. A line keeps its own indent; the
// lines it continues on start under its text where it is an entry of a
// list in columns ("  name   text", two spaces or more after the name),
// four columns in where it is an entry "name: text", and under its first
// word otherwise. A word wider than the room stands on a line of its own.
func Lines(s string, width int) string {
	var out []string
	for _, body := range strings.Split(s, "\n") {
		if len(body) <= width {
			out = append(out, body)
			continue
		}
		text := strings.TrimLeft(body, " ")
		indent := body[:len(body)-len(text)]
		first, rest := indent, indent
		if name, after, ok := strings.Cut(text, "  "); ok && !strings.Contains(name, " ") && strings.TrimLeft(after, " ") != "" {
			text = strings.TrimLeft(after, " ")
			col := len(body) - len(text)
			first, rest = body[:col], strings.Repeat(" ", col)
		} else if name, _, ok := strings.Cut(text, ": "); ok && !strings.Contains(name, " ") {
			rest = indent + "    "
		}
		out = append(out, Hang(first, rest, strings.Fields(text), width)...)
	}
	return strings.Join(out, "\n")
}

// Glue joins each unit of bytes (B, KiB, MiB, GiB, TiB, as
// internal/size writes them), followed or not by punctuation, to the
// word before it when that word ends in a digit, so that "19.53 MiB"
// stays on one line.
func Glue(words []string) []string {
	var glued []string
	for _, w := range words {
		if n := len(glued); n > 0 && isUnit(strings.TrimRight(w, ",;:.)'s")) && endsInDigit(glued[n-1]) {
			glued[n-1] += " " + w
			continue
		}
		glued = append(glued, w)
	}
	return glued
}

func isUnit(w string) bool {
	switch w {
	case "B", "KiB", "MiB", "GiB", "TiB":
		return true
	}
	return false
}

func endsInDigit(w string) bool { return w != "" && '0' <= w[len(w)-1] && w[len(w)-1] <= '9' }

// Fill lays words out in lines of at most width bytes, a space between
// two words of a line, breaking only between words: a word longer than
// width stands on a line of its own. A word may hold spaces (an item of
// a list, kept on one line).
func Fill(words []string, width int) []string {
	var lines []string
	line := ""
	for _, w := range words {
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
func Thousands(n int64) string { return grouped(strconv.FormatInt(n, 10)) }

// ThousandsU is Thousands of an unsigned n, which may pass 2^63:
// "18,446,744,073,709,551,615".
func ThousandsU(n uint64) string { return grouped(strconv.FormatUint(n, 10)) }

// grouped puts commas between the thousands of s, a number in decimal.
func grouped(s string) string {
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Count writes n, its thousands separated, and the noun, plural when n is
// not 1: "1 event", "770,279 events", "2 other processes", "5 meshes".
func Count(n int64, noun string) string {
	switch {
	case n == 1:
	case strings.HasSuffix(noun, "s"), strings.HasSuffix(noun, "sh"), strings.HasSuffix(noun, "ch"), strings.HasSuffix(noun, "x"):
		noun += "es"
	default:
		noun += "s"
	}
	return Thousands(n) + " " + noun
}

// Distance returns the edit distance between a and b: the fewest bytes
// inserted, deleted or replaced that make one the other (Levenshtein's).
func Distance(a, b string) int {
	row := make([]int, len(b)+1)
	for j := range row {
		row[j] = j
	}
	for i := 1; i <= len(a); i++ {
		diag := row[0]
		row[0] = i
		for j := 1; j <= len(b); j++ {
			up := row[j]
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			row[j] = min(row[j]+1, row[j-1]+1, diag+cost)
			diag = up
		}
	}
	return row[len(b)]
}

// Closest returns the names nearest to name by Distance, case aside, in
// their order, at most n of them: those at the least distance, if it is
// at most a third of name's length (at least 2); none otherwise.
func Closest(name string, names []string, n int) []string {
	best, out := -1, []string(nil)
	low := strings.ToLower(name)
	for _, c := range names {
		d := Distance(low, strings.ToLower(c))
		switch {
		case d > max(2, len(name)/3):
		case best < 0 || d < best:
			best, out = d, []string{c}
		case d == best && len(out) < n:
			out = append(out, c)
		}
	}
	return out
}

// Or joins words as a list a reader says: "a", "a or b", "a, b or c".
func Or(words []string) string {
	if len(words) <= 1 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

// FirstDiff shows the first line where two texts differ, for a test's
// failure: its number, and the line of each.
func FirstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n want %q\n  got %q", i+1, wl, gl)
		}
	}
	return "(no line differs)"
}
