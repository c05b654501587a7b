/* test_kv_method_registry.c - a KV method is one table (kv_method.h): one
 * registered from this file, and nowhere else, runs through kara_decode.
 * It fires at its token budget like the threshold baselines but keeps
 * every slot, so on a synthetic Qwen3 model its logits must equal full's
 * bit for bit over 300 greedy steps, while its hooks run: the plan
 * reserves what its reserve hook asked for, its cache event runs at every
 * step past the budget, its name is the one kara_kv_method_name gives,
 * and its settings check refuses a bad configuration at context creation.
 * The registry also names every built-in method, each with its id, and
 * the ones a device can run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context.h"
#include "kv_method.h"
#include "kv_params.h"
#include "kv_policy_impl.h"
#include "status.h"
#include "test_models.h"
#include "test_util.h"
#include "kv_tuning.h"

#define N_CTX 512
#define P 6
#define STEPS 300
#define SHARE 64
static const int32_t prompt[P] = {1, 17, 33, 49, 65, 81};

static int events_seen, checks_seen;

static kr_kv_kind kind(const kara_kv_params *p) {
    (void)p;
    return KR_KV_AT_BUDGET;
}

/* Refuses a share of 77 slots: the test's way to see the hook run. */
static kara_status check(const kara_kv_params *p) {
    checks_seen++;
    return p->seq_tokens == 77 ? kr_set_error(KARA_ERR_CONFIG, "test_keep_all: a share of 77") : KARA_OK;
}

static void reserve(kr_kv_reservation *s, const kara_kv_params *p, int32_t n_layer, int32_t max_slots) {
    (void)p;
    (void)n_layer;
    s->score_n = max_slots;
}

static int32_t protects(const kara_kv_params *p, int32_t front) {
    (void)p;
    return front;
}

static bool keeps_prompt(const kara_kv_params *p) {
    (void)p;
    return true;
}

/* Every slot stays: the selection is the whole cache. */
static kara_status cache_event(kr_kv_policy *pol, int32_t seq) {
    int32_t n = pol->kv->seqs[seq].n;
    for (int32_t j = 0; j < n; j++) pol->keep[j] = j;
    events_seen++;
    return kr_kvp_cache_keep(pol, seq, KARA_OK, n);
}

static const kr_kv_method keep_all = {.name = "test_keep_all",
                                      .kind = kind,
                                      .check = check,
                                      .reserve = reserve,
                                      .protects = protects,
                                      .keeps_prompt = keeps_prompt,
                                      .cache_event = cache_event};

/* Greedy steps after the prompt; logits of each step into out. */
static bool run(kara_model *m, const kara_kv_params *kv, float *out, uint64_t *events, uint64_t *reserved) {
    int V = kara_model_n_vocab(m);
    kara_context *c = kr_test_kv_context(m, kv, 1, 1, N_CTX);
    if (!CHECK_MSG(c != NULL, "context: %s", kara_last_error())) return false;
    kara_batch b = kara_batch_one_sequence(prompt, P, 0, 0);
    bool ok = CHECK_MSG(kara_decode(c, &b) == KARA_OK, "prompt: %s", kara_last_error());
    for (int i = 0; ok && i < STEPS; i++) {
        const float *l = kara_get_logits(c, -1);
        memcpy(out + (size_t)i * V, l, (size_t)V * sizeof(float));
        int32_t tok = kr_test_argmax(l, V);
        kara_batch nb = kara_batch_one_sequence(&tok, 1, P + i, 0);
        ok = CHECK_MSG(kara_decode(c, &nb) == KARA_OK, "step %d: %s", i, kara_last_error());
    }
    *events = c->policy.stats.events;
    *reserved = c->policy.plan.reserved_bytes;
    CHECK_EQ_INT(c->policy.stats.slots_evicted, 0);
    kara_context_free(c);
    return ok;
}

static void test_builtins(void) {
    static const char *names[] = {"full",   "streaming", "snapkv", "h2o", "chunkkv",
                                  "random", "recent",    "kara",   "rkv", "lazy"};
    for (int i = 0; i <= KARA_KV_METHOD_LAZY; i++) {
        const kr_kv_method *m = kr_kv_method_get(i);
        if (!CHECK_MSG(m != NULL, "method %d has no table", i)) continue;
        CHECK_MSG(!strcmp(m->name, names[i]) && !strcmp(kara_kv_method_name((kara_kv_method)i), names[i]),
                  "method %d is %s, expected %s", i, m->name, names[i]);
        kara_kv_method back = (kara_kv_method)-1;
        CHECK_EQ_INT(kara_kv_method_parse(names[i], &back), KARA_OK);
        CHECK_EQ_INT(back, i);
        /* a window method selects, an at-budget one has an event */
        kara_kv_params p;
        kara_kv_params_init(&p);
        p.method = (kara_kv_method)i;
        kr_kv_kind k = m->kind(&p);
        CHECK_MSG(k == KR_KV_KEEPS_ALL || (k == KR_KV_WINDOWS) == (m->select_window != NULL),
                  "%s: kind and hooks disagree", m->name);
        CHECK_MSG(k != KR_KV_AT_BUDGET || m->cache_event != NULL, "%s: no cache event", m->name);
    }
    CHECK(kr_kv_method_get(-1) == NULL);
    /* what a device that holds the pool can run, from the tables: neither
     * h2o nor lazy (attention summed by the CPU) nor rkv (host-only scorer) */
    char dev[160];
    kr_kv_methods_on_device(dev, sizeof dev);
    CHECK_MSG(!strcmp(dev, "full, streaming, snapkv, chunkkv, random, recent, kara, prior_recent"), "on a device: %s",
              dev);
}

/* The row of a key in kara_config_key's order, -1 when absent. */
static int key_index(const char *key) {
    for (int i = 0; kara_config_key(i); i++)
        if (!strcmp(kara_config_key(i), key)) return i;
    return -1;
}

/* Each method's keys are declared by its method's file (a baseline's
 * under baselines.<name>, kara's under kara.score and kara.t2c) and reach
 * the schema from the registry, each method's together, after the core
 * rows of their section; none is left out, and their defaults come from
 * there. */
static void test_method_keys(void) {
    int n = 0;
    while (kara_config_key(n)) n++;
    CHECK(n <= KARA_CONFIG_MAX_KEYS);
    CHECK(!strcmp(kara_config_key(n - 1), "batch.shard"));
    int owners = 0, last_baseline = -1;
    for (int m = 0; kr_kv_method_get(m); m++) {
        const kr_kv_method *meth = kr_kv_method_get(m);
        if (meth->n_keys > 0) owners++;
        int at = -1;
        for (int i = 0; i < meth->n_keys; i++) {
            const char *key = meth->keys[i].key;
            char want[64];
            snprintf(want, sizeof want, "baselines.%s.", meth->name);
            bool kara = !strcmp(meth->name, "kara");
            CHECK_MSG(kara ? !strncmp(key, "kara.score.", 11) || !strncmp(key, "kara.t2c.", 9)
                           : !strncmp(key, want, strlen(want)),
                      "%s is not under %s", key, kara ? "kara.score or kara.t2c" : want);
            CHECK_MSG(meth->keys[i].help && meth->keys[i].help[0], "%s has no help", key);
            at = at < 0 ? key_index(key) : at + 1;
            CHECK_MSG(kara_config_key(at) && !strcmp(kara_config_key(at), key), "%s is not row %d", key, at);
            if (!kara) last_baseline = at;
        }
    }
    CHECK_EQ_INT(owners, 8); /* kara streaming snapkv h2o chunkkv random rkv lazy */
    CHECK(!strcmp(kara_config_key(last_baseline + 1), "chat.template"));
    CHECK(!strcmp(kara_config_key(key_index("kara.score.mode") - 1), "kara.on_pool_exhausted"));
    kara_kv_params kv;
    kara_kv_params_init(&kv);
    CHECK_EQ_INT(kr_kv_tune(&kv)->snapkv.kernel, 7);
    CHECK(kr_kv_tune(&kv)->lazy.alpha == 1e-4f);
    CHECK(kr_kv_tune(&kv)->random.seed == 0x4b415241u);
    CHECK_EQ_INT(kr_kv_tune(&kv)->t2c_mode, KR_T2C_LINE_TAILS);
    CHECK(kr_kv_tune(&kv)->prior_weight == -1.0f);
}

/* What the tools learn of a method from its table, never from its name:
 * whether it compresses, at a budget or over windows, and the keys of its
 * slack and of the newest slots it keeps. */
static void test_method_info(int id) {
    kara_kv_method_info info;
    CHECK_EQ_INT(kara_kv_method_info_get(KARA_KV_METHOD_SNAPKV, &info), KARA_OK);
    CHECK(!strcmp(info.name, "snapkv") && info.compresses && info.at_budget);
    CHECK(!strcmp(info.slack_key, "baselines.snapkv.trigger_slack"));
    CHECK(!strcmp(info.tail_key, "baselines.snapkv.obs_window"));
    CHECK_EQ_INT(kara_kv_method_info_get(KARA_KV_METHOD_LAZY, &info), KARA_OK);
    CHECK(info.at_budget && !strcmp(info.slack_key, "baselines.lazy.window") && !strcmp(info.tail_key, info.slack_key));
    CHECK_EQ_INT(kara_kv_method_info_get(KARA_KV_METHOD_H2O, &info), KARA_OK);
    CHECK(info.at_budget && !info.slack_key && !info.tail_key);
    CHECK_EQ_INT(kara_kv_method_info_get(KARA_KV_METHOD_KARA, &info), KARA_OK);
    CHECK(info.compresses && !info.at_budget && !info.slack_key); /* trigger periodic by default */
    CHECK_EQ_INT(kara_kv_method_info_get(KARA_KV_METHOD_FULL, &info), KARA_OK);
    CHECK(!info.compresses && !info.at_budget);
    CHECK_EQ_INT(kara_kv_method_info_get((kara_kv_method)id, &info), KARA_OK);
    CHECK(!strcmp(info.name, "test_keep_all") && info.at_budget);
    CHECK_EQ_INT(kara_kv_method_info_get((kara_kv_method)(id + 1), &info), KARA_ERR_ARG);
    char want[64];
    snprintf(want, sizeof want, "kara_kv_method_info_get: no KV method has id %d", id + 1);
    CHECK(!strcmp(kara_last_error(), want));
    kr_test_clear_error();
}

int main(void) {
    test_builtins();
    test_method_keys(); /* before a method of the test is registered */
    int id = kr_kv_method_register(&keep_all);
    if (!CHECK(id > KARA_KV_METHOD_LAZY)) return kr_test_finish();
    CHECK(kr_kv_method_get(id) == &keep_all);
    CHECK(!strcmp(kara_kv_method_name((kara_kv_method)id), "test_keep_all"));
    test_method_info(id);

    kara_model *m = kr_test_synth_model("tiny", "qwen3", 45, 2048, "tiny-qwen3-registry.gguf");
    if (!CHECK(m != NULL)) return kr_test_finish();
    int V = kara_model_n_vocab(m);
    float *ref = malloc((size_t)STEPS * V * sizeof(float)), *got = malloc((size_t)STEPS * V * sizeof(float));
    kara_kv_params full, mine;
    kara_kv_params_init(&full);
    full.method = KARA_KV_METHOD_FULL;
    kara_kv_params_init(&mine);
    mine.method = (kara_kv_method)id;
    mine.seq_tokens = SHARE;
    uint64_t ev_full = 0, ev_mine = 0, res_full = 0, res_mine = 0;
    if (ref && got && run(m, &full, ref, &ev_full, &res_full) && run(m, &mine, got, &ev_mine, &res_mine)) {
        CHECK_MSG(!memcmp(ref, got, (size_t)STEPS * V * sizeof(float)),
                  "the registered method's logits differ from full's");
        CHECK_EQ_INT(ev_full, 0);
        /* budget_tokens = SHARE - 1: an event at every step once the cache holds SHARE slots */
        CHECK_EQ_INT(ev_mine, P + STEPS - SHARE + 1);
        CHECK_EQ_INT(events_seen, (int)ev_mine);
        CHECK_EQ_INT(res_full, 0);
        CHECK_MSG(res_mine > 0, "the plan reserved nothing for the registered method");
    }
    /* its check runs at context creation */
    int before = checks_seen;
    mine.seq_tokens = 77;
    kara_context *bad = kr_test_kv_context(m, &mine, 1, 1, N_CTX);
    CHECK(bad == NULL);
    CHECK(strstr(kara_last_error(), "test_keep_all: a share of 77") != NULL);
    CHECK(checks_seen > before);
    kr_test_clear_error();
    free(ref);
    free(got);
    kara_model_free(m);
    return kr_test_finish();
}
