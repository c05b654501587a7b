/* batch_admission.c - the batch engine's view of the KV plan (kv_plan.h):
 * the most blocks a request can hold, whether it can run at all, and how
 * many sequences a budget can run at once. */
#include "batch_engine.h"

int64_t kr_batch_request_blocks(const kara_engine *e, int32_t P, int32_t G) {
    const kr_kv_plan *plan = kr_context_kv_plan(e->ctx);
    return kr_kv_plan_blocks(plan, kr_kv_plan_peak_slots(plan, P, G));
}

bool kr_batch_method_holds(const kara_engine *e, int32_t P, int32_t G, char *why, size_t why_size) {
    return kr_kv_plan_holds(kr_context_kv_plan(e->ctx), P, G, why, why_size);
}

int32_t kara_engine_fit_concurrency(const kara_model *m, const kara_context_params *cp, int32_t n_prompt,
                                    int32_t n_predict) {
    if (!m || !cp || cp->n_seq_max < 1) return 0;
    if (!cp->kv.budget) return cp->n_seq_max; /* the pool is sized for every sequence */
    kr_kv_shape shape = {kara_model_n_layer(m), kara_model_n_head(m), kara_model_n_head_kv(m), kara_model_head_dim(m)};
    int32_t n_ctx = cp->n_ctx ? cp->n_ctx : kara_model_n_ctx_train(m);
    for (int32_t n = cp->n_seq_max; n >= 1; n--) {
        kr_kv_plan plan;
        if (kr_kv_plan_make(&plan, &cp->kv, &shape, n_ctx, n) != KARA_OK) continue;
        int64_t need = kr_kv_plan_blocks(&plan, kr_kv_plan_peak_slots(&plan, n_prompt, n_predict));
        if ((int64_t)n * need + plan.reserve_blocks <= plan.n_blocks &&
            kr_kv_plan_holds(&plan, n_prompt, n_predict, NULL, 0))
            return n;
    }
    return 0;
}
