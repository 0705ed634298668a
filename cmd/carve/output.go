package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/carvelab/carve/internal/text"
)

// An output is where a command writes, the one path of every command
// that writes a file or standard output: standard output when there is
// no -o FILE; a
// temporary file beside FILE, renamed over it only when the command
// succeeds, for a regular file (or a new one), so that a failed command
// leaves an existing FILE as it was; FILE itself for anything else (a
// device such as /dev/null, a pipe), which is written in place, never
// replaced. A symbolic link is followed to the file it names, as a
// shell's > does: that file is written, the link stays. The first write
// error is kept, and nothing is written after it.
type output struct {
	w    io.Writer
	err  error  // the first write error
	path string // the file written: -o FILE, through its links
	tmp  *os.File
	file *os.File // a non-regular target opened for writing

	mu       sync.Mutex // finished, against the removal on a signal
	finished bool
	stop     func() // ends the removal on a signal
}

// openOutput checks and opens the output at path, before the command does
// its work. An output that is one of the files the command reads (the
// same file, also through a link) is refused: writing it would destroy
// the input. So is a directory. An interrupt or SIGTERM before finish
// removes the temporary file and ends carve as the signal would.
func openOutput(path string, stdout io.Writer, inputs ...string) (*output, error) {
	o, err := openOutputFile(path, stdout, inputs...)
	if err == nil && o.tmp != nil {
		o.removeOnSignal()
	}
	return o, err
}

// openOutputFile is openOutput for a command that handles interrupts
// itself (carve record, which writes what the program did until then):
// the temporary file stays until finish.
func openOutputFile(path string, stdout io.Writer, inputs ...string) (*output, error) {
	if path == "" {
		return &output{w: stdout, path: "the standard output"}, nil
	}
	target, err := followLinks(path)
	if err != nil {
		return nil, badUsage("-o %s: %v", path, err)
	}
	fi, err := os.Stat(target)
	switch {
	case err == nil:
		for _, in := range inputs {
			if ii, err := os.Stat(in); err == nil && os.SameFile(fi, ii) {
				return nil, badUsage("-o %s: the output is the input %s; write another file, then rename it", path, in)
			}
		}
		if fi.IsDir() {
			return nil, badUsage("-o %s: is a directory; name a file", path)
		}
		if !fi.Mode().IsRegular() {
			f, err := os.OpenFile(target, os.O_WRONLY, 0)
			if err != nil {
				return nil, badUsage("-o %s: %v", path, err)
			}
			return &output{w: f, path: target, file: f}, nil
		}
	case !os.IsNotExist(err):
		return nil, badUsage("-o %s: %v", path, err)
	}
	dir := filepath.Dir(target)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(target)+".carve-*")
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, badUsage("-o %s: cannot write in %s: %v", path, dir, err)
	}
	return &output{w: tmp, path: target, tmp: tmp}, nil
}

// followLinks returns the file that path names through its symbolic
// links, which need not exist yet (a link to a new file).
func followLinks(path string) (string, error) {
	for range 40 { // Linux's own bound on a path's links
		fi, err := os.Lstat(path)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			return path, nil
		}
		link, err := os.Readlink(path)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(path), link)
		}
		path = link
	}
	return "", errors.New("too many levels of symbolic links")
}

// removeOnSignal removes the temporary file when carve is interrupted
// (SIGINT) or terminated (SIGTERM) before finish, and then ends carve by
// the same signal.
func (o *output) removeOnSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	o.stop = func() {
		signal.Stop(ch)
		close(done)
	}
	go func() {
		select {
		case sig := <-ch:
			o.mu.Lock() // held: finish does not rename it meanwhile
			if !o.finished {
				o.tmp.Close()
				os.Remove(o.tmp.Name())
			}
			signal.Reset(sig)
			if p, err := os.FindProcess(os.Getpid()); err == nil {
				p.Signal(sig)
			}
			time.Sleep(time.Second)
			os.Exit(1) // where the signal did not end the process
		case <-done:
		}
	}()
}

// finish completes the output: with ok, the temporary file takes FILE's
// place (with FILE's permissions if it existed, else 0644); without, it is
// removed and FILE stays as it was. It returns the first write error, if
// there was one (the temporary file is then removed).
func (o *output) finish(ok bool) error {
	switch {
	case o.file != nil:
		return cmp.Or(o.err, o.file.Close())
	case o.tmp == nil:
		return o.err
	}
	ok = ok && o.err == nil
	o.mu.Lock()
	defer o.mu.Unlock()
	o.finished = true
	if o.stop != nil {
		o.stop()
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
	return cmp.Or(o.err, err)
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

// Write writes p, keeping the first error, after which it writes
// nothing.
func (o *output) Write(p []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	n, err := o.w.Write(p)
	if err != nil {
		o.err = o.writeErr(err)
	}
	return n, o.err
}

// writeErr is the error of a failed write: writing the output failed
// (exit code 1), whatever the writer's error says.
func (o *output) writeErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("writing %s: %w", o.path, err)
}

// The output formats --format takes, the default first: the tables'
// (replay, lab, report's) and the text-or-JSON of advise and diff.
var (
	tableFormats = []string{"text", "markdown", "csv", "json"}
	textOrJSON   = []string{"text", "json"}
)

// checkFormat refuses a --format that is not one of formats.
func checkFormat(got string, formats []string) error {
	if slices.Contains(formats, got) {
		return nil
	}
	return badUsage("--format %q: want %s", got, text.Or(formats))
}
