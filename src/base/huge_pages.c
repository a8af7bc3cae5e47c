#define _GNU_SOURCE
#include "base/huge_pages.h"

#include <stdlib.h>
#include <sys/mman.h>

void *gm_alloc_huge(size_t bytes) {
    void *p = NULL;
    /* under 2 MiB a huge page would hold more than was asked for, all of it resident from the first touch */
    if (bytes < GM_HUGE_PAGE_BYTES) return posix_memalign(&p, 64, bytes ? bytes : 64) == 0 ? p : NULL;
    if (posix_memalign(&p, GM_HUGE_PAGE_BYTES, bytes) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    const char *e = getenv("GM_HUGEPAGES");
    if (!(e && *e == '0')) madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
}
