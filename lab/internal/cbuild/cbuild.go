// Package cbuild compiles the lab's C programs and libraries with the
// system's C compiler at first use, into a cache that content decides:
// the file's name carries a hash of the sources, the compiler's command
// and its flags, so a change of any of them builds anew, and an output
// in the cache is always whole (it is compiled in a temporary directory
// beside its final place and renamed there), whoever else builds it at
// the same time.
package cbuild

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// ErrNoCompiler reports that an output is not in the cache yet and no C
// compiler is there to build it.
var ErrNoCompiler = errors.New("no C compiler")

// File is one source file of a build.
type File struct {
	Name string
	Src  []byte
}

// Build is one output: what it is called in the cache, its sources (all
// written into the build's directory), and the compiler's arguments after
// the command itself and before -o.
type Build struct {
	Name  string // the cached file's name before its hash, e.g. "record-carve"
	Ext   string // after the hash: ".so", or "" for a program
	Files []File
	Flags []string
}

var (
	mu     sync.Mutex   // one build at a time in this process
	builds atomic.Int64 // outputs compiled, for tests
)

// Builds counts the outputs this process has compiled.
func Builds() int64 { return builds.Load() }

// compiler returns the C compiler's command: $CC split at blanks, or cc.
func compiler() []string {
	if cc := strings.Fields(os.Getenv("CC")); len(cc) > 0 {
		return cc
	}
	return []string{"cc"}
}

// path returns where b, built by the compiler cc, is cached:
// os.UserCacheDir()/carve/<name>-<hash><ext>.
func (b Build) path(cc []string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache directory for %s: %w", b.Name, err)
	}
	h := sha256.New()
	for _, s := range append(cc, b.Flags...) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	for _, f := range b.Files {
		fmt.Fprintf(h, "%s %d\x00", f.Name, len(f.Src))
		h.Write(f.Src)
	}
	sum := hex.EncodeToString(h.Sum(nil))[:16]
	return filepath.Join(cache, "carve", b.Name+"-"+sum+b.Ext), nil
}

// Path returns the path of b's output, compiling it into the cache if it
// is not there yet. Without a compiler the error wraps ErrNoCompiler.
func (b Build) Path() (string, error) {
	cc := compiler()
	path, err := b.path(cc)
	if err != nil {
		return "", err
	}
	if isFile(path) {
		return path, nil
	}
	mu.Lock()
	defer mu.Unlock()
	if isFile(path) {
		return path, nil
	}
	bin, err := exec.LookPath(cc[0])
	if err != nil {
		return "", fmt.Errorf("%w: %q was not found (apt-get install gcc, or set CC): %v", ErrNoCompiler, cc[0], err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), b.Name+"-*.build")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	for _, f := range b.Files {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Src, 0o644); err != nil {
			return "", err
		}
	}
	const out = "out"
	args := append(append(cc[1:len(cc):len(cc)], b.Flags...), "-o", out)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building %s failed: %s %s: %w\n%s", b.Name, cc[0], strings.Join(args, " "), err, strings.TrimSpace(log.String()))
	}
	builds.Add(1)
	if err := os.Rename(filepath.Join(dir, out), path); err != nil {
		return "", err
	}
	return path, nil
}

// Available reports whether b's output can be had: it is in the cache, or
// a C compiler is there to build it (the error wraps ErrNoCompiler).
func (b Build) Available() error {
	cc := compiler()
	if path, err := b.path(cc); err == nil && isFile(path) {
		return nil
	}
	if _, err := exec.LookPath(cc[0]); err != nil {
		return fmt.Errorf("%w: %q was not found (apt-get install gcc, or set CC)", ErrNoCompiler, cc[0])
	}
	return nil
}

func isFile(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular()
}
