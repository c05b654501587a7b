/* kv_exact.h - the plain-words notice that a context's KV budget cannot hold
 * its whole context exactly, so that compression never starts unannounced
 * (run and chat at start-up, chat's /stats, --print-config). */
#ifndef KR_KV_EXACT_H
#define KR_KV_EXACT_H

#include <stdbool.h>
#include <stddef.h>

#include "kara.h"

/* When ctx's sequence share holds fewer slots than its context and its KV
 * method compresses, write "the 1 GiB KV budget holds 8,624 of the 40,960
 * context tokens exactly; past that, Kara compresses (`--kv-budget auto`
 * keeps them all)" into buf and return true; else buf is "" and false. kv:
 * the KV settings ctx was created with. */
bool kr_kv_exact_text(const kara_context *ctx, const kara_kv_params *kv, char *buf, size_t size);

/* n with thousands separators ("40,960"). */
void kr_format_count(long long n, char *buf, size_t size);
/* Bytes in the largest binary unit that keeps them short ("1 GiB", "24.9 MiB"). */
void kr_format_bytes(double bytes, char *buf, size_t size);

#endif
