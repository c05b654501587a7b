/* backend_cpu.h - the parts of the CPU backend (backend.h) that live in
 * their own files. */
#ifndef KR_BACKEND_CPU_H
#define KR_BACKEND_CPU_H

#include <stdint.h>

#include "kara.h"

/* ATTN = attention of Q over each entry's sequence in layer il, on the
 * context's threads (backend_cpu_attn.c). */
void kr_cpu_attention(kara_context *c, int32_t il, int32_t n);

#endif /* KR_BACKEND_CPU_H */
