/*
 * carve.c: carve's recording library. Package record (build.go) embeds
 * this file, builds it with the system's C compiler at first use, and
 * runs the program with it in LD_PRELOAD.
 *
 * It stands between the program and its allocator: malloc, free, calloc,
 * realloc, reallocarray, memalign, posix_memalign, aligned_alloc, valloc
 * and pvalloc are defined here, call the next definition in the lookup
 * order (glibc's, or an allocator preloaded after this library, found
 * with dlsym(RTLD_NEXT)), and log each call in Android's memory_replay
 * text format, which package trace reads (trace/aosp.go):
 *
 *     <tid>: malloc <ptr> <size>
 *     <tid>: calloc <ptr> <nmemb> <size>
 *     <tid>: memalign <ptr> <alignment> <size>
 *     <tid>: realloc <new ptr> <old ptr> <size>
 *     <tid>: free <ptr>
 *
 * Sections: the log (where records go), the real functions (and the
 * bootstrap buffer that serves dlsym's own allocations), the wrappers,
 * and the process's life (constructor, fork, exit).
 *
 * One order. A global lock is held around "call the real function,
 * append the record", so the log is an order in which the calls could
 * have happened: a free of p is logged before the malloc that returns p
 * again, and after the malloc that returned it first. Every call costs
 * the lock; threads allocate one at a time.
 *
 * Not logged: free(NULL), and calls that failed (a NULL result; but
 * realloc(p, 0) returning NULL is logged, it freed p). Calls made while
 * the thread is already inside a wrapper (the allocator calling itself,
 * a signal handler interrupting a wrapper) go straight to the allocator
 * unlogged: the `inside` flag. Blocks served from the bootstrap buffer
 * are never logged and never reach the real free.
 *
 * Processes. CARVE_RECORD_DIR names the directory of logs. Every process
 * image that loads this library with that variable set writes its own
 * log there, <pid>-<k>.log (k the first number not taken), and the path
 * of its executable in <pid>-<k>.exe: a forked child opens its own log
 * (the parent's buffered records stay the parent's), and a program that
 * execs another leaves its log and the new image starts one. The Go side
 * keeps the busiest log. The buffer is written at exit and _exit; it is
 * lost (at most LOG_BUF bytes) when a signal ends the process or it
 * replaces itself with exec, or when it ends by the exit_group system
 * call without libc's exit, as a Go program does: with
 * CARVE_RECORD_WRITE_THROUGH=1 (which the Go side sets for Go binaries)
 * every record is written at once instead, a write(2) per call.
 */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
/* Thread-locals of a preloaded library are in the static TLS block:
 * initial-exec reaches them without __tls_get_addr, which may allocate. */
#define TLS __thread __attribute__((tls_model("initial-exec")))

/* ---- The log ---------------------------------------------------------- */

enum {
	LOG_BUF = 64 << 10, /* bytes buffered before a write(2) */
	LINE_MAX_LEN = 128, /* longer than any record */
	FD_MIN = 256,       /* the log's descriptor is moved at or above this */
};

enum { STATE_UNSET, STATE_ON, STATE_OFF };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Written under lock (or before threads, at start-up and in a fork's
 * child); state is read without it, to skip the lock when not recording. */
static volatile int state = STATE_UNSET;
static int log_fd = -1;
static int write_through; /* set at exit: each record is written at once */
static int always_through; /* CARVE_RECORD_WRITE_THROUGH=1: from the start */
static size_t used;
static char buf[LOG_BUF];
static char dir[4096];

static TLS int inside; /* this thread is in a wrapper */
static TLS pid_t tid;

static char *put_str(char *s, const char *t)
{
	while (*t)
		*s++ = *t++;
	return s;
}

static char *put_dec(char *s, uint64_t v)
{
	char tmp[20];
	int n = 0;
	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*s++ = tmp[--n];
	return s;
}

static char *put_hex(char *s, uint64_t v)
{
	static const char digits[] = "0123456789abcdef";
	char tmp[16];
	int n = 0;
	do {
		tmp[n++] = digits[v & 15];
		v >>= 4;
	} while (v);
	*s++ = '0';
	*s++ = 'x';
	while (n)
		*s++ = tmp[--n];
	return s;
}

/* write_all writes b[:n] to fd, through short writes and signals. */
static int write_all(int fd, const char *b, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, b, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* flush writes the buffer. Lock held. A log that cannot be written
 * stops the recording rather than the program. */
static void flush(void)
{
	if (used > 0 && log_fd >= 0 && write_all(log_fd, buf, used) != 0) {
		state = STATE_OFF;
		close(log_fd);
		log_fd = -1;
	}
	used = 0;
}

/* line starts a record: "<tid>: <op> ". Lock held. The caller appends
 * the fields and passes the end to done. */
static char *line(const char *op)
{
	if (used > LOG_BUF - LINE_MAX_LEN)
		flush();
	if (tid == 0)
		tid = (pid_t)syscall(SYS_gettid);
	char *s = put_dec(buf + used, (uint64_t)tid);
	s = put_str(s, ": ");
	s = put_str(s, op);
	return put_str(s, " ");
}

static void done(char *end)
{
	*end++ = '\n';
	used = (size_t)(end - buf);
	if (write_through)
		flush();
}

/* open_log opens this process's log, <dir>/<pid>-<k>.log, and writes the
 * executable's path beside it. It allocates nothing: it may run inside
 * the first malloc. */
static void open_log(void)
{
	char path[sizeof dir + 64], *end, *s;
	int fd = -1;
	end = put_str(path, dir);
	end = put_str(end, "/");
	end = put_dec(end, (uint64_t)getpid());
	end = put_str(end, "-");
	for (unsigned k = 0; k < 1000 && fd < 0; k++) {
		s = put_dec(end, k);
		strcpy(s, ".log");
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	if (fd < 0) {
		state = STATE_OFF;
		return;
	}
	/* Out of the way of programs that reuse low descriptors. */
	int high = fcntl(fd, F_DUPFD_CLOEXEC, FD_MIN);
	if (high >= 0) {
		close(fd);
		fd = high;
	}
	log_fd = fd;
	used = 0;
	write_through = always_through;
	state = STATE_ON;

	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe);
	strcpy(s, ".exe");
	int efd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (efd >= 0) {
		if (n > 0)
			write_all(efd, exe, (size_t)n);
		close(efd);
	}
}

/* start reads CARVE_RECORD_DIR and opens the log. It runs once, from
 * the constructor or from the first allocation if that comes before it
 * (from another library's constructor, maybe on another thread). */
static void start(void)
{
	const char *d = getenv("CARVE_RECORD_DIR");
	if (d == NULL || d[0] == '\0' || strlen(d) >= sizeof dir) {
		state = STATE_OFF;
		return;
	}
	strcpy(dir, d);
	const char *wt = getenv("CARVE_RECORD_WRITE_THROUGH");
	always_through = wt != NULL && wt[0] == '1' && wt[1] == '\0';
	open_log();
}

static pthread_once_t started = PTHREAD_ONCE_INIT;

/* recording reports whether this call is to be logged. Until libc has
 * set up the environment, calls are not logged and the start waits. */
static inline int recording(void)
{
	if (inside)
		return 0;
	if (__builtin_expect(state == STATE_UNSET, 0)) {
		if (environ == NULL)
			return 0;
		pthread_once(&started, start);
	}
	return state == STATE_ON;
}

static inline void enter(void)
{
	inside = 1;
	pthread_mutex_lock(&lock);
}

static inline void leave(void)
{
	pthread_mutex_unlock(&lock);
	inside = 0;
}

/* ---- The real functions ------------------------------------------------ */

static struct {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*reallocarray)(void *, size_t, size_t); /* NULL when absent */
	void *(*memalign)(size_t, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	void (*exit)(int);
} real;

static volatile int resolved;
static TLS int resolving;

/* The bootstrap buffer serves the allocations dlsym makes while the
 * real functions are being found. Each block has a 16-byte header with
 * its size (for realloc). Its blocks are never freed. */
enum { BOOT_SIZE = 64 << 10, BOOT_HEADER = 16 };
static char boot[BOOT_SIZE] __attribute__((aligned(64)));
static size_t boot_used;

static int is_boot(const void *p)
{
	return (const char *)p >= boot && (const char *)p < boot + BOOT_SIZE;
}

static void *boot_alloc(size_t size)
{
	if (size > BOOT_SIZE)
		return NULL;
	size_t start = __atomic_fetch_add(&boot_used, (size + BOOT_HEADER + 15) & ~(size_t)15, __ATOMIC_RELAXED);
	if (start + size + BOOT_HEADER > BOOT_SIZE)
		return NULL;
	memcpy(boot + start, &size, sizeof size);
	return boot + start + BOOT_HEADER;
}

static size_t boot_size(const void *p)
{
	size_t size;
	memcpy(&size, (const char *)p - BOOT_HEADER, sizeof size);
	return size;
}

static void *next(const char *name)
{
	return dlsym(RTLD_NEXT, name);
}

/* resolve finds the real functions. Allocations it makes itself
 * (dlsym's) come from the bootstrap buffer: see ready. */
static void resolve(void)
{
	resolving = 1;
	real.malloc = next("malloc");
	real.calloc = next("calloc");
	real.realloc = next("realloc");
	real.reallocarray = next("reallocarray");
	real.memalign = next("memalign");
	real.posix_memalign = next("posix_memalign");
	real.aligned_alloc = next("aligned_alloc");
	real.valloc = next("valloc");
	real.pvalloc = next("pvalloc");
	real.exit = next("_exit");
	real.free = next("free");
	resolving = 0;
	if (real.malloc == NULL || real.free == NULL || real.calloc == NULL || real.realloc == NULL ||
	    real.memalign == NULL || real.posix_memalign == NULL || real.aligned_alloc == NULL ||
	    real.valloc == NULL || real.pvalloc == NULL) {
		static const char msg[] = "carve record: dlsym(RTLD_NEXT) did not find the allocator's functions\n";
		write_all(2, msg, sizeof msg - 1);
		abort();
	}
	__atomic_store_n(&resolved, 1, __ATOMIC_RELEASE);
}

/* ready reports whether the real functions are known, finding them at
 * the first call; it is false only inside resolve, whose allocations the
 * bootstrap buffer serves. */
static inline int ready(void)
{
	if (__builtin_expect(__atomic_load_n(&resolved, __ATOMIC_ACQUIRE), 1))
		return 1;
	if (resolving)
		return 0;
	resolve();
	return 1;
}

/* ---- The wrappers ------------------------------------------------------ */

EXPORT void *malloc(size_t size)
{
	if (!ready())
		return boot_alloc(size);
	if (!recording())
		return real.malloc(size);
	enter();
	void *p = real.malloc(size);
	if (p != NULL) {
		char *s = put_hex(line("malloc"), (uintptr_t)p);
		*s++ = ' ';
		done(put_dec(s, size));
	}
	leave();
	return p;
}

EXPORT void free(void *p)
{
	if (p == NULL || is_boot(p) || !ready())
		return;
	if (!recording()) {
		real.free(p);
		return;
	}
	enter();
	real.free(p);
	done(put_hex(line("free"), (uintptr_t)p));
	leave();
}

EXPORT void *calloc(size_t n, size_t size)
{
	if (!ready()) {
		size_t total;
		if (__builtin_mul_overflow(n, size, &total))
			return NULL;
		return boot_alloc(total); /* static memory: zero */
	}
	if (!recording())
		return real.calloc(n, size);
	enter();
	void *p = real.calloc(n, size);
	if (p != NULL) {
		char *s = put_hex(line("calloc"), (uintptr_t)p);
		*s++ = ' ';
		s = put_dec(s, n);
		*s++ = ' ';
		done(put_dec(s, size));
	}
	leave();
	return p;
}

/* log_realloc logs realloc(old, size) = p; NULL results are left out
 * unless the call freed old (size 0). Lock held. */
static void log_realloc(void *p, void *old, size_t size)
{
	if (p == NULL && (old == NULL || size != 0))
		return;
	char *s = put_hex(line("realloc"), (uintptr_t)p);
	*s++ = ' ';
	s = put_hex(s, (uintptr_t)old);
	*s++ = ' ';
	done(put_dec(s, size));
}

/* boot_realloc moves a bootstrap block to the real allocator. */
static void *boot_realloc(void *old, size_t size)
{
	if (!ready())
		return boot_alloc(size);
	void *p = malloc(size);
	if (p != NULL) {
		size_t n = boot_size(old);
		memcpy(p, old, n < size ? n : size);
	}
	return p;
}

EXPORT void *realloc(void *old, size_t size)
{
	if (old != NULL && is_boot(old))
		return boot_realloc(old, size);
	if (!ready())
		return boot_alloc(size);
	if (!recording())
		return real.realloc(old, size);
	enter();
	void *p = real.realloc(old, size);
	log_realloc(p, old, size);
	leave();
	return p;
}

EXPORT void *reallocarray(void *old, size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	if (old != NULL && is_boot(old))
		return boot_realloc(old, total);
	if (!ready())
		return boot_alloc(total);
	if (real.reallocarray == NULL) /* a libc without it: the same call */
		return realloc(old, total);
	if (!recording())
		return real.reallocarray(old, n, size);
	enter();
	void *p = real.reallocarray(old, n, size);
	log_realloc(p, old, total);
	leave();
	return p;
}

/* log_memalign logs an aligned allocation. Lock held. */
static void log_memalign(void *p, size_t align, size_t size)
{
	char *s = put_hex(line("memalign"), (uintptr_t)p);
	*s++ = ' ';
	s = put_dec(s, align);
	*s++ = ' ';
	done(put_dec(s, size));
}

EXPORT void *memalign(size_t align, size_t size)
{
	if (!ready())
		return NULL;
	if (!recording())
		return real.memalign(align, size);
	enter();
	void *p = real.memalign(align, size);
	if (p != NULL)
		log_memalign(p, align, size);
	leave();
	return p;
}

EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	if (!ready())
		return ENOMEM;
	if (!recording())
		return real.posix_memalign(out, align, size);
	enter();
	int err = real.posix_memalign(out, align, size);
	if (err == 0)
		log_memalign(*out, align, size);
	leave();
	return err;
}

EXPORT void *aligned_alloc(size_t align, size_t size)
{
	if (!ready())
		return NULL;
	if (!recording())
		return real.aligned_alloc(align, size);
	enter();
	void *p = real.aligned_alloc(align, size);
	if (p != NULL)
		log_memalign(p, align, size);
	leave();
	return p;
}

EXPORT void *valloc(size_t size)
{
	if (!ready())
		return NULL;
	if (!recording())
		return real.valloc(size);
	enter();
	void *p = real.valloc(size);
	if (p != NULL)
		log_memalign(p, (size_t)sysconf(_SC_PAGESIZE), size);
	leave();
	return p;
}

/* pvalloc rounds the size up to whole pages (one page for 0): the
 * program may use them all, so the record says so. */
EXPORT void *pvalloc(size_t size)
{
	if (!ready())
		return NULL;
	if (!recording())
		return real.pvalloc(size);
	enter();
	void *p = real.pvalloc(size);
	if (p != NULL) {
		size_t page = (size_t)sysconf(_SC_PAGESIZE);
		size_t rounded = size == 0 ? page : (size + page - 1) & ~(page - 1);
		log_memalign(p, page, rounded);
	}
	leave();
	return p;
}

/* ---- The process's life ------------------------------------------------ */

/* Fork: the forking thread holds the lock across fork, so the child gets
 * it in a known state. The child drops the parent's buffered records
 * (the parent writes them) and opens a log of its own. */
static void fork_prepare(void)
{
	if (state != STATE_ON)
		return;
	enter();
}

static void fork_parent(void)
{
	if (state != STATE_ON)
		return;
	leave();
}

static void fork_child(void)
{
	if (state != STATE_ON)
		return;
	pthread_mutex_init(&lock, NULL);
	inside = 0;
	tid = 0;
	close(log_fd);
	log_fd = -1;
	used = 0;
	open_log();
}

/* Exit: the buffer is written by an atexit handler and again by the
 * destructor, and records after the first of them are written at once
 * (destructors and other threads may still allocate). */
static void finish(void)
{
	if (state != STATE_ON || inside)
		return;
	enter();
	flush();
	write_through = 1;
	leave();
}

/* _exit and _Exit end the process without exit's handlers: the buffer
 * is written first. (exit itself reaches the system call inside libc,
 * past these; exec, which also drops the buffer, is not wrapped.) */
EXPORT void _exit(int status)
{
	finish();
	if (__atomic_load_n(&resolved, __ATOMIC_ACQUIRE) && real.exit != NULL)
		real.exit(status);
	syscall(SYS_exit_group, status);
	__builtin_unreachable();
}

EXPORT void _Exit(int status)
{
	_exit(status);
}

__attribute__((constructor)) static void init(void)
{
	inside = 1; /* the registrations below allocate: not the program's */
	ready();
	inside = 0;
	pthread_once(&started, start);
	if (state != STATE_ON)
		return;
	inside = 1;
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	atexit(finish);
	inside = 0;
}

__attribute__((destructor)) static void fini(void)
{
	finish();
}
