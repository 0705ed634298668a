package libc

import (
	_ "embed"
	"fmt"

	"github.com/carvelab/carve/lab/internal/cbuild"
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

// replayer is the C replayer's build, cached in
// os.UserCacheDir()/carve/libc-creplay-<hash>. -ldl is needed for dlsym
// before glibc 2.34, and harmless after.
var replayer = cbuild.Build{
	Name: "libc-creplay",
	Files: []cbuild.File{
		{Name: "main.c", Src: replayerMain},
		{Name: "loop.c", Src: loopSource},
		{Name: "probe.c", Src: probeSource},
		{Name: "carve_libc.h", Src: headerSource},
	},
	Flags: []string{"-O2", "main.c", "loop.c", "probe.c", "-ldl"},
}

// replayerBinary returns the path of the C replayer, building it into the
// cache at first use.
func replayerBinary() (string, error) {
	path, err := replayer.Path()
	if err != nil {
		return "", fmt.Errorf("libc: the C replayer: %w", err)
	}
	return path, nil
}

// replayerBuildable reports whether the replayer can be had: it is in the
// cache, or a C compiler is there to build it.
func replayerBuildable() error {
	if err := replayer.Available(); err != nil {
		return fmt.Errorf("libc: the C replayer: %w", err)
	}
	return nil
}
