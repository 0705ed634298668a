package trace

import (
	"encoding/binary"
	"math/bits"
)

// Scanning numbers and words in place: each function takes a line and the
// index to start at and returns the index after what it read, with ok
// false when the text there is not what it reads (or overflows 64 bits).
// No function allocates.

// dec reads a decimal number. When 8 bytes are there to load, up to 8
// digits are found and converted at once, without a branch per digit: the
// digit count varies from line to line, and a loop's mispredicted exit
// would cost more than the conversion.
func dec(b []byte, i int) (v uint64, j int, ok bool) {
	if len(b)-i >= 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		if n := digits8(x); n < 8 {
			if n == 0 {
				return 0, i, false
			}
			return swar8(x, n), i + n, true
		}
	}
	j = i
	for ; j < len(b); j++ {
		d := b[j] - '0'
		if d > 9 {
			break
		}
		v = v*10 + uint64(d)
	}
	if j-i >= 20 { // 19 digits never overflow; 20 may
		return decSlow(b, i)
	}
	return v, j, j > i
}

// digits8 returns how many of the 8 bytes of x (the first in the lowest
// byte) are decimal digits before the first that is not.
func digits8(x uint64) int {
	const hi = 0x8080808080808080
	lo := x &^ hi
	above9 := (lo + 0x4646464646464646) & hi // low 7 bits > '9'
	from0 := (lo + 0x5050505050505050) & hi  // low 7 bits >= '0'
	not := above9 | (from0 ^ hi) | x&hi      // or not ASCII at all
	return bits.TrailingZeros64(not) >> 3
}

// swar8 converts the first n (1 to 7) digits of x, the first in the
// lowest byte: the digits are moved to the top bytes (the bytes below
// become zeros), then combined in pairs, quads and the whole eight with
// three multiplications.
func swar8(x uint64, n int) uint64 {
	x = (x - 0x3030303030303030) << (8 * (8 - n))
	x = (x*10 + x>>8) & 0x00ff00ff00ff00ff
	x = (x*100 + x>>16) & 0x0000ffff0000ffff
	return (x*10000 + x>>32) & 0xffffffff
}

// decSlow is dec with an overflow check per digit.
func decSlow(b []byte, i int) (v uint64, j int, ok bool) {
	j = i
	for ; j < len(b); j++ {
		d := b[j] - '0'
		if d > 9 {
			break
		}
		if v > (1<<64-1-uint64(d))/10 {
			return 0, j, false
		}
		v = v*10 + uint64(d)
	}
	return v, j, j > i
}

// hexDigit maps a byte to its hexadecimal value, or 0xff.
var hexDigit = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c - 'a' + 10)
		t[c-'a'+'A'] = byte(c - 'a' + 10)
	}
	return t
}()

// hex reads a hexadecimal number without a prefix. Eight digits (a
// 32-bit address, or two thirds of a 64-bit one) are read at once, with
// independent table lookups rather than a chain of multiply-adds.
func hex(b []byte, i int) (v uint64, j int, ok bool) {
	j = i
	if len(b)-i >= 8 {
		c := b[i : i+8 : i+8]
		d0, d1, d2, d3 := hexDigit[c[0]], hexDigit[c[1]], hexDigit[c[2]], hexDigit[c[3]]
		d4, d5, d6, d7 := hexDigit[c[4]], hexDigit[c[5]], hexDigit[c[6]], hexDigit[c[7]]
		if (d0|d1|d2|d3|d4|d5|d6|d7)&0xf0 == 0 {
			v = uint64(d0)<<28 | uint64(d1)<<24 | uint64(d2)<<20 | uint64(d3)<<16 |
				uint64(d4)<<12 | uint64(d5)<<8 | uint64(d6)<<4 | uint64(d7)
			j += 8
		}
	}
	for ; j < len(b); j++ {
		d := hexDigit[b[j]]
		if d == 0xff {
			break
		}
		if v>>60 != 0 {
			return 0, j, false
		}
		v = v<<4 | uint64(d)
	}
	return v, j, j > i
}

// ptr reads a pointer as C's printf %p and most tracers print it:
// "0x" and hexadecimal digits, or "(nil)" for NULL (glibc's %p). A bare
// "0" is NULL too.
func ptr(b []byte, i int) (v uint64, j int, ok bool) {
	if i+1 < len(b) && b[i] == '0' && (b[i+1] == 'x' || b[i+1] == 'X') {
		return hex(b, i+2)
	}
	if hasAt(b, i, "(nil)") {
		return 0, i + 5, true
	}
	if i < len(b) && b[i] == '0' && (i+1 == len(b) || hexDigit[b[i+1]] == 0xff) {
		return 0, i + 1, true
	}
	return 0, i, false
}

// space skips one or more blanks (spaces or tabs); ok is false when there
// is none.
func space(b []byte, i int) (j int, ok bool) {
	j = i
	for j < len(b) && (b[j] == ' ' || b[j] == '\t') {
		j++
	}
	return j, j > i
}

// blank reports whether b holds only blanks from i on.
func blank(b []byte, i int) bool {
	for ; i < len(b); i++ {
		if b[i] != ' ' && b[i] != '\t' {
			return false
		}
	}
	return true
}

// hasAt reports whether b holds s at i.
func hasAt(b []byte, i int, s string) bool {
	return i >= 0 && len(b)-i >= len(s) && string(b[i:i+len(s)]) == s
}

// word returns the end of the run of non-blank bytes starting at i.
func word(b []byte, i int) int {
	for i < len(b) && b[i] != ' ' && b[i] != '\t' {
		i++
	}
	return i
}

// decField reads a blank and then a decimal number: one field of a
// blank-separated line.
func decField(b []byte, i int) (uint64, int, bool) {
	i, ok := space(b, i)
	if !ok {
		return 0, i, false
	}
	return dec(b, i)
}

// hexField reads a blank and then a hexadecimal number without prefix.
func hexField(b []byte, i int) (uint64, int, bool) {
	i, ok := space(b, i)
	if !ok {
		return 0, i, false
	}
	return hex(b, i)
}
