package libc

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
)

// The sources of the C replayer (see Replayer): its main in creplay/,
// which holds no Go file (cgo compiles the .c files of the package's own
// directory into the package, and a second main would not link), and the
// probe and the batch loop the package's cgo side is made of, so that the
// replayer names the malloc and performs each op exactly as Loop does.
var (
	//go:embed creplay/main.c
	replayerMain []byte
	//go:embed loop.c
	loopSource []byte
	//go:embed probe.c
	probeSource []byte
	//go:embed carve_libc.h
	headerSource []byte
)

// replayerSources are the files of the replayer's build, by name.
var replayerSources = []struct {
	name string
	src  []byte
}{
	{"main.c", replayerMain},
	{"loop.c", loopSource},
	{"probe.c", probeSource},
	{"carve_libc.h", headerSource},
}

// replayerFlags are the compiler's arguments after the command and before
// -o. -ldl is needed for dlsym before glibc 2.34, and harmless after.
var replayerFlags = []string{"-O2", "main.c", "loop.c", "probe.c", "-ldl"}

// buildMu makes one build at a time in this process; the rename into the
// cache keeps builds by several processes safe.
var buildMu sync.Mutex

// compiler returns the C compiler's command: $CC split at blanks, or cc.
func compiler() []string {
	if cc := strings.Fields(os.Getenv("CC")); len(cc) > 0 {
		return cc
	}
	return []string{"cc"}
}

// replayerPath returns where the replayer built by the compiler cc is
// cached: os.UserCacheDir()/carve/libc-creplay-<hash>, the hash covering
// the sources, the compiler's command and the flags, so that a change of
// any of them builds anew.
func replayerPath(cc []string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("libc: no cache directory for the C replayer: %w", err)
	}
	h := sha256.New()
	for _, s := range append(cc, replayerFlags...) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	for _, f := range replayerSources {
		fmt.Fprintf(h, "%s %d\x00", f.name, len(f.src))
		h.Write(f.src)
	}
	sum := hex.EncodeToString(h.Sum(nil))[:16]
	return filepath.Join(cache, "carve", "libc-creplay-"+sum), nil
}

// replayerBinary returns the path of the C replayer, building it into the
// cache at first use. The build compiles in a temporary directory and
// renames the executable into place, so one in the cache is always whole,
// whoever else builds it at the same time.
func replayerBinary() (string, error) {
	cc := compiler()
	path, err := replayerPath(cc)
	if err != nil {
		return "", err
	}
	if isFile(path) {
		return path, nil
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if isFile(path) {
		return path, nil
	}
	bin, err := exec.LookPath(cc[0])
	if err != nil {
		return "", fmt.Errorf("%w: %q was not found (apt-get install gcc, or set CC): %v", ErrNoCompiler, cc[0], err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("libc: %w", err)
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), "libc-creplay-*.build")
	if err != nil {
		return "", fmt.Errorf("libc: %w", err)
	}
	defer os.RemoveAll(dir)
	for _, f := range replayerSources {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.src, 0o644); err != nil {
			return "", fmt.Errorf("libc: %w", err)
		}
	}
	args := append(append(cc[1:len(cc):len(cc)], replayerFlags...), "-o", "creplay")
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("libc: building the C replayer failed: %s %s: %w\n%s", cc[0], strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	if err := os.Rename(filepath.Join(dir, "creplay"), path); err != nil {
		return "", fmt.Errorf("libc: %w", err)
	}
	return path, nil
}

// replayerBuildable reports whether the replayer can be had: it is in the
// cache, or a C compiler is there to build it.
func replayerBuildable() error {
	cc := compiler()
	if path, err := replayerPath(cc); err == nil && isFile(path) {
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
