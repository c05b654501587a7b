/* phys_mem.h - how much memory the machine has, so that a context that can
 * never fit is refused up front with both numbers instead of failing (or
 * swapping) later. */
#ifndef KR_PHYS_MEM_H
#define KR_PHYS_MEM_H

#include <stdint.h>

/* Bytes of physical memory, or 0 when the system does not say. */
uint64_t kr_phys_mem_bytes(void);

#endif
