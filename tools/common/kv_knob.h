/* kv_knob.h - the KV research settings by their YAML key, for the commands
 * that sweep them (eval, batch reports). kara.h keeps them out of
 * kara_kv_params' fields; these wrap kara_kv_params_get_number / _set. The
 * keys and values are literals of the calling code, so a failure is a bug
 * in it: reported on stderr, never silent. */
#ifndef KR_TOOLS_KV_KNOB_H
#define KR_TOOLS_KV_KNOB_H

#include "kara.h"

/* The setting's value (an enum as kara_kv_params_get_number gives it; 0 after reporting a bad key). */
double kr_kv_num(const kara_kv_params *p, const char *key);
static inline int32_t kr_kv_int(const kara_kv_params *p, const char *key) { return (int32_t)kr_kv_num(p, key); }
/* Set it from its YAML text ("per_window") or from a number. */
void kr_kv_set(kara_kv_params *p, const char *key, const char *text);
void kr_kv_set_num(kara_kv_params *p, const char *key, double v);
/* Each budget method's slack (slots its cache grows past its budget before
 * an event) at most a quarter of `slots`, at least 8: a small cap must not
 * go on slack alone (kara eval's and eval-kv's capped rows). */
void kr_kv_fit_slacks(kara_kv_params *p, int32_t slots);

#endif
