/* seq_state.c - a sequence's state as bytes and back (kara_seq_state_*):
 * prompt caching, so a long system prompt or document is decoded once and
 * loaded into any sequence of any context of the same model later.
 *
 * The image: a fixed header (magic, version, the model's shape and the KV
 * element type it was made with, the sizes), the caller's tokens, then K
 * and V of every layer for every slot, and an FNV-1a checksum of all that
 * precedes it. Native byte order: an image is for machines of one kind.
 *
 * Only whole sequences are saved: slots i holding positions i, and a KV
 * policy whose state the load can rebuild exactly
 * (kr_kv_policy_can_rewind, the rule of kara_seq_truncate too). A loaded sequence is, to the policy, a prompt just
 * decoded. */
#include <stdio.h>
#include <string.h>

#include "context.h"
#include "status.h"

#define STATE_MAGIC "KARASEQ1"
#define STATE_VERSION 1u

typedef struct state_header {
    char magic[8];
    uint32_t version, dtype;
    uint32_t n_layer, n_head_kv, head_dim, n_vocab;
    uint64_t n_params;
    int32_t n_slots, n_tokens;
    uint64_t payload_bytes; /* tokens and K/V, after the header */
} state_header;

static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static size_t payload_bytes(const kara_context *c, int32_t n) {
    return (size_t)n * sizeof(int32_t) + (size_t)n * (size_t)c->kv.n_layer * 2 * c->kv.slot_bytes;
}

/* The sequence is whole (slot i = position i) and the policy can be
 * rebuilt from its tokens alone; otherwise KARA_ERR_UNSUPPORTED. */
static kara_status check_savable(const kara_context *c, int32_t seq, const char *fn) {
    const kr_kv_seq *s = &c->kv.seqs[seq];
    if (s->n != s->next_pos)
        return kr_set_error(KARA_ERR_UNSUPPORTED,
                            "%s: sequence %d holds %d slots of %d positions (compressed); only whole sequences are "
                            "saved or copied",
                            fn, seq, s->n, s->next_pos);
    if (!kr_kv_policy_can_rewind(&c->policy, seq, s->n))
        return kr_set_error(KARA_ERR_UNSUPPORTED,
                            "%s: sequence %d is past its prompt under %s with scoring on; save or copy it right "
                            "after the prompt",
                            fn, seq, kara_kv_method_name(c->policy.p.method));
    return KARA_OK;
}

size_t kara_seq_state_size(const kara_context *c, int32_t seq) {
    if (!c || seq < 0 || seq >= c->kv.n_seq_max) return 0;
    int32_t n = c->kv.seqs[seq].n;
    return sizeof(state_header) + payload_bytes(c, n) + sizeof(uint64_t);
}

static void fill_header(const kara_context *c, state_header *h, int32_t n) {
    memset(h, 0, sizeof *h);
    memcpy(h->magic, STATE_MAGIC, 8);
    h->version = STATE_VERSION;
    h->dtype = (uint32_t)c->kv.dtype;
    h->n_layer = (uint32_t)c->kv.n_layer;
    h->n_head_kv = (uint32_t)c->kv.n_head_kv;
    h->head_dim = (uint32_t)c->kv.head_dim;
    h->n_vocab = (uint32_t)c->model->hp.n_vocab;
    h->n_params = kara_model_n_params(c->model);
    h->n_slots = h->n_tokens = n;
    h->payload_bytes = payload_bytes(c, n);
}

kara_status kara_seq_state_save(const kara_context *c, int32_t seq, const int32_t *tokens, int32_t n_tokens, void *buf,
                                size_t size, size_t *written) {
    if (written) *written = 0;
    if (!c || seq < 0 || seq >= c->kv.n_seq_max || (n_tokens > 0 && !tokens) || !buf)
        return kr_set_error(KARA_ERR_ARG, "kara_seq_state_save: invalid arguments");
    const kr_kv_seq *s = &c->kv.seqs[seq];
    if (n_tokens != s->next_pos)
        return kr_set_error(KARA_ERR_ARG, "kara_seq_state_save: %d tokens given, sequence %d holds %d", n_tokens, seq,
                            s->next_pos);
    if (s->n == 0) return kr_set_error(KARA_ERR_ARG, "kara_seq_state_save: sequence %d is empty", seq);
    kara_status st = check_savable(c, seq, "kara_seq_state_save");
    /* a device holds the pool: its rows are copied to the host's first (the
     * host copy is a mirror, not the context's state, hence the cast) */
    if (!st) st = kr_kv_pull_rows((kr_kv_cache *)&c->kv, seq, 0, c->kv.n_layer, 0, s->n);
    if (st) return st;
    size_t need = kara_seq_state_size(c, seq);
    if (size < need)
        return kr_set_error(KARA_ERR_BUFFER, "kara_seq_state_save: buffer of %zu bytes, %zu needed", size, need);
    state_header h;
    fill_header(c, &h, s->n);
    uint8_t *p = buf;
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    memcpy(p, tokens, (size_t)n_tokens * sizeof *tokens);
    p += (size_t)n_tokens * sizeof *tokens;
    for (int32_t l = 0; l < c->kv.n_layer; l++)
        for (int32_t i = 0; i < s->n; i++) {
            memcpy(p, kr_kv_k(&c->kv, l, seq, i), c->kv.slot_bytes);
            p += c->kv.slot_bytes;
            memcpy(p, kr_kv_v(&c->kv, l, seq, i), c->kv.slot_bytes);
            p += c->kv.slot_bytes;
        }
    uint64_t sum = fnv1a(1469598103934665603ull, buf, (size_t)(p - (uint8_t *)buf));
    memcpy(p, &sum, sizeof sum);
    if (written) *written = need;
    return KARA_OK;
}

/* The image is one this context can take, whole and unchanged. */
static kara_status check_image(const kara_context *c, const void *buf, size_t size, state_header *h) {
    if (size < sizeof *h + sizeof(uint64_t))
        return kr_set_error(KARA_ERR_FORMAT, "sequence state: %zu bytes, shorter than its header", size);
    memcpy(h, buf, sizeof *h);
    if (memcmp(h->magic, STATE_MAGIC, 8) != 0)
        return kr_set_error(KARA_ERR_FORMAT, "sequence state: bad magic (not a kara_seq_state_save image)");
    if (h->version != STATE_VERSION)
        return kr_set_error(KARA_ERR_UNSUPPORTED, "sequence state: version %u, this build reads %u", h->version,
                            STATE_VERSION);
    state_header want;
    fill_header(c, &want, h->n_slots);
    if (h->n_layer != want.n_layer || h->n_head_kv != want.n_head_kv || h->head_dim != want.head_dim ||
        h->n_vocab != want.n_vocab || h->n_params != want.n_params)
        return kr_set_error(KARA_ERR_FORMAT,
                            "sequence state: made with another model (%u layers, %u KV heads of %u, vocabulary %u, "
                            "%llu parameters; this one: %u, %u of %u, %u, %llu)",
                            h->n_layer, h->n_head_kv, h->head_dim, h->n_vocab, (unsigned long long)h->n_params,
                            want.n_layer, want.n_head_kv, want.head_dim, want.n_vocab,
                            (unsigned long long)want.n_params);
    if (h->dtype != want.dtype)
        return kr_set_error(KARA_ERR_FORMAT, "sequence state: KV type %s, this context stores %s",
                            kara_kv_dtype_name((kara_kv_dtype)h->dtype), kara_kv_dtype_name((kara_kv_dtype)want.dtype));
    if (h->n_slots < 1 || h->n_tokens != h->n_slots || h->payload_bytes != want.payload_bytes ||
        size != sizeof *h + h->payload_bytes + sizeof(uint64_t))
        return kr_set_error(KARA_ERR_FORMAT, "sequence state: %zu bytes do not match its header (%d slots)", size,
                            h->n_slots);
    uint64_t sum, got = fnv1a(1469598103934665603ull, buf, size - sizeof sum);
    memcpy(&sum, (const uint8_t *)buf + size - sizeof sum, sizeof sum);
    if (sum != got) return kr_set_error(KARA_ERR_FORMAT, "sequence state: checksum mismatch (damaged)");
    const int32_t *toks = (const int32_t *)((const uint8_t *)buf + sizeof *h);
    for (int32_t i = 0; i < h->n_tokens; i++) {
        int32_t t;
        memcpy(&t, toks + i, sizeof t);
        if (t < 0 || t >= c->model->hp.n_vocab)
            return kr_set_error(KARA_ERR_FORMAT, "sequence state: token %d at %d is outside the vocabulary", t, i);
    }
    if (h->n_slots > c->n_ctx)
        return kr_set_error(KARA_ERR_CONTEXT_FULL, "sequence state: %d tokens, the context holds %d", h->n_slots,
                            c->n_ctx);
    return KARA_OK;
}

/* Check that seq, cleared, can take n slots of which the first
 * shared_blocks blocks are shared with another sequence (KARA_ERR_KV_BUDGET
 * otherwise, nothing changed); then clear it. */
static kara_status make_room(kara_context *c, int32_t seq, int32_t n, int32_t shared_blocks, const char *what) {
    if (n > c->policy.plan.seq_tokens)
        return kr_set_error(KARA_ERR_KV_BUDGET, "%s: %d slots, a sequence's share is %d", what, n,
                            c->policy.plan.seq_tokens);
    int32_t need = kr_kv_blocks_for(&c->kv, n) - shared_blocks, freed = kr_kv_private_blocks(&c->kv, seq);
    if (need - freed > c->kv.n_free)
        return kr_set_error(KARA_ERR_KV_BUDGET, "%s: %d slots need %d blocks, %d free", what, n, need - freed,
                            c->kv.n_free);
    return kara_seq_clear(c, seq);
}

/* Empty seq and reserve blocks for n slots; checked first, so on failure
 * the sequence is as it was. */
static kara_status take_room(kara_context *c, int32_t seq, int32_t n, const char *what) {
    kara_status st = make_room(c, seq, n, 0, what);
    return st ? st : kr_kv_reserve(&c->kv, seq, n);
}

kara_status kara_seq_state_load(kara_context *c, int32_t seq, const void *buf, size_t size, int32_t *tokens,
                                int32_t max_tokens, int32_t *n_tokens) {
    if (n_tokens) *n_tokens = 0;
    if (!c || seq < 0 || seq >= c->kv.n_seq_max || !buf)
        return kr_set_error(KARA_ERR_ARG, "kara_seq_state_load: invalid arguments");
    state_header h;
    kara_status st = check_image(c, buf, size, &h);
    if (st) return st;
    if (tokens && max_tokens < h.n_tokens)
        return kr_set_error(KARA_ERR_ARG, "kara_seq_state_load: room for %d tokens, the state holds %d", max_tokens,
                            h.n_tokens);
    const int32_t n = h.n_slots;
    if ((st = take_room(c, seq, n, "sequence state"))) return st;
    const uint8_t *p = (const uint8_t *)buf + sizeof h;
    const int32_t *toks = (const int32_t *)p;
    for (int32_t i = 0; i < n; i++) {
        int32_t t;
        memcpy(&t, toks + i, sizeof t);
        int32_t slot = kr_kv_append(&c->kv, seq, i);
        kr_kv_policy_on_append(&c->policy, seq, slot, t, n);
        if (tokens) tokens[i] = t;
    }
    p += (size_t)n * sizeof(int32_t);
    for (int32_t l = 0; l < c->kv.n_layer; l++)
        for (int32_t i = 0; i < n; i++) {
            memcpy(kr_kv_k(&c->kv, l, seq, i), p, c->kv.slot_bytes);
            p += c->kv.slot_bytes;
            memcpy(kr_kv_v(&c->kv, l, seq, i), p, c->kv.slot_bytes);
            p += c->kv.slot_bytes;
        }
    if ((st = kr_kv_push_rows(&c->kv, seq, 0, c->kv.n_layer, 0, n))) { /* a device holds the pool */
        kara_seq_clear(c, seq);
        return st;
    }
    if (n_tokens) *n_tokens = n;
    return KARA_OK;
}

/* Leading slots of src that no compression event will rewrite, in src or
 * in a copy: its prompt (all of it while generation has not started) under
 * the methods that never evict a prompt slot; none under streaming and h2o
 * (and the others with their prompt unprotected). */
static int32_t shareable_slots(const kara_context *c, int32_t src) {
    return kr_kv_policy_shareable(&c->policy, src, c->kv.seqs[src].n);
}

/* A whole sequence into another of the same context: the blocks of what
 * no event rewrites shared (kr_kv_share), the rest copied, and the policy
 * told it is a prompt, as after a load. */
kara_status kara_seq_copy(kara_context *c, int32_t src, int32_t dst) {
    if (!c || src < 0 || dst < 0 || src >= c->kv.n_seq_max || dst >= c->kv.n_seq_max)
        return kr_set_error(KARA_ERR_ARG, "kara_seq_copy: invalid arguments");
    if (src == dst) return KARA_OK;
    kara_status st = check_savable(c, src, "kara_seq_copy");
    if (st) return st;
    const int32_t n = c->kv.seqs[src].n, shared = shareable_slots(c, src) / c->kv.block_size;
    if ((st = make_room(c, dst, n, shared, "kara_seq_copy"))) return st;
    if ((st = kr_kv_share(&c->kv, src, dst, shared))) return st;
    const int32_t *toks = c->policy.seqs[src].tokens;
    for (int32_t i = 0; i < n; i++) kr_kv_policy_on_append(&c->policy, dst, i, toks ? toks[i] : -1, n);
    return KARA_OK;
}
