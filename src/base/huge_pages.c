#define _GNU_SOURCE
#include "base/huge_pages.h"

#include <stdlib.h>
#include <sys/mman.h>

void *gm_alloc_huge(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, GM_HUGE_PAGE_BYTES, bytes ? bytes : 64) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    const char *e = getenv("GM_HUGEPAGES");
    if (!(e && *e == '0')) madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}
