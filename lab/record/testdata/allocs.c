/*
 * allocs makes a known set of allocator calls, each of a size that
 * nothing else in a process asks for, so that a test can count them in
 * a recording among the C library's own:
 *
 *	malloc(SIZE)                          once in main, PER_THREAD times in each of THREADS threads
 *	calloc(5, SIZE)                       once
 *	realloc(p, 2*SIZE)                    once, p from the first malloc
 *	posix_memalign(&q, 64, 3*SIZE)        once
 *	aligned_alloc(256, 4*SIZE)            once
 *	free                                  of each of these blocks
 *
 * It exits with the status given as its argument (0 without one).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { SIZE = 12345, THREADS = 4, PER_THREAD = 100 };

static void *worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < PER_THREAD; i++) {
		char *p = malloc(SIZE);
		if (p == NULL)
			abort();
		memset(p, i, SIZE);
		free(p);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	char *a = malloc(SIZE);
	char *b = calloc(5, SIZE);
	if (a == NULL || b == NULL)
		abort();
	memset(a, 1, SIZE);
	a = realloc(a, 2 * SIZE);
	void *c;
	if (posix_memalign(&c, 64, 3 * SIZE) != 0)
		abort();
	void *d = aligned_alloc(256, 4 * SIZE);

	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, worker, NULL);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);

	free(a);
	free(b);
	free(c);
	free(d);
	return argc > 1 ? atoi(argv[1]) : 0;
}
