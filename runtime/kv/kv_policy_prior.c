/* kv_policy_prior.c - the policy's side of Kara's retention prior
 * (kv_prior.h, docs/KARA_METHOD.md section 14): its scratch, claimed when
 * the context is created, and window scores with the prior added. */
#include <stdlib.h>
#include <string.h>

#include "kv_method.h"
#include "kv_policy_impl.h"
#include "status.h"
#include "kv_tuning.h"

kara_status kr_kv_policy_set_prior(kr_kv_policy *pol, const kr_kv_prior *prior) {
    kara_status st = kr_kv_prior_check(prior, pol->kv);
    if (st) return st;
    pol->prior = *prior;
    pol->use_prior = pol->scoring && pol->method->uses_prior && kr_kv_tune(&pol->p)->prior_weight > 0.0f;
    if (!pol->use_prior) return KARA_OK;
    free(pol->prior_vals);
    pol->prior_vals = calloc((size_t)pol->max_slots + (size_t)kr_kv_prior_scratch_floats(prior), sizeof(float));
    pol->prior_scratch = pol->prior_vals ? pol->prior_vals + pol->max_slots : NULL;
    if (!pol->prior_vals) {
        pol->use_prior = false;
        return kr_set_error(KARA_ERR_NOMEM, "out of memory for the retention prior's scratch");
    }
    return KARA_OK;
}

/* pol->prior_vals = the prior of slots [first, first + n) of seq. */
static kara_status eval_prior_at(kr_kv_policy *pol, int32_t seq, int32_t first, int32_t n) {
    kara_status st = kr_kv_pull_rows(pol->kv, seq, pol->prior.layer, pol->prior.layer + 1, first, n);
    if (st) return st; /* a device holds the pool: the prior reads its layer's rows on the host */
    kr_kv_prior_eval(&pol->prior, pol->kv, seq, first, n, pol->prior_vals, pol->prior_scratch);
    return KARA_OK;
}

/* scores of the n slots from first plus the weighted prior, computed from
 * the cache first when eval_prior (else the last one computed is reused). */
static kara_status add_prior(kr_kv_policy *pol, int32_t seq, float *scores, int32_t first, int32_t n, bool eval_prior) {
    kara_status st = eval_prior ? eval_prior_at(pol, seq, first, n) : KARA_OK;
    if (!st) kr_kv_prior_combine(scores, pol->prior_vals, n, kr_kv_tune(&pol->p)->prior_weight);
    return st;
}

kara_status kr_kvp_prior_add(kr_kv_policy *pol, int32_t seq, float *scores, int32_t first, int32_t n) {
    return pol->use_prior && n > 0 ? add_prior(pol, seq, scores, first, n, true) : KARA_OK;
}

kara_status kr_kvp_unscored(kr_kv_policy *pol, int32_t seq, int32_t first, int32_t n_c) {
    if (pol->online_scores)
        memcpy(pol->scores, pol->seqs[seq].h2o_acc + first, (size_t)n_c * sizeof(float));
    else
        memset(pol->scores, 0, (size_t)n_c * sizeof(float));
    return kr_kvp_prior_add(pol, seq, pol->scores, first, n_c);
}

kara_status kr_kvp_score_prior(kr_kv_policy *pol, int32_t seq, int32_t first, int32_t n_w, int32_t n_buf, int32_t n_q,
                               int32_t q_first_pos, int32_t l_begin, int32_t l_end, bool eval_prior) {
    kara_status st = kr_kvp_score_span(pol, seq, first, n_w, n_buf, n_q, q_first_pos, kr_kv_tune(&pol->p)->score_mode,
                                       kr_kv_tune(&pol->p)->exclude_self, l_begin, l_end);
    if (st || !pol->use_prior) return st;
    return add_prior(pol, seq, pol->scores, first, n_w - n_buf, eval_prior);
}
