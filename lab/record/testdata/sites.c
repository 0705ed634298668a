/* sites.c allocates from named functions, each at one line, so that a
 * recording with call stacks can be checked site by site: at the peak,
 * make_big holds 40 blocks of 64 KiB, make_mid 400 of 1000 bytes,
 * make_small 1000 of 48; make_temp's blocks are all freed at once. Built
 * with -O2 -g: the functions are not inlined, nor their calls tail
 * calls. */
#include <stdlib.h>

static void *keep[2000];
static volatile int sink;

__attribute__((noinline)) void *make_big(void) { void *p = malloc(65536); sink++; return p; }
__attribute__((noinline)) void *make_mid(void) { void *p = malloc(1000); sink++; return p; }
__attribute__((noinline)) void *make_small(void) { void *p = calloc(1, 48); sink++; return p; }
__attribute__((noinline)) void *make_temp(void) { void *p = malloc(100); sink++; return p; }

int main(void)
{
	int k = 0;
	for (int i = 0; i < 1000; i++) {
		if (i < 40)
			keep[k++] = make_big();
		if (i < 400)
			keep[k++] = make_mid();
		keep[k++] = make_small();
		free(make_temp());
	}
	for (int i = 0; i < k; i++)
		free(keep[i]);
	return 0;
}
