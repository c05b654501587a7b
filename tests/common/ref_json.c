#include "ref_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *find_value(const char *json, const char *key) {
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\"", key);
    const char *p = strstr(json, pat);
    if (!p) return NULL;
    p += strlen(pat);
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    if (*p != ':') return NULL;
    p++;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

bool kr_ref_number(const char *json, const char *key, double *out) {
    const char *p = find_value(json, key);
    if (!p) return false;
    char *end;
    double v = strtod(p, &end);
    if (end == p) return false;
    *out = v;
    return true;
}

int kr_ref_array(const char *json, const char *key, double **out) {
    *out = NULL;
    const char *p = find_value(json, key);
    if (!p) return -1;
    if (*p == '"') p++;
    if (*p != '[') return -1;
    p++;
    int cap = 64, n = 0;
    double *v = malloc((size_t)cap * sizeof *v);
    while (v) {
        while (*p == ' ' || *p == ',' || *p == '\n' || *p == '\r' || *p == '\t') p++;
        if (*p == ']' || !*p) break;
        char *end;
        double x = strtod(p, &end);
        if (end == p) break;
        if (n == cap) {
            cap *= 2;
            double *nv = realloc(v, (size_t)cap * sizeof *nv);
            if (!nv) {
                free(v);
                return -1;
            }
            v = nv;
        }
        v[n++] = x;
        p = end;
    }
    *out = v;
    return v ? n : -1;
}
