/* config_suggest.c - the "did you mean" hint for an unknown key: the name
 * of the schema closest to what was typed. */
#include <stdio.h>
#include <string.h>

#include "config_impl.h"

#define keys kr_config_table()
#define N_KEYS kr_config_table_size()

/* Levenshtein distance, for "did you mean" hints on unknown keys, or `cap`
 * when it is cap or more: a hint only wants the few closest, and an unknown
 * key is checked against every name, so a distant one costs little (the
 * lengths alone, or the first row whose every entry has reached cap). */
static int edit_distance_below(const char *a, const char *b, int cap) {
    int la = (int)strlen(a), lb = (int)strlen(b);
    if (la > 127 || lb > 127 || la - lb >= cap || lb - la >= cap) return cap;
    int row[128];
    for (int j = 0; j <= lb; j++) row[j] = j;
    for (int i = 1; i <= la; i++) {
        int diag = row[0], low;
        row[0] = low = i;
        for (int j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            if (best < low) low = best;
            diag = up;
        }
        if (low >= cap) return cap; /* the distance never falls below a row's least entry */
    }
    return row[lb] < cap ? row[lb] : cap;
}

/* " (did you mean 'x'?)" for the closest name: a key with the same last
 * component in another section, else a key or section within a few edits;
 * "" when nothing is close. */
void kr_config_suggest(const char *key, char *buf, size_t size) {
    buf[0] = 0;
    const char *leaf = strrchr(key, '.');
    leaf = leaf ? leaf + 1 : key;
    char best[128] = "";
    int best_d = 4;
    for (int i = 0; i < N_KEYS; i++) {
        const char *k = keys[i].key;
        if (!strcmp(strrchr(k, '.') + 1, leaf)) {
            snprintf(best, sizeof best, "%s", k);
            break;
        }
        /* the key itself and each of its sections: "kara.score.mode", "kara.score", "kara" */
        for (const char *end = k + strlen(k); end > k;) {
            char cand[128];
            snprintf(cand, sizeof cand, "%.*s", (int)(end - k), k);
            int d = edit_distance_below(key, cand, best_d);
            if (d < best_d) best_d = d, snprintf(best, sizeof best, "%s", cand);
            do end--;
            while (end > k && *end != '.');
        }
    }
    if (best[0]) snprintf(buf, size, " (did you mean '%s'?)", best);
}
