package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// An output is where a command writes its -o FILE: standard output when
// there is none; a temporary file beside FILE, renamed over it only when
// the command succeeds, for a regular file (or a new one), so that a
// failed command leaves an existing FILE as it was; FILE itself for
// anything else (/dev/stdout, a pipe), which cannot be replaced.
type output struct {
	io.Writer
	path string
	tmp  *os.File // nil: written directly
	file *os.File // a non-regular target opened for writing
}

// openOutput checks and opens the output at path, before the command does
// its work. An output that is one of the files the command reads (the
// same file, also through a link) is refused: writing it would destroy
// the input.
func openOutput(path string, stdout io.Writer, inputs ...string) (*output, error) {
	if path == "" {
		return &output{Writer: stdout}, nil
	}
	fi, err := os.Stat(path)
	switch {
	case err == nil:
		for _, in := range inputs {
			if ii, err := os.Stat(in); err == nil && os.SameFile(fi, ii) {
				return nil, badUsage("-o %s: the output is the input %s; write another file, then rename it", path, in)
			}
		}
		if !fi.Mode().IsRegular() {
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				return nil, badUsage("-o %s: %v", path, err)
			}
			return &output{Writer: f, path: path, file: f}, nil
		}
	case !os.IsNotExist(err):
		return nil, badUsage("-o %s: %v", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".carve-*")
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, badUsage("-o %s: cannot write in %s: %v", path, filepath.Dir(path), err)
	}
	return &output{Writer: tmp, path: path, tmp: tmp}, nil
}

// finish completes the output: with ok, the temporary file takes FILE's
// place (with FILE's permissions if it existed, else 0644); without, it is
// removed and FILE stays as it was.
func (o *output) finish(ok bool) error {
	switch {
	case o.file != nil:
		return o.file.Close()
	case o.tmp == nil:
		return nil
	}
	err := o.tmp.Close()
	if ok && err == nil {
		mode := os.FileMode(0o644)
		if fi, serr := os.Stat(o.path); serr == nil {
			mode = fi.Mode().Perm()
		}
		if err = os.Chmod(o.tmp.Name(), mode); err == nil {
			err = os.Rename(o.tmp.Name(), o.path)
		}
		if err == nil {
			return nil
		}
		err = fmt.Errorf("-o %s: %w", o.path, err)
	}
	os.Remove(o.tmp.Name())
	return err
}

// written runs write on the output and finishes it, keeping write's error
// first.
func (o *output) written(write func(io.Writer) error) error {
	err := write(o)
	if ferr := o.finish(err == nil); err == nil {
		err = ferr
	}
	return err
}
