/* kv_observe.h - what the observation-window baselines (snapkv, rkv)
 * share: their reservation, what they protect, and their selection. */
#ifndef KR_KV_OBSERVE_H
#define KR_KV_OBSERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kara.h"
#include "kv_modes.h"
#include "kv_plan.h"
#include "kv_tuning.h"

/* Keys over the whole cache, but only the observation window asks queries
 * (buffer_only scoring): scratch for obs_window query rows. */
void kr_kv_observe_reserve(kr_kv_reservation *s, const kara_kv_params *p, int32_t obs_window, int32_t n_layer,
                           int32_t max_slots);
/* The slots never evicted: the prompt (`front`, when protect_prompt) and
 * the observation window. */
int32_t kr_kv_observe_protects(bool protect_prompt, int32_t obs_window, int32_t front);
/* snapkv and rkv: the protected front, the newest obs_window slots, and the
 * best of the middle by the observation scores s pooled over `kernel`; rkv
 * (red non-NULL) then ranks lambda * pooled - (1 - lambda) * redundancy. */
kara_status kr_kv_select_observed(const char *who, const float *s, const float *red, float lambda, int32_t n,
                                  int32_t n_front, int32_t obs_window, int32_t kernel, kr_reduce pool, int32_t budget,
                                  int32_t *keep, int32_t *n_keep, void *scratch, size_t scratch_bytes);

#endif
