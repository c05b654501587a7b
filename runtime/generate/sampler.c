/* sampler.c - token selection: greedy, or llama.cpp's chain (repetition
 * penalty, top-k, top-p, min-p, temperature, then a seeded draw). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "sampler_internal.h"

typedef struct candidate {
    int32_t id;
    float logit;
} candidate;

struct kara_sampler {
    kara_sampler_params p;
    uint64_t rng;
    candidate *cand;  /* one candidate per token of the vocabulary */
    int32_t cap;      /* n_vocab */
    int32_t *history; /* ring of the last repeat_last_n tokens */
    int32_t hist_n, hist_head;
    int32_t hist_cap; /* entries allocated for history */
};

void kara_sampler_params_init(kara_sampler_params *p) {
    p->temperature = 0.8f;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->seed = 0x4b415241u;
}

kara_status kara_sampler_create(const kara_sampler_params *p, int32_t n_vocab, kara_sampler **out) {
    kara_sampler_params d;
    if (!p) {
        kara_sampler_params_init(&d);
        p = &d;
    }
    if (!out) return kr_set_error(KARA_ERR_ARG, "kara_sampler_create: out is NULL");
    *out = NULL;
    if (n_vocab < 1) return kr_set_error(KARA_ERR_ARG, "kara_sampler_create: n_vocab %d < 1", n_vocab);
    if (p->repeat_last_n < 0 || p->repeat_penalty <= 0 || p->top_p <= 0 || p->min_p > 1 || isnan(p->temperature))
        return kr_set_error(KARA_ERR_ARG,
                            "sampler: invalid parameters (repeat_last_n >= 0, repeat_penalty > 0, top_p > 0, "
                            "min_p <= 1)");
    kara_sampler *s = calloc(1, sizeof *s);
    if (!s) return kr_set_error(KARA_ERR_NOMEM, "out of memory");
    s->p = *p;
    s->hist_cap = p->repeat_last_n ? p->repeat_last_n : 1;
    s->history = calloc((size_t)s->hist_cap, sizeof(int32_t));
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    s->cap = n_vocab;
    if (!s->history || !s->cand) {
        kara_sampler_free(s);
        return kr_set_error(KARA_ERR_NOMEM, "out of memory for a sampler over %d tokens", n_vocab);
    }
    kara_sampler_reset(s);
    *out = s;
    return KARA_OK;
}

void kara_sampler_free(kara_sampler *s) {
    if (!s) return;
    free(s->cand);
    free(s->history);
    free(s);
}

void kara_sampler_reset(kara_sampler *s) {
    s->rng = s->p.seed ? s->p.seed : 0x9e3779b97f4a7c15ull;
    s->hist_n = 0;
    s->hist_head = 0;
}

/* The batch engine reuses one sampler per slot for request after request
 * (sampler_internal.h): new parameters and seed, empty history, no
 * allocation as long as the history fits what create allocated. */
kara_status kr_sampler_reconfigure(kara_sampler *s, const kara_sampler_params *p) {
    if (!s || !p) return kr_set_error(KARA_ERR_ARG, "kr_sampler_reconfigure: NULL argument");
    if (p->repeat_last_n < 0 || p->repeat_penalty <= 0 || p->top_p <= 0 || p->min_p > 1 || isnan(p->temperature))
        return kr_set_error(KARA_ERR_ARG,
                            "sampler: invalid parameters (repeat_last_n >= 0, repeat_penalty > 0, top_p > 0, "
                            "min_p <= 1)");
    if (p->repeat_last_n > s->hist_cap)
        return kr_set_error(KARA_ERR_ARG, "sampler: repeat_last_n %d exceeds the %d this sampler was created for",
                            p->repeat_last_n, s->hist_cap);
    s->p = *p;
    kara_sampler_reset(s);
    return KARA_OK;
}

void kara_sampler_accept(kara_sampler *s, int32_t token) {
    int32_t n = s->p.repeat_last_n;
    if (n <= 0) return;
    s->history[s->hist_head] = token;
    s->hist_head = (s->hist_head + 1) % n;
    if (s->hist_n < n) s->hist_n++;
}

/* splitmix64: small, fast, and good enough for sampling */
static uint64_t next_u64(kara_sampler *s) {
    uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int cmp_desc(const void *a, const void *b) {
    const candidate *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static bool penalised(const kara_sampler *s, int32_t id) {
    for (int32_t i = 0; i < s->hist_n; i++)
        if (s->history[i] == id) return true;
    return false;
}

/* Keep the k best candidates at the front, sorted (a bounded insertion pass
 * over the vocabulary: O(n k) worst case but k is small). */
static int32_t keep_top_k(candidate *c, int32_t n, int32_t k) {
    if (k <= 0 || k >= n) {
        qsort(c, (size_t)n, sizeof *c, cmp_desc);
        return n;
    }
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        candidate x = c[i];
        if (m == k && cmp_desc(&x, &c[m - 1]) >= 0) continue;
        int32_t j = m < k ? m++ : k - 1;
        while (j > 0 && cmp_desc(&x, &c[j - 1]) < 0) {
            c[j] = c[j - 1];
            j--;
        }
        c[j] = x;
    }
    return m;
}

kara_status kara_sampler_sample(kara_sampler *s, const float *logits, int32_t *token) {
    if (!s || !logits || !token) return kr_set_error(KARA_ERR_ARG, "kara_sampler_sample: NULL argument");
    const int32_t n_vocab = s->cap;
    candidate *c = s->cand;
    /* a NaN or infinite logit (all exponent bits set) marks a damaged
     * model: found in the pass the sampler makes anyway, with integer ops
     * that leave the loop free to vectorize */
    uint32_t non_finite = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        float l = logits[i];
        uint32_t bits;
        memcpy(&bits, &l, sizeof bits);
        non_finite |= (bits & 0x7f800000u) == 0x7f800000u;
        if (s->p.repeat_penalty != 1.0f && penalised(s, i))
            l = l > 0 ? l / s->p.repeat_penalty : l * s->p.repeat_penalty;
        c[i].id = i;
        c[i].logit = l;
    }
    if (non_finite)
        return kr_set_error(KARA_ERR_FORMAT,
                            "the model computed NaN or infinite logits: its weights hold non-finite "
                            "values or overflow (a damaged or wrongly converted model file)");
    int32_t chosen;
    if (s->p.temperature <= 0.0f) {
        chosen = 0;
        for (int32_t i = 1; i < n_vocab; i++)
            if (c[i].logit > c[chosen].logit) chosen = i;
        chosen = c[chosen].id;
    } else {
        int32_t n = keep_top_k(c, n_vocab, s->p.top_k);
        /* probabilities of the survivors, then top-p and min-p cuts */
        float maxl = c[0].logit, sum = 0.0f;
        for (int32_t i = 0; i < n; i++) sum += expf(c[i].logit - maxl);
        if (s->p.top_p < 1.0f) {
            float cum = 0.0f;
            for (int32_t i = 0; i < n; i++) {
                cum += expf(c[i].logit - maxl) / sum;
                if (cum >= s->p.top_p) {
                    n = i + 1;
                    break;
                }
            }
        }
        if (s->p.min_p > 0.0f) {
            float cut = maxl + logf(s->p.min_p);
            int32_t m = 1;
            while (m < n && c[m].logit >= cut) m++;
            n = m;
        }
        sum = 0.0f;
        for (int32_t i = 0; i < n; i++) {
            c[i].logit = expf((c[i].logit - maxl) / s->p.temperature);
            sum += c[i].logit;
        }
        double r = (double)(next_u64(s) >> 11) * (1.0 / 9007199254740992.0) * sum, acc = 0.0;
        chosen = c[n - 1].id;
        for (int32_t i = 0; i < n; i++) {
            acc += c[i].logit;
            if (r < acc) {
                chosen = c[i].id;
                break;
            }
        }
    }
    kara_sampler_accept(s, chosen);
    *token = chosen;
    return KARA_OK;
}
