/* kv_knob.c - the KV research settings by key (kv_knob.h). */
#include "kv_knob.h"

#include <stdio.h>

double kr_kv_num(const kara_kv_params *p, const char *key) {
    double v = 0;
    if (kara_kv_params_get_number(p, key, &v) != KARA_OK) fprintf(stderr, "kara: internal: %s\n", kara_last_error());
    return v;
}

void kr_kv_set(kara_kv_params *p, const char *key, const char *text) {
    if (kara_kv_params_set(p, key, text) != KARA_OK) fprintf(stderr, "kara: internal: %s\n", kara_last_error());
}

void kr_kv_set_num(kara_kv_params *p, const char *key, double v) {
    char text[64];
    snprintf(text, sizeof text, "%.9g", v);
    kr_kv_set(p, key, text);
}

void kr_kv_fit_slacks(kara_kv_params *p, int32_t slots) {
    kara_kv_method_info info;
    for (int m = 0; kara_kv_method_info_get((kara_kv_method)m, &info) == KARA_OK; m++)
        if (info.slack_key && kr_kv_int(p, info.slack_key) > slots / 4)
            kr_kv_set_num(p, info.slack_key, slots / 4 > 8 ? slots / 4 : 8);
}
