/* test_sampler.c - the sampling chain on hand-made logits: greedy ties,
 * each cut (top-k, top-p, min-p) measured by which tokens can ever be drawn,
 * temperature against the exact softmax frequencies, the repetition
 * penalty, and seeds (same seed, same draws). */
#include <math.h>
#include <string.h>

#include "kara.h"
#include "test_util.h"

enum { V = 8, DRAWS = 20000 };

static kara_sampler *make(float temp, int top_k, float top_p, float min_p, float penalty, uint64_t seed) {
    kara_sampler_params p;
    kara_sampler_params_init(&p);
    p.temperature = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.repeat_penalty = penalty;
    p.seed = seed;
    kara_sampler *s = NULL;
    CHECK(kara_sampler_create(&p, V, &s) == KARA_OK);
    return s;
}

/* One draw (the sampler was created for V tokens). */
static int32_t draw(kara_sampler *s, const float *logits) {
    int32_t tok = -1;
    CHECK(kara_sampler_sample(s, logits, &tok) == KARA_OK);
    return tok;
}

int main(void) {
    const float logits[V] = {1.0f, 3.0f, 3.0f, 2.5f, 0.5f, -1.0f, 2.0f, 0.0f};

    /* greedy: argmax, ties to the lowest id, whatever the seed */
    kara_sampler *g = make(0.0f, 40, 0.95f, 0.05f, 1.0f, 1);
    CHECK_EQ_INT(draw(g, logits), 1);
    kara_sampler_free(g);

    /* top-k 2: only tokens 1 and 2 (the two 3.0 logits) can appear */
    kara_sampler *s = make(1.0f, 2, 1.0f, 0.0f, 1.0f, 7);
    int32_t seen[V] = {0};
    for (int i = 0; i < 2000; i++) seen[draw(s, logits)]++;
    CHECK(seen[1] > 0 && seen[2] > 0);
    CHECK_EQ_INT(seen[0] + seen[3] + seen[4] + seen[5] + seen[6] + seen[7], 0);
    kara_sampler_free(s);

    /* no cuts, temperature 1: frequencies follow softmax(logits) within
     * 4 standard errors */
    s = NULL;
    CHECK(kara_sampler_create(&(kara_sampler_params){1.0f, 0, 1.0f, 0.0f, 1.0f, 64, 99}, V, &s) == KARA_OK);
    if (s) {
        int32_t counts[V] = {0};
        for (int i = 0; i < DRAWS; i++) counts[draw(s, logits)]++;
        double z = 0;
        for (int j = 0; j < V; j++) z += exp(logits[j]);
        for (int j = 0; j < V; j++) {
            double p = exp(logits[j]) / z, se = sqrt(p * (1 - p) / DRAWS);
            CHECK_NEAR((double)counts[j] / DRAWS, p, 4 * se + 1e-4);
        }
        kara_sampler_free(s);
    }

    /* temperature 0.5 sharpens: frequencies follow softmax(logits / 0.5) */
    s = NULL;
    CHECK(kara_sampler_create(&(kara_sampler_params){0.5f, 0, 1.0f, 0.0f, 1.0f, 64, 5}, V, &s) == KARA_OK);
    if (s) {
        int32_t counts[V] = {0};
        for (int i = 0; i < DRAWS; i++) counts[draw(s, logits)]++;
        double z = 0;
        for (int j = 0; j < V; j++) z += exp(logits[j] / 0.5);
        for (int j = 0; j < V; j++) {
            double p = exp(logits[j] / 0.5) / z, se = sqrt(p * (1 - p) / DRAWS);
            CHECK_NEAR((double)counts[j] / DRAWS, p, 4 * se + 1e-4);
        }
        kara_sampler_free(s);
    }

    /* top-p 0.7: sorted probabilities are .307 .307 .186 .113 ...: the
     * nucleus is tokens 1, 2 and 3 (cumulative .307, .613, .799 >= .7) */
    s = make(1.0f, 0, 0.7f, 0.0f, 1.0f, 3);
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 3000; i++) seen[draw(s, logits)]++;
    CHECK(seen[1] > 0 && seen[2] > 0 && seen[3] > 0);
    CHECK_EQ_INT(seen[0] + seen[4] + seen[5] + seen[6] + seen[7], 0);
    kara_sampler_free(s);

    /* min-p 0.5: tokens with p >= 0.5 * p_max, i.e. logit >= 3 + ln 0.5
     * = 2.31: tokens 1, 2, 3 */
    s = make(1.0f, 0, 1.0f, 0.5f, 1.0f, 3);
    memset(seen, 0, sizeof seen);
    for (int i = 0; i < 3000; i++) seen[draw(s, logits)]++;
    CHECK(seen[1] > 0 && seen[2] > 0 && seen[3] > 0);
    CHECK_EQ_INT(seen[0] + seen[4] + seen[5] + seen[6] + seen[7], 0);
    kara_sampler_free(s);

    /* repetition penalty: after tokens 1 and 2 were seen, a penalty of 4
     * divides their positive logits (3 -> 0.75), so greedy picks token 3 */
    g = make(0.0f, 0, 1.0f, 0.0f, 4.0f, 1);
    kara_sampler_accept(g, 1);
    kara_sampler_accept(g, 2);
    CHECK_EQ_INT(draw(g, logits), 3);
    kara_sampler_free(g);

    /* the same seed gives the same draws; another seed does not */
    kara_sampler *a = make(1.0f, 0, 1.0f, 0.0f, 1.0f, 1234), *b = make(1.0f, 0, 1.0f, 0.0f, 1.0f, 1234);
    kara_sampler *c = make(1.0f, 0, 1.0f, 0.0f, 1.0f, 4321);
    int same = 0, differ = 0;
    for (int i = 0; i < 200; i++) {
        int32_t ta = draw(a, logits), tb = draw(b, logits);
        same += ta == tb;
        differ += ta != draw(c, logits);
    }
    CHECK_EQ_INT(same, 200);
    CHECK(differ > 50);
    kara_sampler_free(a);
    kara_sampler_free(b);
    kara_sampler_free(c);

    /* bad parameters are refused */
    kara_sampler *bad = NULL;
    CHECK(kara_sampler_create(&(kara_sampler_params){1.0f, 0, 0.0f, 0.0f, 1.0f, 64, 1}, V, &bad) == KARA_ERR_ARG);
    CHECK(bad == NULL);
    CHECK(kara_sampler_create(NULL, 0, &bad) == KARA_ERR_ARG); /* no vocabulary */
    int32_t t;
    CHECK(kara_sampler_sample(NULL, logits, &t) == KARA_ERR_ARG);

    /* a NaN or infinite logit is a model error, greedy or not, and picks nothing */
    for (int k = 0; k < 3; k++) {
        float broken[V];
        memcpy(broken, logits, sizeof broken);
        broken[5] = k == 0 ? NAN : k == 1 ? INFINITY : -INFINITY;
        for (int greedy = 0; greedy <= 1; greedy++) {
            kara_sampler *s = make(greedy ? 0.0f : 0.8f, 40, 0.95f, 0.05f, 1.1f, 3);
            t = 77;
            CHECK_EQ_INT(kara_sampler_sample(s, broken, &t), KARA_ERR_FORMAT);
            CHECK_EQ_INT(t, 77);
            CHECK(strstr(kara_last_error(), "NaN or infinite logits") != NULL);
            kara_sampler_free(s);
        }
    }
    return kr_test_finish();
}
