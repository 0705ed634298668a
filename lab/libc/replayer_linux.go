package libc

import (
	"os"
	"syscall"
)

// pipe returns a pipe in blocking mode, with a buffer of at least size
// bytes if the kernel allows it. A Replayer's caller waits for each
// report on a thread of its own (replay.RunBatch locks it), and a
// blocking read wakes that thread directly, where the runtime's poller
// would add a round through epoll to each batch; a buffer that holds a
// whole batch lets the batch be written in one go.
func pipe(size int) (r, w *os.File, err error) {
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		return nil, nil, os.NewSyscallError("pipe2", err)
	}
	// F_SETPIPE_SZ (fcntl(2)), best effort: the default buffer works,
	// with more wake-ups.
	const fSetPipeSize = 1031
	syscall.Syscall(syscall.SYS_FCNTL, uintptr(fds[1]), fSetPipeSize, uintptr(size))
	return os.NewFile(uintptr(fds[0]), "|0"), os.NewFile(uintptr(fds[1]), "|1"), nil
}
