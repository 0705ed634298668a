package trace

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
)

// readFileGz returns the decompressed text of a gzip file, cut after the
// last whole line within limit bytes (limit <= 0: all of it).
func readFileGz(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	var rd io.Reader = z
	if limit > 0 {
		rd = io.LimitReader(z, int64(limit))
	}
	b, err := io.ReadAll(rd)
	if err != nil {
		return nil, err
	}
	if limit > 0 {
		b = b[:bytes.LastIndexByte(b, '\n')+1]
	}
	return b, nil
}
