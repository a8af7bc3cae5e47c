/* Memory in transparent huge pages: the hardware prefetcher runs across a 2 MiB page but stops at every
 * 4 KiB one, and a stream through 4 KiB pages also walks the page tables once per page (nested ones in a
 * VM). Used for what decode streams every token: the weights (model/weights.c) and the KV cache. */
#ifndef GM_BASE_HUGE_PAGES_H
#define GM_BASE_HUGE_PAGES_H

#include <stddef.h>

#define GM_HUGE_PAGE_BYTES ((size_t)2 << 20)

/* `bytes` (0 allowed) aligned to 2 MiB and advised into huge pages unless GM_HUGEPAGES=0, or under 2 MiB
 * aligned to a cache line in ordinary pages; release with free(). NULL when out of memory. */
void *gm_alloc_huge(size_t bytes);

#endif
