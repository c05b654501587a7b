/* mem_info.h - how much memory the machine has, so a context whose KV cache
 * cannot fit it is refused with the sizes that would, instead of failing in
 * the allocator. */
#ifndef KR_MEM_INFO_H
#define KR_MEM_INFO_H

#include <stdint.h>

/* Physical memory in bytes (sysconf), or 0 where it cannot be read. */
uint64_t kr_mem_physical_bytes(void);

#endif
