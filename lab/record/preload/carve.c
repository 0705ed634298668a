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
 * With call stacks (unless CARVE_RECORD_STACKS=0), an allocation's
 * record ends with " @<stack>", and the stacks and the modules they run
 * in are records of their own, each written before the first record
 * that needs it (package trace's cstack.go reads them):
 *
 *     module <base> <lo> <hi> <path>
 *     stack <id> <return address> ...
 *
 * See "Call stacks" below.
 *
 * Sections: the log (where records go), the real functions (and the
 * bootstrap buffer that serves dlsym's own allocations), the wrappers,
 * and the process's life (constructor, fork).
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
 * The log. Records go straight into the log file, mapped MAP_SHARED:
 * a record stored there is in the file's pages, which outlive the
 * process however it ends (exit, _exit, the exit_group system call of a
 * Go program, a signal, SIGKILL) or replaces itself (exec), with no
 * handler to run and no buffer to write. The file is extended ahead of
 * the records (posix_fallocate, so that a full disk is an error rather
 * than a SIGBUS) and the mapping with it (mremap); its tail past the
 * records is zeros. A record's newline is stored last: the Go side reads
 * the file up to its last newline before the first zero byte, and what
 * lies past it is at most one record that the program's end cut short.
 * A log that cannot grow stops the recording of its process, not the
 * process: <pid>-<k>.stopped then holds the log's length and the error
 * number.
 *
 * Processes. CARVE_RECORD_DIR names the directory of logs. Every process
 * image that loads this library with that variable set writes its own
 * log there, <pid>-<k>.log (k the first number not taken), and the path
 * of its executable in <pid>-<k>.exe: a forked child unmaps its parent's
 * log and opens its own (in the fork handler, or, forked by the raw
 * system call, at its first record: see owner), and a program that
 * execs another leaves its log and the new image starts one. The Go
 * side keeps the busiest log.
 */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <link.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
/* Thread-locals of a preloaded library are in the static TLS block:
 * initial-exec reaches them without __tls_get_addr, which may allocate. */
#define TLS __thread __attribute__((tls_model("initial-exec")))

/* ---- The log ---------------------------------------------------------- */

enum {
	MAP_FIRST = 64 << 10, /* the log's first mapping */
	MAP_STEP = 64 << 20,  /* the most the mapping grows by at once */
	LINE_MAX_LEN = 4352,  /* longer than any record: a module's path is cut at PATH_CUT */
	FD_MIN = 256,         /* the log's descriptor is moved at or above this */
};

enum { STATE_UNSET, STATE_ON, STATE_OFF };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Written under lock (or before threads, at start-up and in a fork's
 * child); state is read without it, to skip the lock when not recording. */
static volatile int state = STATE_UNSET;
static int log_fd = -1;
static char *map = MAP_FAILED; /* the log, mapped shared: MAP_FAILED when none */
static size_t mapped;  /* its size, the file's */
static size_t used;    /* the bytes of complete records */
static char scratch[LINE_MAX_LEN]; /* where a record goes once the log is off */
static char dir[4096];
static char base[sizeof dir + 64]; /* <dir>/<pid>-<k>: the log's path, less ".log" */
static char exe[4096];             /* the executable's path, for its module record */

/* A page the kernel zeroes in a forked child (MADV_WIPEONFORK), 1 in the
 * process that opened the log: 0 tells a child forked without the fork
 * handlers (by the raw system call), which must not write its parent's
 * shared log. NULL where the kernel has no MADV_WIPEONFORK (before 4.14). */
static volatile char *owner;

static TLS int inside; /* this thread is in a wrapper */
static int stacks_on;  /* CARVE_RECORD_STACKS is not "0": see Call stacks */
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

/* side writes text to the file <base><ext> beside the log. */
static void side(const char *ext, const char *text, size_t n)
{
	char path[sizeof base + 16];
	strcpy(put_str(path, base), ext);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0) {
		write_all(fd, text, n);
		close(fd);
	}
}

/* stop ends the recording of this process when its log cannot grow
 * (err: the error number): the records so far stay, and the file
 * <base>.stopped says at which byte and why. Lock held. */
static void stop(int err)
{
	char msg[64], *s = put_dec(msg, used);
	*s++ = ' ';
	s = put_dec(s, (uint64_t)err);
	*s++ = '\n';
	side(".stopped", msg, (size_t)(s - msg));
	state = STATE_OFF;
}

/* prefault maps the pages of the log's n bytes at p writable at once,
 * where the kernel can (Linux 5.14 and later): a fault per page as the
 * records reach it costs about twice the recording's own time. */
static void prefault(void *p, size_t n)
{
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
	madvise(p, n, MADV_POPULATE_WRITE);
}

/* grow makes room for a record past used: the file is extended (with its
 * blocks allocated, so that a full disk is an error here rather than a
 * SIGBUS at a store into the mapping) and the mapping with it. Lock held. */
static int grow(void)
{
	size_t size = mapped + (mapped < MAP_STEP ? mapped : MAP_STEP);
	int err = posix_fallocate(log_fd, (off_t)mapped, (off_t)(size - mapped));
	if (err != 0) {
		stop(err);
		return -1;
	}
	void *m = mremap(map, mapped, size, MREMAP_MAYMOVE);
	if (m == MAP_FAILED) {
		stop(errno);
		return -1;
	}
	prefault((char *)m + mapped, size - mapped);
	map = m;
	mapped = size;
	return 0;
}

static void open_log(void);
static void stacks_reset(void);

/* reopen leaves the log of the process this one was forked from and
 * opens its own: from the fork handler, or at the first record of a
 * child forked without it. */
static void reopen(void)
{
	tid = 0;
	if (map != MAP_FAILED)
		munmap(map, mapped);
	map = MAP_FAILED;
	mapped = 0;
	close(log_fd);
	log_fd = -1;
	open_log();
}

/* reopen_if_forked reopens the log in a child forked by the raw system
 * call, whose fork handler did not run. Lock held. */
static void reopen_if_forked(void)
{
	if (owner != NULL && *owner == 0)
		reopen();
}

/* begin starts a record with nothing in it: where its bytes go. Lock
 * held. The caller appends them and passes the end to done. */
static char *begin(void)
{
	reopen_if_forked();
	if (state == STATE_ON && (used + LINE_MAX_LEN <= mapped || grow() == 0))
		return map + used;
	return scratch;
}

/* line starts a record: "<tid>: <op> ". Lock held. The caller appends
 * the fields and passes the end to done. */
static char *line(const char *op)
{
	char *s = begin();
	if (tid == 0)
		tid = (pid_t)syscall(SYS_gettid);
	s = put_dec(s, (uint64_t)tid);
	s = put_str(s, ": ");
	s = put_str(s, op);
	return put_str(s, " ");
}

/* done completes the record that ends at end. Its newline is stored
 * last: a record in the file is complete when it ends with one, and the
 * bytes past the last newline (a record the program's end cut short, or
 * the zeros of space not used yet) are no record. Lock held. */
static void done(char *end)
{
	if (state != STATE_ON)
		return; /* the scratch record of a log that went off */
	__atomic_store_n(end, '\n', __ATOMIC_RELEASE);
	used = (size_t)(end + 1 - map);
}

/* open_log opens this process's log, <dir>/<pid>-<k>.log, maps it, and
 * writes the executable's path beside it. It allocates nothing: it may
 * run inside the first malloc. */
static void open_log(void)
{
	char path[sizeof base + 16], *end;
	int fd = -1;
	end = put_str(base, dir);
	end = put_str(end, "/");
	end = put_dec(end, (uint64_t)getpid());
	end = put_str(end, "-");
	for (unsigned k = 0; k < 1000 && fd < 0; k++) {
		*put_dec(end, k) = '\0';
		strcpy(put_str(path, base), ".log");
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 && errno != EEXIST)
			break;
	}
	state = STATE_OFF;
	if (fd < 0)
		return;
	/* Out of the way of programs that reuse low descriptors. */
	int high = fcntl(fd, F_DUPFD_CLOEXEC, FD_MIN);
	if (high >= 0) {
		close(fd);
		fd = high;
	}
	log_fd = fd;
	used = 0;
	mapped = 0;
	map = MAP_FAILED;
	int err = posix_fallocate(fd, 0, MAP_FIRST);
	if (err == 0) {
		map = mmap(NULL, MAP_FIRST, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		err = map == MAP_FAILED ? errno : 0;
	}
	if (err != 0) {
		stop(err);
		return;
	}
	prefault(map, MAP_FIRST);
	mapped = MAP_FIRST;
	state = STATE_ON;
	if (owner == NULL) {
		void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
#ifndef MADV_WIPEONFORK
#define MADV_WIPEONFORK 18
#endif
		if (page != MAP_FAILED && madvise(page, 4096, MADV_WIPEONFORK) == 0)
			owner = page;
		else if (page != MAP_FAILED)
			munmap(page, 4096);
	}
	if (owner != NULL)
		*owner = 1;

	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	exe[n > 0 ? n : 0] = '\0';
	side(".exe", exe, n > 0 ? (size_t)n : 0);
	stacks_reset();
}

/* start reads CARVE_RECORD_DIR and opens the log. It runs once, from
 * the constructor or from the first allocation if that comes before it
 * (from another library's constructor, maybe on another thread). */
static void find_self(void);

static void start(void)
{
	const char *d = getenv("CARVE_RECORD_DIR");
	if (d == NULL || d[0] == '\0' || strlen(d) >= sizeof dir) {
		state = STATE_OFF;
		return;
	}
	strcpy(dir, d);
	const char *st = getenv("CARVE_RECORD_STACKS");
	stacks_on = st == NULL || strcmp(st, "0") != 0;
	if (stacks_on)
		find_self();
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

/* ---- Call stacks ------------------------------------------------------- *
 *
 * Each allocation's call stack is taken by glibc's backtrace(), which
 * unwinds by the binaries' .eh_frame tables (Debian builds its programs
 * without frame pointers), before the lock: up to STACK_DEPTH return
 * addresses, those inside this library left out, innermost first. Its
 * first call loads the unwinder (libgcc_s), which allocates: the
 * constructor makes it with `inside` set, and so does every wrapper (an
 * allocation the unwinder makes is not the program's). Stacks are kept
 * in a hash table of their own memory (mmap: this library must not
 * allocate from the allocator it records), numbered 1, 2, 3... as first
 * seen; a new stack is written once as a "stack" record, and every
 * allocation then ends with its number. The modules (dl_iterate_phdr:
 * each binary's path, load bias and the span of its segments) are
 * written when the log opens and again, all of them, whenever a stack is
 * new and the loader's count of objects added (dlpi_adds) has changed
 * since: a library a program dlopened is written before the first stack
 * that runs in it. A forked child's log starts with no stack and the
 * modules again. A table that cannot grow (mmap refused) stops the
 * stacks, not the recording: allocations are then written without one. */

enum {
	STACK_DEPTH = 8,      /* return addresses kept of each stack */
	STACK_TAKE = STACK_DEPTH + 3, /* taken: this library's frames (the wrapper, take) come first */
	STACK_FIRST = 1 << 12, /* the table's first capacity (entries, a power of two) */
	PATH_CUT = 4096,      /* a module's path is cut at this many bytes */
};

struct stack {
	uint64_t hash; /* 0: an empty slot */
	uint32_t id;
	uint32_t n;
	uintptr_t pc[STACK_DEPTH];
};

static uintptr_t self_lo, self_hi;      /* this library's segments */
static struct stack *table;             /* lock held; NULL: none yet */
static size_t table_cap, table_len;     /* slots, and stacks in them */
static uint32_t next_stack;             /* the last stack's number */
static unsigned long long modules_adds; /* dlpi_adds when the modules were last written */

/* segments returns in *lo and *hi the span of info's loaded segments. */
static void segments(struct dl_phdr_info *info, uintptr_t *lo, uintptr_t *hi)
{
	*lo = UINTPTR_MAX;
	*hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (a < *lo)
			*lo = a;
		if (a + ph->p_memsz > *hi)
			*hi = a + ph->p_memsz;
	}
}

static int find_self_in(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	uintptr_t lo, hi, me = (uintptr_t)data;
	segments(info, &lo, &hi);
	if (lo <= me && me < hi) {
		self_lo = lo;
		self_hi = hi;
		return 1;
	}
	return 0;
}

/* find_self finds this library's segments, whose frames stacks leave out. */
static void find_self(void)
{
	dl_iterate_phdr(find_self_in, (void *)(uintptr_t)find_self);
}

static int adds_of(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	*(unsigned long long *)data = info->dlpi_adds;
	return 1; /* the count is every object's: the first tells */
}

/* write_module writes the record of one module. Lock held. */
static int write_module(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	const char *path = info->dlpi_name;
	if (path == NULL || path[0] == '\0')
		path = exe; /* the executable */
	if (path[0] != '/')
		return 0; /* the vDSO: no file */
	uintptr_t lo, hi;
	segments(info, &lo, &hi);
	if (lo >= hi)
		return 0;
	char *s = put_str(begin(), "module ");
	s = put_hex(s, info->dlpi_addr);
	*s++ = ' ';
	s = put_hex(s, lo);
	*s++ = ' ';
	s = put_hex(s, hi);
	*s++ = ' ';
	for (size_t i = 0; path[i] != '\0' && path[i] != '\n' && i < PATH_CUT; i++)
		*s++ = path[i];
	done(s);
	return 0;
}

/* write_modules writes every module's record, if objects were loaded
 * since they were last written (always, with force). Lock held. */
static void write_modules(int force)
{
	unsigned long long adds = 0;
	dl_iterate_phdr(adds_of, &adds);
	if (!force && adds == modules_adds)
		return;
	modules_adds = adds;
	dl_iterate_phdr(write_module, NULL);
}

/* stacks_reset forgets the stacks (a new log defines its own) and writes
 * the modules into the log just opened. */
static void stacks_reset(void)
{
	if (!stacks_on)
		return;
	if (table != NULL)
		munmap(table, table_cap * sizeof *table);
	table = NULL;
	table_cap = table_len = 0;
	next_stack = 0;
	write_modules(1);
}

/* A stack taken, before it is numbered. */
struct frames {
	int n;
	uintptr_t pc[STACK_DEPTH];
};

/* take takes the calling thread's stack, this library's frames left out.
 * inside is set: what the unwinder allocates is not logged. */
static void take(struct frames *f)
{
	void *pcs[STACK_TAKE];
	int n = backtrace(pcs, STACK_TAKE), i = 0;
	while (i < n && (uintptr_t)pcs[i] >= self_lo && (uintptr_t)pcs[i] < self_hi)
		i++;
	f->n = 0;
	for (; i < n && f->n < STACK_DEPTH; i++)
		f->pc[f->n++] = (uintptr_t)pcs[i];
}

static uint64_t hash_frames(const struct frames *f)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)f->n;
	for (int i = 0; i < f->n; i++) {
		h ^= f->pc[i];
		h *= 0xff51afd7ed558ccdull;
		h ^= h >> 33;
	}
	return h | 1; /* never 0, an empty slot's */
}

/* grow_table doubles the table (allocates the first). Lock held. */
static int grow_table(void)
{
	size_t cap = table_cap ? table_cap * 2 : STACK_FIRST;
	struct stack *t = mmap(NULL, cap * sizeof *t, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (t == MAP_FAILED)
		return -1;
	for (size_t i = 0; i < table_cap; i++) {
		if (table[i].hash == 0)
			continue;
		size_t j = table[i].hash & (cap - 1);
		while (t[j].hash != 0)
			j = (j + 1) & (cap - 1);
		t[j] = table[i];
	}
	if (table != NULL)
		munmap(table, table_cap * sizeof *table);
	table = t;
	table_cap = cap;
	return 0;
}

/* stack_id returns the number of stack f, writing it (and the modules,
 * if a library was loaded since they were written) at its first use; 0
 * for none. Lock held, before the record that uses it begins. */
static uint32_t stack_id(const struct frames *f)
{
	reopen_if_forked(); /* before the lookup: reopening forgets the stacks */
	if (f->n == 0 || state != STATE_ON)
		return 0;
	if (table_len * 2 >= table_cap && grow_table() != 0) {
		stacks_on = 0;
		return 0;
	}
	uint64_t h = hash_frames(f);
	size_t j = h & (table_cap - 1);
	for (; table[j].hash != 0; j = (j + 1) & (table_cap - 1)) {
		struct stack *e = &table[j];
		if (e->hash == h && e->n == (uint32_t)f->n && memcmp(e->pc, f->pc, (size_t)f->n * sizeof f->pc[0]) == 0)
			return e->id;
	}
	write_modules(0);
	struct stack *e = &table[j];
	e->hash = h;
	e->id = ++next_stack;
	e->n = (uint32_t)f->n;
	memcpy(e->pc, f->pc, (size_t)f->n * sizeof f->pc[0]);
	table_len++;
	char *s = put_dec(put_str(begin(), "stack "), e->id);
	for (int i = 0; i < f->n; i++) {
		*s++ = ' ';
		s = put_hex(s, f->pc[i]);
	}
	done(s);
	return e->id;
}

/* at ends an allocation's record at s with " @<stack>", when it has one. */
static char *at(char *s, uint32_t id)
{
	if (id == 0)
		return s;
	*s++ = ' ';
	*s++ = '@';
	return put_dec(s, id);
}

/* enter takes the stack (when stacks are on and f is not NULL), then the
 * lock, and returns the stack's number (0: none). */
static inline uint32_t enter_at(struct frames *f)
{
	inside = 1;
	if (f != NULL && stacks_on)
		take(f);
	else if (f != NULL)
		f->n = 0;
	pthread_mutex_lock(&lock);
	return f != NULL ? stack_id(f) : 0;
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
	struct frames f;
	uint32_t id = enter_at(&f);
	void *p = real.malloc(size);
	if (p != NULL) {
		char *s = put_hex(line("malloc"), (uintptr_t)p);
		*s++ = ' ';
		done(at(put_dec(s, size), id));
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
	struct frames f;
	uint32_t id = enter_at(&f);
	void *p = real.calloc(n, size);
	if (p != NULL) {
		char *s = put_hex(line("calloc"), (uintptr_t)p);
		*s++ = ' ';
		s = put_dec(s, n);
		*s++ = ' ';
		done(at(put_dec(s, size), id));
	}
	leave();
	return p;
}

/* log_realloc logs realloc(old, size) = p; NULL results are left out
 * unless the call freed old (size 0). Lock held. */
static void log_realloc(void *p, void *old, size_t size, uint32_t id)
{
	if (p == NULL && (old == NULL || size != 0))
		return;
	char *s = put_hex(line("realloc"), (uintptr_t)p);
	*s++ = ' ';
	s = put_hex(s, (uintptr_t)old);
	*s++ = ' ';
	s = put_dec(s, size);
	done(p != NULL ? at(s, id) : s); /* realloc(p, 0) freed p: no site */
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
	struct frames f;
	uint32_t id = enter_at(&f);
	void *p = real.realloc(old, size);
	log_realloc(p, old, size, id);
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
	struct frames f;
	uint32_t id = enter_at(&f);
	void *p = real.reallocarray(old, n, size);
	log_realloc(p, old, total, id);
	leave();
	return p;
}

/* log_memalign logs an aligned allocation. Lock held. */
static void log_memalign(void *p, size_t align, size_t size, uint32_t id)
{
	char *s = put_hex(line("memalign"), (uintptr_t)p);
	*s++ = ' ';
	s = put_dec(s, align);
	*s++ = ' ';
	done(at(put_dec(s, size), id));
}

EXPORT void *memalign(size_t align, size_t size)
{
	if (!ready())
		return NULL;
	if (!recording())
		return real.memalign(align, size);
	struct frames f;
	uint32_t id = enter_at(&f);
	void *p = real.memalign(align, size);
	if (p != NULL)
		log_memalign(p, align, size, id);
	leave();
	return p;
}

EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
	if (!ready())
		return ENOMEM;
	if (!recording())
		return real.posix_memalign(out, align, size);
	struct frames f;
	uint32_t id = enter_at(&f);
	int err = real.posix_memalign(out, align, size);
	if (err == 0)
		log_memalign(*out, align, size, id);
	leave();
	return err;
}

EXPORT void *aligned_alloc(size_t align, size_t size)
{
	if (!ready())
		return NULL;
	if (!recording())
		return real.aligned_alloc(align, size);
	struct frames f;
	uint32_t id = enter_at(&f);
	void *p = real.aligned_alloc(align, size);
	if (p != NULL)
		log_memalign(p, align, size, id);
	leave();
	return p;
}

EXPORT void *valloc(size_t size)
{
	if (!ready())
		return NULL;
	if (!recording())
		return real.valloc(size);
	struct frames f;
	uint32_t id = enter_at(&f);
	void *p = real.valloc(size);
	if (p != NULL)
		log_memalign(p, (size_t)sysconf(_SC_PAGESIZE), size, id);
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
	struct frames f;
	uint32_t id = enter_at(&f);
	void *p = real.pvalloc(size);
	if (p != NULL) {
		size_t page = (size_t)sysconf(_SC_PAGESIZE);
		size_t rounded = size == 0 ? page : (size + page - 1) & ~(page - 1);
		log_memalign(p, page, rounded, id);
	}
	leave();
	return p;
}

/* ---- The process's life ------------------------------------------------ */

/* Fork: the forking thread holds the lock across fork, so the child gets
 * it in a known state. The child leaves the parent's log (its mapping is
 * shared: the child's records must not go there) and opens one of its
 * own. Exit needs nothing: every record is in the file's pages once it
 * is complete, whatever ends the process (exit, _exit, exit_group, a
 * signal, SIGKILL) or replaces it (exec). */
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
	reopen();
}

__attribute__((constructor)) static void init(void)
{
	inside = 1; /* the registration below allocates: not the program's */
	ready();
	inside = 0;
	pthread_once(&started, start);
	if (state != STATE_ON)
		return;
	if (stacks_on) {
		/* The unwinder's first use loads it, which allocates. */
		struct frames f;
		inside = 1;
		take(&f);
		inside = 0;
	}
	inside = 1;
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	inside = 0;
}
