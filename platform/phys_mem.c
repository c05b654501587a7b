/* phys_mem.c - see phys_mem.h. */
#include "phys_mem.h"

#include <unistd.h>

uint64_t kr_phys_mem_bytes(void) {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) return (uint64_t)pages * (uint64_t)page;
#endif
    return 0;
}
