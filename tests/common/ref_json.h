/* ref_json.h - pull numbers out of ../shared/reference/NAME.json: just
 * enough JSON for flat keys holding numbers, number arrays, or strings that
 * themselves hold a number array (as greedy_top1_margin does). */
#ifndef KR_REF_JSON_H
#define KR_REF_JSON_H

#include <stdbool.h>
#include <stdint.h>

/* Value of a numeric key; false when absent. */
bool kr_ref_number(const char *json, const char *key, double *out);
/* Numbers of an array key (or of a string holding "[...]"), malloc'd into
 * *out; returns the count or -1 when absent. */
int kr_ref_array(const char *json, const char *key, double **out);

#endif
