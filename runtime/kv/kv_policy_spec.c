/* kv_policy_spec.c - speculative verify batches under KV compression
 * (docs/SPECULATIVE.md, "Under KV compression").
 *
 * A verify step appends a chosen token and the tokens drafted after it,
 * then takes back those the model did not choose. Under a window method
 * with eviction on demand that leaves no trace when the batch is sized so
 * that nothing happens inside it: the next window stays short of its due
 * point (so it is scored, later, from the same keys and queries as in
 * plain decoding) and the sequence stays within its share (so nothing is
 * evicted for entries that may go). The entries count as generated tokens
 * (one at a time, as the policy sees plain decoding), and taking them back
 * only has to restore think_done: their query rows and slots are rewritten
 * by the tokens that follow. Per_window eviction works the same way: its
 * events fall due at the same points. The threshold methods (streaming,
 * snapkv, rkv, kara with trigger threshold) work the same way: the batch
 * stays short of the size whose step runs an event over the whole cache,
 * and the token that reaches it goes alone; the query rows that snapkv,
 * rkv and threshold kara keep for that event are those of positions below
 * it, rewritten by the accepted tokens by then. Methods that sum every
 * step's attention (h2o, lazy, read tracking) keep each entry's attention
 * apart (kv_policy_attn.c), in verify_rows rows: room 0 without them, at
 * most verify_rows with them; read tracking's batches also stay short of
 * its next window start, which zeroes the sums of a window that the
 * entries before it still add to. */
#include <stdint.h>

#include "kv_method.h"
#include "kv_policy.h"
#include "kv_policy_impl.h"

/* Read tracking: the entries whose appends leave the grid of due windows
 * where the batch's first append leaves it (start_reads in kv_policy.c). */
static int32_t reads_room(const kr_kv_policy *pol, const kr_kv_policy_seq *q, int32_t n) {
    int32_t grid = q->reads_grid < q->frontier ? q->frontier : q->reads_grid;
    while (n + 1 - grid - kr_kv_tune(&pol->p)->buffer >= pol->p.interval) grid += pol->p.interval;
    return grid + kr_kv_tune(&pol->p)->buffer + pol->p.interval - n - 1;
}

int32_t kr_kv_policy_spec_room(const kr_kv_policy *pol, int32_t seq) {
    if (!pol->scoring || pol->method->kind(&pol->p) == KR_KV_KEEPS_ALL) return INT32_MAX;
    const bool sums = pol->needs_h2o || pol->method_state;
    if (sums && pol->verify_rows < 2) return 0;
    const kr_kv_policy_seq *q = &pol->seqs[seq];
    if (!q->prompt_marked) return 1; /* the first generated token marks the prompt's end alone */
    int32_t n = pol->kv->seqs[seq].n, room = INT32_MAX;
    if (!pol->window_method) {
        int32_t limit = kr_kvp_cache_limit(pol, seq);
        if (limit < INT32_MAX) room = limit - n; /* entries that keep it at most at the limit */
    } else if (!(kr_kv_tune(&pol->p)->think_only && q->think_done)) {
        /* due once n - F - buffer reaches the larger of interval and min_compressible */
        int32_t len = pol->p.interval > kr_kv_tune(&pol->p)->min_compressible ? pol->p.interval
                                                                              : kr_kv_tune(&pol->p)->min_compressible;
        int32_t due_at = q->frontier + kr_kv_tune(&pol->p)->buffer + len;
        room = due_at - 1 - n; /* entries that leave it short of due; the token that reaches it goes alone */
    }
    int32_t share_room = pol->plan.seq_tokens - n;
    if (share_room < room) room = share_room;
    if (sums && pol->verify_rows < room) room = pol->verify_rows;
    if (q->h2o_acc && pol->window_method) {
        int32_t r = reads_room(pol, q, n);
        if (r < room) room = r;
    }
    return room > 1 ? room : 1;
}

void kr_kv_policy_spec_mark(kr_kv_policy *pol, int32_t seq) {
    kr_kv_policy_seq *q = &pol->seqs[seq];
    kr_kvp_attn_release(pol, seq);
    q->spec_slot = -1;
    q->spec_appended = 0;
    if (!q->generated || !q->prompt_marked) return;
    q->spec_pos = pol->kv->seqs[seq].next_pos;
    q->spec_slot = pol->kv->seqs[seq].n;
    q->spec_think = q->think_done;
    q->spec_events = q->events;
    q->spec_evictions = q->evictions;
}

bool kr_kv_policy_spec_can_take_back(const kr_kv_policy *pol, int32_t seq, int32_t n_keep) {
    const kr_kv_policy_seq *q = &pol->seqs[seq];
    return pol->scoring && q->spec_slot >= 0 && q->prompt_marked && n_keep >= q->spec_pos &&
        q->events == q->spec_events && q->evictions == q->spec_evictions && n_keep <= pol->kv->seqs[seq].next_pos &&
        kr_kvp_attn_can_take_back(pol, seq);
}

void kr_kv_policy_spec_take_back(kr_kv_policy *pol, int32_t seq, int32_t n_keep) {
    kr_kv_policy_seq *q = &pol->seqs[seq];
    bool done = q->spec_think;
    for (int32_t i = q->spec_slot; q->tokens && !done && i < q->spec_slot + (n_keep - q->spec_pos); i++)
        done = q->tokens[i] == pol->think_end_token && pol->think_end_token >= 0;
    q->think_done = done;
    kr_kvp_attn_take_back(pol, seq, n_keep - q->spec_pos);
}
