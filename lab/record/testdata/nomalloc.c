/* nomalloc makes no allocator call: it only writes, with the system call. */
#include <unistd.h>

int main(void)
{
	write(1, "no malloc\n", 10);
	return 0;
}
