# Writes a large C file to standard output, the C compiler workload for
# carve record (gcc -O2 -c on it; cc1 is the busy process). The same file
# every time: nothing here is random.
N = 600

print("#include <stddef.h>\n#include <string.h>\n")
for i in range(0, N, 50):
    print("struct s%d { int a, b; double c[%d]; struct s%d *next; char name[%d]; };"
          % (i, i % 7 + 2, i, i % 13 + 8))
for i in range(N):
    s = i // 50 * 50
    print("""
static int helper%(i)d(int x, int y) { return (x * %(m)d + y) ^ (x >> %(k)d); }
int f%(i)d(struct s%(s)d *p, int n, const int *v) {
    int acc = %(i)d;
    for (int j = 0; j < n; j++) {
        switch ((v[j] + j) %% 8) {
        case 0: acc += helper%(i)d(v[j], j); break;
        case 1: acc -= v[j] * %(m)d; break;
        case 2: acc ^= (int)p->c[j %% %(c)d]; break;
        case 3: if (p->next) acc += p->next->a; break;
        case 4: acc += (int)strlen(p->name) + j; break;
        case 5: for (int k = 0; k < j %% 5; k++) acc += k * v[k]; break;
        case 6: p->c[j %% %(c)d] += acc * 0.5; break;
        default: acc = helper%(i)d(acc, v[j]);
        }
    }
    p->a = acc; p->b = n;
    return acc + (n > 10 ? f%(prev)d((struct s%(ps)d *)(void *)p, n - 10, v + 1) : 0);
}""" % {"i": i, "m": i % 17 + 3, "k": i % 5 + 1, "s": s, "c": s % 7 + 2, "prev": max(i - 1, 0), "ps": max(i - 1, 0) // 50 * 50})
