//go:build cgo && linux

// probe.c: which malloc serves this process, and that malloc's own
// statistics.
//
// Nothing here links against jemalloc, tcmalloc or mimalloc: every entry
// point is looked up with dlsym(RTLD_DEFAULT, ...) at run time, so one
// binary serves whichever library LD_PRELOAD put in front of glibc. A
// symbol counts only when it lives in the shared object that defines the
// malloc the process calls (dladdr), so a library that is loaded but does
// not serve malloc is not taken for the active one.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "carve_libc.h"

// The entry points, with the signatures their libraries document.
typedef int (*mallctl_fn)(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen);
typedef int (*tc_property_fn)(const char *property, size_t *value);
typedef const char *(*tc_version_fn)(int *major, int *minor, const char **patch);
typedef int (*mi_version_fn)(void);
typedef const char *(*gnu_get_libc_version_fn)(void);

// mi_area is the head of mimalloc's mi_heap_area_t, whose first five
// fields have not changed since mimalloc 1.0. It is only read through the
// pointer mimalloc passes, so later fields do not matter.
struct mi_area {
	void *blocks;
	size_t reserved;
	size_t committed;
	size_t used; // blocks in use
	size_t block_size;
};
typedef bool (*mi_visit_fn)(const void *heap, const struct mi_area *area, void *block, size_t block_size, void *arg);
typedef bool (*mi_heap_visit_blocks_fn)(const void *heap, bool visit_all_blocks, mi_visit_fn visitor, void *arg);
typedef void *(*mi_heap_get_default_fn)(void);

// glibc's struct mallinfo2 (glibc 2.33 and later), spelled out so that
// older headers build; the function is looked up like the others.
struct glibc_mallinfo2 {
	size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};
typedef struct glibc_mallinfo2 (*mallinfo2_fn)(void);

// probed is written once by carve_libc_probe and only read afterwards
// (package libc orders the two with a sync.Once).
static struct {
	int kind;
	mallctl_fn mallctl;
	tc_property_fn tc_property;
	mi_heap_visit_blocks_fn mi_heap_visit_blocks;
	mi_heap_get_default_fn mi_heap_get_default;
	mallinfo2_fn mallinfo2;
} probed;

// lookup returns the address of sym if the object loaded at base defines
// the definition the process would call, or NULL.
static void *lookup(const char *sym, const void *base) {
	void *s = dlsym(RTLD_DEFAULT, sym);
	Dl_info di;
	if (s == NULL || dladdr(s, &di) == 0 || di.dli_fbase != base) {
		return NULL;
	}
	return s;
}

// The probes of each malloc: each returns whether the malloc defined in
// the object loaded at base is its, and if so fills id and keeps the
// entry points of its statistics.

static bool probe_glibc(struct carve_libc_identity *id, const void *base) {
	gnu_get_libc_version_fn glibc_version = (gnu_get_libc_version_fn)lookup("gnu_get_libc_version", base);
	if (glibc_version == NULL) {
		return false;
	}
	id->kind = CARVE_LIBC_GLIBC;
	snprintf(id->version, sizeof id->version, "%s", glibc_version());
	probed.mallinfo2 = (mallinfo2_fn)lookup("mallinfo2", base);
	return true;
}

static bool probe_jemalloc(struct carve_libc_identity *id, const void *base) {
	if ((probed.mallctl = (mallctl_fn)lookup("mallctl", base)) == NULL) {
		return false;
	}
	id->kind = CARVE_LIBC_JEMALLOC;
	const char *v = NULL;
	size_t len = sizeof v;
	if (probed.mallctl("version", &v, &len, NULL, 0) == 0 && v != NULL) {
		snprintf(id->version, sizeof id->version, "%s", v);
	}
	return true;
}

static bool probe_tcmalloc(struct carve_libc_identity *id, const void *base) {
	if ((probed.tc_property = (tc_property_fn)lookup("MallocExtension_GetNumericProperty", base)) == NULL) {
		return false;
	}
	id->kind = CARVE_LIBC_TCMALLOC;
	tc_version_fn tc_version = (tc_version_fn)lookup("tc_version", base);
	if (tc_version != NULL) {
		int major = 0, minor = 0;
		const char *patch = NULL;
		tc_version(&major, &minor, &patch);
		snprintf(id->version, sizeof id->version, "%d.%d%s", major, minor, patch ? patch : "");
	}
	return true;
}

static bool probe_mimalloc(struct carve_libc_identity *id, const void *base) {
	mi_version_fn mi_version = (mi_version_fn)lookup("mi_version", base);
	if (mi_version == NULL) {
		return false;
	}
	id->kind = CARVE_LIBC_MIMALLOC;
	int v = mi_version(); // MI_MALLOC_VERSION: 209 is 2.0.9
	snprintf(id->version, sizeof id->version, "%d.%d.%d", v / 100, v / 10 % 10, v % 10);
	probed.mi_heap_visit_blocks = (mi_heap_visit_blocks_fn)lookup("mi_heap_visit_blocks", base);
	probed.mi_heap_get_default = (mi_heap_get_default_fn)lookup("mi_heap_get_default", base);
	return true;
}

void carve_libc_probe(struct carve_libc_identity *id) {
	memset(id, 0, sizeof *id);
	Dl_info mi;
	void *m = dlsym(RTLD_DEFAULT, "malloc");
	if (m == NULL || dladdr(m, &mi) == 0) {
		return;
	}
	const char *file = mi.dli_fname != NULL ? mi.dli_fname : "";
	snprintf(id->library, sizeof id->library, "%s", file);

	// A dlsym that finds nothing leaves its error message in malloc'd
	// memory: a few hundred bytes allocated before a replay, which move
	// glibc's and tcmalloc's peak RSS on a large trace by a megabyte. So
	// the probes are tried in an order that finds the malloc without a
	// miss: glibc's first (its entry points are always there, in libc:
	// no miss whoever serves malloc), then the one the library's file
	// name suggests. The name only orders the probes; the symbols decide.
	typedef bool (*probe_fn)(struct carve_libc_identity *, const void *);
	probe_fn order[] = {probe_glibc, probe_jemalloc, probe_tcmalloc, probe_mimalloc};
	int hint = strstr(file, "jemalloc") != NULL ? 1 : strstr(file, "tcmalloc") != NULL ? 2 : strstr(file, "mimalloc") != NULL ? 3 : 1;
	probe_fn hinted = order[hint];
	order[hint] = order[1];
	order[1] = hinted;
	for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
		if (order[i](id, mi.dli_fbase)) {
			break;
		}
	}
	probed.kind = id->kind;
}

void *carve_libc_malloc(size_t size) { return malloc(size); }

static int fail(struct carve_libc_stats *out, const char *what) {
	out->failed = what;
	return -1;
}

static int glibc_stats(struct carve_libc_stats *out) {
	if (probed.mallinfo2 == NULL) {
		return fail(out, "mallinfo2 (glibc 2.33 or later) not found");
	}
	struct glibc_mallinfo2 mi = probed.mallinfo2();
	out->footprint = (int64_t)(mi.arena + mi.hblkhd);
	out->allocated = (int64_t)(mi.uordblks + mi.hblkhd);
	return 0;
}

static int jemalloc_stats(struct carve_libc_stats *out) {
	// Statistics are a snapshot taken when the epoch advances.
	uint64_t epoch = 1;
	size_t len = sizeof epoch;
	if (probed.mallctl("epoch", &epoch, &len, &epoch, len) != 0) {
		return fail(out, "mallctl(\"epoch\") failed");
	}
	size_t mapped = 0, allocated = 0;
	len = sizeof mapped;
	if (probed.mallctl("stats.mapped", &mapped, &len, NULL, 0) != 0) {
		return fail(out, "mallctl(\"stats.mapped\") failed (jemalloc built without --enable-stats?)");
	}
	len = sizeof allocated;
	if (probed.mallctl("stats.allocated", &allocated, &len, NULL, 0) != 0) {
		return fail(out, "mallctl(\"stats.allocated\") failed");
	}
	out->footprint = (int64_t)mapped;
	out->allocated = (int64_t)allocated;
	return 0;
}

static int tcmalloc_stats(struct carve_libc_stats *out) {
	size_t heap = 0, unmapped = 0, allocated = 0;
	if (!probed.tc_property("generic.heap_size", &heap)) {
		return fail(out, "MallocExtension_GetNumericProperty(\"generic.heap_size\") failed");
	}
	if (!probed.tc_property("tcmalloc.pageheap_unmapped_bytes", &unmapped)) {
		return fail(out, "MallocExtension_GetNumericProperty(\"tcmalloc.pageheap_unmapped_bytes\") failed");
	}
	if (!probed.tc_property("generic.current_allocated_bytes", &allocated)) {
		return fail(out, "MallocExtension_GetNumericProperty(\"generic.current_allocated_bytes\") failed");
	}
	out->footprint = (int64_t)(heap - unmapped);
	out->allocated = (int64_t)allocated;
	return 0;
}

// mi_sums is what mi_add_area sums over a heap's areas (its pages).
struct mi_sums {
	size_t used;      // bytes of the blocks in use
	size_t committed; // bytes of the blocks the pages have set up, in use or free
};

// mi_add_area adds an area's figures to the struct mi_sums at arg.
static bool mi_add_area(const void *heap, const struct mi_area *area, void *block, size_t block_size, void *arg) {
	(void)heap, (void)block, (void)block_size;
	struct mi_sums *s = arg;
	s->used += area->used * area->block_size;
	s->committed += area->committed;
	return true;
}

static int mimalloc_stats(struct carve_libc_stats *out) {
	if (probed.mi_heap_visit_blocks == NULL || probed.mi_heap_get_default == NULL) {
		return fail(out, "mi_heap_visit_blocks or mi_heap_get_default not found");
	}
	// mi_heap_visit_blocks returns false for a heap without pages too (and
	// mi_add_area never stops it): then no block is in use.
	struct mi_sums s = {0, 0};
	probed.mi_heap_visit_blocks(probed.mi_heap_get_default(), false, mi_add_area, &s);
	// Not mi_process_info's current_commit: mimalloc commits its first
	// segment whole (32 MiB) before the first block, and the commit does
	// not move while a heap of tens of MiB comes and goes in it (see
	// libc.go).
	out->footprint = (int64_t)s.committed;
	out->allocated = (int64_t)s.used;
	return 0;
}

int carve_libc_heap_stats(struct carve_libc_stats *out) {
	out->footprint = 0;
	out->allocated = 0;
	out->failed = NULL;
	switch (probed.kind) {
	case CARVE_LIBC_GLIBC:
		return glibc_stats(out);
	case CARVE_LIBC_JEMALLOC:
		return jemalloc_stats(out);
	case CARVE_LIBC_TCMALLOC:
		return tcmalloc_stats(out);
	case CARVE_LIBC_MIMALLOC:
		return mimalloc_stats(out);
	}
	return fail(out, "no statistics interface known for this malloc");
}
