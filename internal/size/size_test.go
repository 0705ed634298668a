package size

import "testing"

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1024, "1.0 KiB"}, {-1536, "-1.5 KiB"},
		{10 << 20, "10.00 MiB"}, {3 << 30, "3.00 GiB"}, {1 << 40, "1.00 TiB"}, {1 << 62, "4194304.00 TiB"},
	} {
		if got := Format(tc.n); got != tc.want {
			t.Errorf("Format(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestDigits3(t *testing.T) {
	for _, tc := range []struct {
		n    uint64
		want string
	}{
		{0, "0 B"}, {1023, "1023 B"}, {1536, "1.50 KiB"}, {12900 << 10, "12.6 MiB"}, {256 << 10, "256 KiB"}, {1 << 50, "1024 TiB"},
	} {
		if got := Digits3(tc.n); got != tc.want {
			t.Errorf("Digits3(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want int64
		ok   bool
	}{
		{"65536", 65536, true}, {"64KiB", 64 << 10, true}, {"256MiB", 256 << 20, true},
		{"1 GiB", 1 << 30, true}, {"2T", 2 << 40, true}, {"16B", 16, true},
		{"", 0, false}, {"-1", 0, false}, {"1.5MiB", 0, false}, {"lots", 0, false},
		{"9223372036854775807", 1<<63 - 1, true}, {"8388608TiB", 0, false},
	} {
		got, err := Parse(tc.s)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("Parse(%q) = %d, %v; want %d, ok %t", tc.s, got, err, tc.want, tc.ok)
		}
	}
}
