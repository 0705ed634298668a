package record

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
)

// The C libraries this package preloads, built at first use with the
// system's C compiler (see library). They live under preload/, which
// holds no Go files, so go build leaves them alone.
var (
	//go:embed preload/carve.c
	carveSource []byte
	//go:embed preload/mtrace.c
	mtraceSource []byte
)

// cflags are the compiler's arguments after the command itself, the
// source coming from standard input. -ldl and -lpthread are needed
// before glibc 2.34 and harmless after.
var cflags = []string{"-x", "c", "-", "-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-ldl", "-lpthread"}

var (
	buildMu sync.Mutex   // one build at a time in this process
	builds  atomic.Int64 // libraries compiled, for the tests
)

// compiler returns the C compiler's command: $CC split at blanks, or cc.
func compiler() []string {
	if cc := strings.Fields(os.Getenv("CC")); len(cc) > 0 {
		return cc
	}
	return []string{"cc"}
}

// libraryPath returns where the library called name, built from src by
// the compiler cc, is cached: os.UserCacheDir()/carve/record-<name>-<hash>.so,
// the hash covering the source, the compiler's command and the flags, so
// that a change of any of them builds anew.
func libraryPath(name string, src []byte, cc []string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("record: no cache directory for the recording library: %w", err)
	}
	h := sha256.New()
	for _, s := range append(cc, cflags...) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	h.Write(src)
	sum := hex.EncodeToString(h.Sum(nil))[:16]
	return filepath.Join(cache, "carve", "record-"+name+"-"+sum+".so"), nil
}

// library returns the path of the shared library called name built from
// src, building it into the cache if it is not there yet. The build
// writes a temporary file beside the final one and renames it, so a
// library in the cache is always whole, whoever else builds it at the
// same time.
func library(name string, src []byte) (string, error) {
	cc := compiler()
	path, err := libraryPath(name, src, cc)
	if err != nil {
		return "", err
	}
	if path, err = preloadable(path); err != nil {
		return "", err
	}
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	bin, err := exec.LookPath(cc[0])
	if err != nil {
		return "", fmt.Errorf("record: building carve's %s library needs a C compiler, and %q was not found (apt-get install gcc, or set CC): %w", name, cc[0], err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("record: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "record-"+name+"-*.tmp")
	if err != nil {
		return "", fmt.Errorf("record: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name()) // after a failure; a no-op after the rename

	args := append(append(cc[1:len(cc):len(cc)], cflags...), "-o", tmp.Name())
	cmd := exec.Command(bin, args...)
	cmd.Stdin = bytes.NewReader(src)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("record: building carve's %s library failed: %s %s < preload/%s.c: %w\n%s",
			name, cc[0], strings.Join(args, " "), name, err, strings.TrimSpace(stderr.String()))
	}
	builds.Add(1)
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("record: %w", err)
	}
	return path, nil
}

// cachedOrCompiler reports whether the library can be had: it is in the
// cache, or a C compiler is there to build it.
func cachedOrCompiler(name string, src []byte) error {
	cc := compiler()
	if path, err := libraryPath(name, src, cc); err == nil {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
	}
	if _, err := exec.LookPath(cc[0]); err != nil {
		return fmt.Errorf("record: building carve's %s library needs a C compiler, and %q was not found (apt-get install gcc, or set CC)", name, cc[0])
	}
	return nil
}

// preloadable returns path, or an error if LD_PRELOAD cannot carry it:
// blanks and colons separate its entries.
func preloadable(path string) (string, error) {
	if strings.ContainsAny(path, " \t:") {
		return "", fmt.Errorf("record: LD_PRELOAD cannot name %q: its entries are separated by blanks and colons (set XDG_CACHE_HOME to a plainer directory)", path)
	}
	return path, nil
}
