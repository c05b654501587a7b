/* kv_modes.h - the values of the research settings that are enums (internal).
 *
 * How Kara scores windows and turns candidates into kept spans may change
 * between releases, so these enums stay out of kara.h: apps set them by
 * their YAML key and name (kara_kv_params_set "kara.score.mode" "two_sided";
 * names in kv_params.c, docs/KARA_METHOD.md and configs/README.md). The CUDA
 * scorer shares them, so this header includes nothing. */
#ifndef KR_KV_MODES_H
#define KR_KV_MODES_H

/* Which queries score which keys inside a window (kara.score.mode). */
typedef enum kr_score_mode {
    KR_SCORE_BIDIRECTIONAL = 0,
    KR_SCORE_TWO_SIDED,
    KR_SCORE_CAUSAL,
    KR_SCORE_BUFFER_ONLY,
    /* no scorer: a slot's score is the attention every later query of the
     * decode gave it up to its window's scoring, summed over heads and
     * layers as the forward pass computes it (H2O's sum within the window's
     * life); no query ring, no scoring scratch */
    KR_SCORE_ONLINE,
    /* online, but a slot's score is the largest attention probability any
     * head of any layer gave it from a query at least
     * kara.score.min_distance positions later, kept up to date until the
     * slot is evicted (docs/KARA_METHOD.md section 5.1) */
    KR_SCORE_ONLINE_MAX
} kr_score_mode;
/* Scores the decode's own attention gives (no query ring, no scorer). */
static inline int kr_score_is_online(kr_score_mode m) { return m == KR_SCORE_ONLINE || m == KR_SCORE_ONLINE_MAX; }
/* Which slots an on-demand eviction drops (kara.evict_rank): WINDOW, every
 * scored window the same fraction of itself (kara.evict_decay weighting
 * older ones), its lowest-scored first; GLOBAL, the lowest-scored slots of
 * all scored history, whatever their window. */
typedef enum kr_evict_rank { KR_EVICT_RANK_WINDOW = 0, KR_EVICT_RANK_GLOBAL } kr_evict_rank;
/* The keys a score's softmax normalises over (kara.score.softmax_over). */
typedef enum kr_softmax_over {
    KR_SOFTMAX_WINDOW = 0,
    KR_SOFTMAX_COMPRESSIBLE,
    KR_SOFTMAX_WINDOW_PLUS_SINKS
} kr_softmax_over;
/* How scores of heads or layers combine (kara.score.gqa_reduce, layer_reduce, baselines.snapkv.pool). */
typedef enum kr_reduce { KR_REDUCE_MEAN = 0, KR_REDUCE_MAX, KR_REDUCE_NORMALIZED_MEAN } kr_reduce;
/* How Kara's Top-K candidates become kept spans (kara.t2c.mode, docs/KARA_METHOD.md section 6): CHUNKS, the gaps
 * between candidates; POOLED_TOPK, Top-K after a max-pool over 7 neighbours; LINES, whole lines (pieces of at most
 * t2c.max_gap tokens) ranked by their best slot; LINE_TAILS (the default), CHUNKS in which a candidate first brings
 * the rest of its line when that ends within 4 slots. */
typedef enum kr_t2c_mode { KR_T2C_CHUNKS = 0, KR_T2C_POOLED_TOPK, KR_T2C_LINES, KR_T2C_LINE_TAILS } kr_t2c_mode;

#endif
