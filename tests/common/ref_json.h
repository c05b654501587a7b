/* ref_json.h - pull numbers out of ../shared/reference/NAME.json: just
 * enough JSON for flat keys holding numbers, number arrays, or strings that
 * themselves hold a number array (as greedy_top1_margin does). */
#ifndef KARA_REF_JSON_H
#define KARA_REF_JSON_H

#include <stdbool.h>
#include <stdint.h>

/* Value of a numeric key; false when absent. */
bool kara_ref_number(const char *json, const char *key, double *out);
/* Numbers of an array key (or of a string holding "[...]"), malloc'd into
 * *out; returns the count or -1 when absent. */
int kara_ref_array(const char *json, const char *key, double **out);

#endif
