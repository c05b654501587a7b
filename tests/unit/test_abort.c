/* kara_context_set_abort (issue 17): a kara_decode stopped by the abort
 * callback returns KARA_ERR_ABORTED, leaves no trace of its batch (positions,
 * slots, blocks, logits, the KV policy's state), and decoding the same batch
 * again gives bit for bit what an uninterrupted run gives - with full KV
 * and with Kara compressing every window, stopped at every point the
 * callback is asked (each layer and the output head). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kara.h"
#include "synth_model.h"
#include "test_util.h"
#include "kv_tuning.h"

/* Returns true on its `fire_at`-th call (1-based), counting every call. */
typedef struct abort_counter {
    int calls, fire_at;
} abort_counter;

static bool count_and_fire(void *user) {
    abort_counter *a = user;
    return ++a->calls == a->fire_at;
}

enum { FULL, KARA_PER_WINDOW, KARA_ON_DEMAND };

static kara_context *make_ctx(kara_model *m, int mode) {
    kara_context_params cp;
    kara_context_params_init(&cp);
    cp.n_ctx = 256;
    cp.n_threads = 1;
    cp.kv.method = mode == FULL ? KARA_KV_METHOD_FULL : KARA_KV_METHOD_KARA;
    cp.kv.interval = 8; /* a window every 8 tokens */
    kr_kv_tune(&cp.kv)->buffer = 8;
    if (mode == KARA_PER_WINDOW) { /* half of each window kept */
        kr_kv_tune(&cp.kv)->evict = KARA_KV_EVICT_PER_WINDOW;
        cp.kv.retention = 0.5f;
    } else if (mode == KARA_ON_DEMAND) { /* evict at 64 slots, scores with the reads after a window */
        kr_kv_tune(&cp.kv)->evict = KARA_KV_EVICT_ON_DEMAND;
        cp.kv.seq_tokens = 64;
        kr_kv_tune(&cp.kv)->reads_weight = 1.0f;
    }
    kara_context *c = NULL;
    CHECK_MSG(kara_context_create(m, &cp, &c) == KARA_OK, "context: %s", kara_last_error());
    return c;
}

static int32_t tok_at(int32_t i, int32_t n_vocab) { return (int32_t)((i * 7919u + 13u) % (uint32_t)(n_vocab - 4)) + 3; }

static kara_status decode_range(kara_context *c, int32_t from, int32_t n, int32_t n_vocab) {
    int32_t toks[64];
    for (int32_t i = 0; i < n; i++) toks[i] = tok_at(from + i, n_vocab);
    kara_batch b = kara_batch_one_sequence(toks, n, from, 0);
    return kara_decode(c, &b);
}

/* A prompt, then one long batch stopped at each check point in turn: each
 * stop leaves the sequence, the pool and the logits as before; the retry
 * matches the reference. */
static void test_prefill_stops(kara_model *m, int32_t n_layer) {
    const int32_t n_vocab = kara_model_n_vocab(m);
    kara_context *ref = make_ctx(m, FULL);
    if (!ref) return;
    CHECK(decode_range(ref, 0, 10, n_vocab) == KARA_OK);
    CHECK(decode_range(ref, 10, 40, n_vocab) == KARA_OK);
    const float *want = kara_get_logits(ref, -1);
    for (int32_t fire = 1; fire <= n_layer + 1; fire++) {
        kara_context *c = make_ctx(m, FULL);
        if (!c) break;
        CHECK(decode_range(c, 0, 10, n_vocab) == KARA_OK);
        kara_kv_stats before;
        kara_context_kv_stats(c, &before);
        abort_counter a = {0, fire};
        kara_context_set_abort(c, count_and_fire, &a);
        kara_status st = decode_range(c, 10, 40, n_vocab);
        CHECK_MSG(st == KARA_ERR_ABORTED, "stop at check %d: status %d", fire, st);
        CHECK_MSG(strstr(kara_last_error(), "abort callback") != NULL, "message: %s", kara_last_error());
        CHECK_EQ_INT(kara_seq_n_past(c, 0), 10);
        CHECK_EQ_INT(kara_seq_n_cached(c, 0), 10);
        CHECK(kara_get_logits(c, -1) == NULL);
        kara_kv_stats after;
        kara_context_kv_stats(c, &after);
        CHECK_EQ_INT(after.blocks_free, before.blocks_free);
        CHECK_EQ_INT(after.cache_bytes, before.cache_bytes);
        kara_context_set_abort(c, NULL, NULL);
        CHECK(decode_range(c, 10, 40, n_vocab) == KARA_OK);
        const float *got = kara_get_logits(c, -1);
        CHECK_MSG(got && memcmp(got, want, sizeof(float) * (size_t)n_vocab) == 0,
                  "stop at check %d: the retried batch's logits differ from the uninterrupted run", fire);
        kara_context_free(c);
    }
    kara_context_free(ref);
}

/* Kara with a window every 8 tokens: single-token steps, every third one
 * (the first generated token among them) first stopped at a different
 * check each time and then decoded again, and a 6-token chat turn in the
 * middle stopped the same way. The windows, scores and evictions must come
 * out exactly as without the stops: same logits at every step, same slots
 * kept, same events. */
static void test_decode_stops_with_kara(kara_model *m, int32_t n_layer, int mode) {
    const int32_t n_vocab = kara_model_n_vocab(m);
    kara_context *ref = make_ctx(m, mode), *c = make_ctx(m, mode);
    if (!ref || !c) goto done;
    CHECK(decode_range(ref, 0, 16, n_vocab) == KARA_OK);
    CHECK(decode_range(c, 0, 16, n_vocab) == KARA_OK);
    int stops = 0;
    for (int32_t p = 16; p < 150;) {
        int32_t n = p == 80 ? 6 : 1; /* a later turn's text */
        CHECK(decode_range(ref, p, n, n_vocab) == KARA_OK);
        if (p % 3 == 1 || n > 1) {
            abort_counter a = {0, 1 + (p / 3) % (n_layer + 1)};
            kara_context_set_abort(c, count_and_fire, &a);
            kara_status st = decode_range(c, p, n, n_vocab);
            CHECK_MSG(st == KARA_ERR_ABORTED, "step %d: status %d", p, st);
            CHECK_EQ_INT(kara_seq_n_past(c, 0), p);
            kara_context_set_abort(c, NULL, NULL);
            stops++;
        }
        CHECK(decode_range(c, p, n, n_vocab) == KARA_OK);
        p += n;
        const float *want = kara_get_logits(ref, -1), *got = kara_get_logits(c, -1);
        if (!CHECK_MSG(want && got && memcmp(want, got, sizeof(float) * (size_t)n_vocab) == 0,
                       "step %d: logits differ after stops", p))
            break;
    }
    CHECK_EQ_INT(kara_seq_n_cached(c, 0), kara_seq_n_cached(ref, 0));
    CHECK(kara_seq_n_cached(c, 0) < 150); /* Kara did evict */
    kara_kv_stats sr, sc;
    kara_context_kv_stats(ref, &sr);
    kara_context_kv_stats(c, &sc);
    CHECK_MSG(sr.events == sc.events && sr.slots_evicted == sc.slots_evicted && sr.events > 0,
              "events %llu/%llu, evicted %llu/%llu", (unsigned long long)sc.events, (unsigned long long)sr.events,
              (unsigned long long)sc.slots_evicted, (unsigned long long)sr.slots_evicted);
    CHECK(stops > 40);
done:
    kara_context_free(ref);
    kara_context_free(c);
}

/* The engine: a step stopped by the callback returns KARA_ERR_ABORTED and
 * the next steps finish every request with the same text as without it. */
static void test_engine_stop(kara_model *m) {
    char out[2][512];
    int aborted[2] = {0, 0};
    const int32_t n_vocab = kara_model_n_vocab(m);
    int32_t prompt[2][8];
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 8; i++) prompt[r][i] = tok_at(i + 100 * r, n_vocab);
    for (int run = 0; run < 2; run++) {
        kara_context_params cp;
        kara_context_params_init(&cp);
        cp.n_ctx = 128;
        cp.n_threads = 1;
        cp.n_seq_max = 2;
        cp.kv.method = KARA_KV_METHOD_FULL;
        kara_context *c = NULL;
        if (!CHECK(kara_context_create(m, &cp, &c) == KARA_OK)) return;
        kara_engine_params ep;
        kara_engine_params_init(&ep);
        kara_engine *e = NULL;
        if (!CHECK_MSG(kara_engine_create(c, &ep, &e) == KARA_OK, "engine: %s", kara_last_error())) {
            kara_context_free(c);
            return;
        }
        for (int r = 0; r < 2; r++) {
            kara_engine_request rq;
            kara_engine_request_init(&rq);
            rq.id = (uint64_t)r;
            rq.prompt = prompt[r];
            rq.n_prompt = 8;
            rq.max_tokens = 12;
            rq.ignore_eog = true;
            rq.sampling.temperature = 0;
            CHECK(kara_engine_submit(e, &rq) == KARA_OK);
        }
        abort_counter a = {0, 2};
        kara_context_set_abort(c, run ? count_and_fire : NULL, &a);
        size_t len = 0;
        out[run][0] = '\0';
        for (int step = 0; step < 200; step++) {
            kara_status st = kara_engine_step(e);
            if (st == KARA_DONE) break;
            if (st == KARA_ERR_ABORTED) { /* the same step again, unstopped */
                aborted[run]++;
                kara_context_set_abort(c, NULL, NULL);
                continue;
            }
            if (!CHECK_MSG(st == KARA_OK, "engine step: %s", kara_last_error())) break;
            kara_engine_event ev;
            while (kara_engine_next_event(e, &ev)) {
                int n = ev.kind == KARA_ENGINE_TEXT ? snprintf(out[run] + len, sizeof out[run] - len, "[%llu]%.*s",
                                                               (unsigned long long)ev.id, (int)ev.len, ev.text)
                                                    : snprintf(out[run] + len, sizeof out[run] - len, "[%llu done %d]",
                                                               (unsigned long long)ev.id, ev.n_generated);
                if (n > 0 && (size_t)n < sizeof out[run] - len) len += (size_t)n;
            }
            if (run && aborted[run] < 4) { /* stop the next step too, at its second check */
                a.calls = 0;
                kara_context_set_abort(c, count_and_fire, &a);
            }
        }
        kara_engine_free(e);
        kara_context_free(c);
    }
    CHECK_EQ_INT(aborted[0], 0);
    CHECK_MSG(aborted[1] >= 3, "the engine saw %d stopped steps", aborted[1]);
    CHECK_MSG(strstr(out[0], "done 12") != NULL, "engine output: %s", out[0]);
    CHECK_MSG(!strcmp(out[0], out[1]), "engine text with stopped steps '%s' differs from '%s'", out[1], out[0]);
}

int main(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/abort.gguf", kr_test_tmpdir());
    kr_synth_params sp;
    kr_synth_params_init(&sp);
    kr_synth_preset(&sp, "tiny");
    char err[256];
    kara_model *m = NULL;
    if (CHECK_MSG(kr_synth_write(&sp, path, NULL, NULL, err, sizeof err) == KARA_OK, "synth: %s", err) &&
        CHECK(kara_model_load(path, NULL, &m) == KARA_OK)) {
        test_prefill_stops(m, sp.n_layer);
        test_decode_stops_with_kara(m, sp.n_layer, KARA_PER_WINDOW);
        test_decode_stops_with_kara(m, sp.n_layer, KARA_ON_DEMAND);
        test_engine_stop(m);
    }
    kara_model_free(m);
    return kr_test_finish();
}
