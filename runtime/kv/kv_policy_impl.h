/*
 * kv_policy_impl.h - what the KV policy's files and the methods
 * (methods/) share: scoring a span of a sequence, compacting a sequence
 * after a selection, and the on-demand windows.
 */
#ifndef KR_KV_POLICY_IMPL_H
#define KR_KV_POLICY_IMPL_H

#include "kv_policy.h"

/* Score rows [first, first + n_w) of seq's cache into pol->scores[0 ..
 * n_w - n_buf), averaged over the scored layers in [l_begin, l_end) (all
 * layers: the shared aggregation; one scored layer: per_layer selection).
 * The last n_q rows have queries, read from the ring at positions
 * q_first_pos + row. */
kara_status kr_kvp_score_span(kr_kv_policy *pol, int32_t seq, int32_t first, int32_t n_w, int32_t n_buf, int32_t n_q,
                              int32_t q_first_pos, kr_score_mode mode, bool exclude_self, int32_t l_begin,
                              int32_t l_end);

/* A window method's scores: kr_kvp_score_span with the configured mode and
 * exclude_self; then, for Kara with a retention prior (pol->use_prior),
 * pol->scores[j] becomes the normalised score of candidate j plus the
 * weighted prior (kv_prior.h). With eval_prior the candidates' prior is
 * computed from the cache first: at a window's first selection group,
 * before anything moves; later groups reuse it. */
kara_status kr_kvp_score_prior(kr_kv_policy *pol, int32_t seq, int32_t first, int32_t n_w, int32_t n_buf, int32_t n_q,
                               int32_t q_first_pos, int32_t l_begin, int32_t l_end, bool eval_prior);
/* The scores of a window method that runs no scorer: zeros, or with
 * kara.score.mode online the attention the candidates received since they
 * were appended (the sequence's sums); plus, with the prior (prior_recent,
 * Kara), weight x the prior of each of the n_c candidates from first. */
kara_status kr_kvp_unscored(kr_kv_policy *pol, int32_t seq, int32_t first, int32_t n_c);
/* A budget baseline's scores with the prior (pol->use_prior): scores[j]
 * (slot first + j) becomes scores[j] / max + weight x its prior, computed
 * from the cache; unchanged without a prior. scores may be all zeros (the
 * prior alone ranks then). */
kara_status kr_kvp_prior_add(kr_kv_policy *pol, int32_t seq, float *scores, int32_t first, int32_t n);

/* Keep pol->keep (k slots, relative to frontier) of [frontier, n - n_buf)
 * in selection group `group` (its layers' K and V, its pos[] and
 * stored-score rows), or in every layer and row when group < 0, and move
 * the survivors and the buffer down. The per-slot arrays that have one row
 * (token ids, windows, H2O accumulators) follow group 0. keep_scores, when
 * given, become the stored scores of the kept slots. Blocks are released by
 * kr_kvp_compact_release once every group has moved: until then the
 * slots above the new n still hold the other groups' sources. */
kara_status kr_kvp_compact_group(kr_kv_policy *pol, kr_kv_cache *kv, int32_t seq, int32_t frontier, int32_t n_buf,
                                 int32_t k, const float *keep_scores, int32_t group);
/* After an event's compact_group calls: the sequence now holds new_n slots. */
void kr_kvp_compact_release(kr_kv_policy *pol, kr_kv_cache *kv, int32_t seq, int32_t new_n);

/* The slots of tokens[0, n) that end a line (t2c.mode lines), in the
 * policy's scratch; NULL when no line breaks are known. */
const uint8_t *kr_kvp_line_flags(kr_kv_policy *pol, const int32_t *tokens, int32_t n);

/* Is seq's window due (its compressible part has reached the interval)? */
bool kr_kvp_window_due(const kr_kv_policy *pol, const kr_kv_cache *kv, int32_t seq);
/* The threshold methods (no windows): the most slots seq may hold before
 * an event over its whole cache runs after the step (INT32_MAX: none). */
int32_t kr_kvp_cache_limit(const kr_kv_policy *pol, int32_t seq);

/* One selection for every layer (shared scope and the at-budget methods):
 * keep pol->keep (k slots, relative to frontier) of [frontier, n - n_buf). */
kara_status kr_kvp_compact(kr_kv_policy *pol, kr_kv_cache *kv, int32_t seq, int32_t frontier, int32_t n_buf, int32_t k,
                           const float *keep_scores);
/* The end of an at-budget method's event (kv_method.h, cache_event) whose
 * selection returned st and pol->keep[0, k): the survivors moved down and
 * the event counted; a budget that cannot hold what the method protects
 * (KARA_ERR_KV_BUDGET) keeps everything and succeeds, as the block pool
 * still bounds memory and kara_decode never half-fails. */
kara_status kr_kvp_cache_keep(kr_kv_policy *pol, int32_t seq, kara_status st, int32_t k);

/* kv_evict.c: on-demand eviction. Score the window of seq as it stood when
 * it became due (exactly `interval` compressible slots, whatever was
 * generated since), store the scores, tag the slots with a new window and
 * move the frontier past them; nothing is evicted. */
kara_status kr_kvp_score_window(kr_kv_policy *pol, int32_t seq);
/* Drop `drop` slots of seq's scored history, evenly across its windows
 * (each keeps the same fraction of the slots it had when scored), by the
 * method's selection on the stored scores. */
kara_status kr_kvp_evict_even(kr_kv_policy *pol, int32_t seq, int32_t drop);
/* per_window with evict_lag: compress every scored window of seq that is
 * more than evict_lag windows old and not yet compressed to its retention
 * (kr_kv_keep_count of the slots it had when scored), by the method's
 * selection on its stored scores plus the reads since (LazyEviction's lag). */
kara_status kr_kvp_compress_aged(kr_kv_policy *pol, int32_t seq);
/* Slots of seq's scored history that eviction may drop. */
int32_t kr_kvp_evictable(const kr_kv_policy *pol, int32_t seq);
/* Are the queries of seq's open window [F, n) all in the ring (or not
 * needed by the method)? */
bool kr_kvp_queries_kept(const kr_kv_policy *pol, int32_t seq, int32_t n);
/* The on-demand plan of appending n_new slots to seq, changing nothing: the
 * slots of scored history an eviction drops (0: none) and whether the open
 * window is scored first; KARA_ERR_KV_BUDGET when the share cannot hold it. */
kara_status kr_kvp_on_demand_plan(const kr_kv_policy *pol, int32_t seq, int32_t n_new, int32_t *drop,
                                  bool *score_first);

/* kv_policy_attn.c, for kv_policy_spec.c: zero the rows the last generated
 * batch of seq kept (before the next decode's appends); whether its entries
 * can be taken back as far as the summed attention goes; and taking back
 * all but its first n_kept. */
void kr_kvp_attn_release(kr_kv_policy *pol, int32_t seq);
bool kr_kvp_attn_can_take_back(const kr_kv_policy *pol, int32_t seq);
void kr_kvp_attn_take_back(kr_kv_policy *pol, int32_t seq, int32_t n_kept);

#endif /* KR_KV_POLICY_IMPL_H */
