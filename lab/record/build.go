package record

import (
	_ "embed"
	"fmt"
	"strings"

	"github.com/carvelab/carve/lab/internal/cbuild"
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

// libraryBuild is the build of the shared library called name from src,
// cached in os.UserCacheDir()/carve/record-<name>-<hash>.so. -ldl and
// -lpthread are needed before glibc 2.34 and harmless after.
func libraryBuild(name string, src []byte) cbuild.Build {
	return cbuild.Build{
		Name:  "record-" + name,
		Ext:   ".so",
		Files: []cbuild.File{{Name: name + ".c", Src: src}},
		Flags: []string{name + ".c", "-shared", "-fPIC", "-O2", "-fvisibility=hidden", "-ldl", "-lpthread"},
	}
}

// library returns the path of the shared library called name built from
// src, building it into the cache if it is not there yet.
func library(name string, src []byte) (string, error) {
	path, err := libraryBuild(name, src).Path()
	if err != nil {
		return "", fmt.Errorf("record: carve's %s library: %w", name, err)
	}
	return preloadable(path)
}

// cachedOrCompiler reports whether the library can be had: it is in the
// cache, or a C compiler is there to build it.
func cachedOrCompiler(name string, src []byte) error {
	if err := libraryBuild(name, src).Available(); err != nil {
		return fmt.Errorf("record: carve's %s library: %w", name, err)
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
