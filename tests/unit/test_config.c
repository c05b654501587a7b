/* test_config.c - the YAML configuration: defaults, shipped files, every
 * error class with its exact FILE:LINE:COL, flag overrides with origins,
 * and format -> load round trips. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_config.h"
#include "kara.h"
#include "test_util.h"
#include "kv_params.h"
#include "kv_tuning.h"

static const char *write_tmp(const char *name, const char *text) {
    const char *path = kr_test_path(kr_test_tmpdir(), name);
    FILE *f = fopen(path, "wb");
    if (!f) return path;
    fputs(text, f);
    fclose(f);
    return path;
}

static int n_keys(void) {
    int n = 0;
    while (kara_config_key(n)) n++;
    return n;
}

/* Every key's value as text, and the value part of the struct byte for byte. */
static bool same_values(const kara_config *a, const kara_config *b) {
    bool ok = true;
    for (int i = 0; kara_config_key(i); i++) {
        char va[2048], vb[2048];
        const char *k = kara_config_key(i);
        kara_config_get(a, k, va, sizeof va);
        kara_config_get(b, k, vb, sizeof vb);
        if (strcmp(va, vb)) {
            fprintf(stderr, "  %s differs: '%s' vs '%s'\n", k, va, vb);
            ok = false;
        }
    }
    if (memcmp(a, b, offsetof(kara_config, origin))) {
        fprintf(stderr, "  the value bytes differ\n");
        ok = false;
    }
    return ok;
}

static void test_defaults(void) {
    kara_config c;
    kara_config_init(&c);
    const kara_kv_params *kv = &c.context.kv;
    /* docs/KARA_METHOD.md section 12 */
    CHECK_EQ_INT(kv->block_size, 16);
    CHECK_EQ_INT(kv->dtype, KARA_KV_F16);
    CHECK(kv->budget == 1073741824ULL);
    CHECK_EQ_INT(kr_kv_tune(kv)->reserve_blocks, 8);
    CHECK_EQ_INT(kv->method, KARA_KV_METHOD_KARA);
    CHECK_EQ_INT(kv->interval, 128);
    CHECK_EQ_INT(kr_kv_tune(kv)->buffer, 128);
    CHECK_NEAR(kv->retention, 0.2, 1e-7);
    CHECK_EQ_INT(kr_kv_tune(kv)->min_keep, 4);
    CHECK_EQ_INT(kr_kv_tune(kv)->min_compressible, 32);
    CHECK_EQ_INT(kr_kv_tune(kv)->max_compress_per_step, 0);
    CHECK_EQ_INT(kr_kv_tune(kv)->max_defer, 32);
    CHECK(!kr_kv_tune(kv)->think_only);
    CHECK_EQ_INT(kr_kv_tune(kv)->n_protect_token_ids, 0);
    CHECK_EQ_INT(kr_kv_tune(kv)->query_cache_dtype, KARA_KV_Q8_0);
    CHECK(!kr_kv_tune(kv)->per_layer_selection);
    CHECK(!kr_kv_tune(kv)->rerotate_keys);
    CHECK_EQ_INT(kr_kv_tune(kv)->on_pool_exhausted, KARA_POOL_PREEMPT);
    CHECK_EQ_INT(kr_kv_tune(kv)->trigger, KARA_KV_TRIGGER_PERIODIC);
    CHECK_EQ_INT(kr_kv_tune(kv)->trigger_slack, 0);
    CHECK_EQ_INT(kr_kv_tune(kv)->score_mode, KR_SCORE_BIDIRECTIONAL);
    CHECK_EQ_INT(kr_kv_tune(kv)->softmax_over, KR_SOFTMAX_WINDOW);
    CHECK_EQ_INT(kr_kv_tune(kv)->n_sink, 4);
    CHECK(kr_kv_tune(kv)->exclude_self);
    CHECK_EQ_INT(kr_kv_tune(kv)->gqa_reduce, KR_REDUCE_MEAN);
    CHECK_EQ_INT(kr_kv_tune(kv)->layer_reduce, KR_REDUCE_MEAN);
    CHECK_EQ_INT(kr_kv_tune(kv)->layer_stride, 1);
    CHECK_NEAR(kr_kv_tune(kv)->candidate_frac, 0.5, 0);
    CHECK_EQ_INT(kr_kv_tune(kv)->max_gap, 16);
    CHECK_NEAR(kr_kv_tune(kv)->len_penalty, 1.0, 0);
    CHECK_EQ_INT(kr_kv_tune(kv)->budget_tokens, 0);
    CHECK_EQ_INT(kr_kv_tune(kv)->streaming.n_sink, 4);
    CHECK_EQ_INT(kr_kv_tune(kv)->snapkv.trigger_slack, 128);
    CHECK_EQ_INT(kr_kv_tune(kv)->snapkv.obs_window, 8);
    CHECK_EQ_INT(kr_kv_tune(kv)->snapkv.pool, KR_REDUCE_MAX);
    CHECK_EQ_INT(kr_kv_tune(kv)->snapkv.kernel, 7);
    CHECK(kr_kv_tune(kv)->snapkv.protect_prompt);
    CHECK_NEAR(kr_kv_tune(kv)->h2o.heavy_frac, 0.5, 0);
    CHECK_EQ_INT(kr_kv_tune(kv)->chunkkv.chunk_len, 10);
    CHECK_EQ_INT(kr_kv_tune(kv)->rkv.trigger_slack, 128);
    CHECK_EQ_INT(kr_kv_tune(kv)->rkv.obs_window, 8);
    CHECK_EQ_INT(kr_kv_tune(kv)->rkv.kernel, 7);
    CHECK_NEAR(kr_kv_tune(kv)->rkv.lambda, 0.1, 1e-7);
    CHECK_NEAR(kr_kv_tune(kv)->rkv.sim_threshold, 0.5, 0);
    CHECK(kr_kv_tune(kv)->rkv.protect_prompt);
    CHECK_EQ_INT(kr_kv_tune(kv)->lazy.window, 128);
    CHECK_NEAR(kr_kv_tune(kv)->lazy.alpha, 1e-4, 1e-9);
    CHECK(kr_kv_tune(kv)->lazy.protect_prompt);
    /* the rest of the job */
    CHECK_EQ_INT(c.context.n_ctx, 0);
    CHECK_EQ_INT(c.context.n_batch, 512);
    CHECK_EQ_INT(c.context.n_seq_max, 1);
    CHECK_EQ_INT(c.context.n_threads, 0);
    CHECK_NEAR(c.sampling.temperature, 0.8, 1e-7);
    CHECK_EQ_INT(c.sampling.top_k, 40);
    CHECK_EQ_INT(c.max_tokens, -1);
    CHECK(!strcmp(c.model_path, "") && !strcmp(c.chat_template, "auto"));
    CHECK_EQ_INT(c.think, KARA_THINK_AUTO);
    CHECK_EQ_INT(c.reasoning_budget, -1);
    CHECK_EQ_INT(c.shard_index, 0);
    CHECK_EQ_INT(c.shard_count, 1);

    /* kara_kv_params_init alone gives the same as the config's kv */
    kara_kv_params kv2;
    memset(&kv2, 0xa5, sizeof kv2);
    kara_kv_params_init(&kv2);
    CHECK(!memcmp(&kv2, kv, sizeof kv2));

    /* the schema: unique keys, each with a readable value and origin "default" */
    int n = n_keys();
    CHECK(n >= 55 && n <= KARA_CONFIG_MAX_KEYS);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < i; j++)
            CHECK_MSG(strcmp(kara_config_key(i), kara_config_key(j)), "dup %s", kara_config_key(i));
        char v[2048];
        CHECK_EQ_INT(kara_config_get(&c, kara_config_key(i), v, sizeof v), KARA_OK);
        CHECK(!strcmp(kara_config_origin(&c, kara_config_key(i)), "default"));
    }
    CHECK(kara_config_key(-1) == NULL && kara_config_key(n) == NULL);
    CHECK(kara_config_origin(&c, "kara.nope") == NULL);
}

static void test_enum_names(void) {
    for (int m = KARA_KV_METHOD_FULL; m <= KARA_KV_METHOD_LAZY; m++) {
        kara_kv_method back = (kara_kv_method)-1;
        CHECK_EQ_INT(kara_kv_method_parse(kara_kv_method_name((kara_kv_method)m), &back), KARA_OK);
        CHECK_EQ_INT(back, m);
    }
    CHECK(!strcmp(kara_kv_method_name(KARA_KV_METHOD_SNAPKV), "snapkv"));
    CHECK(!strcmp(kara_kv_method_name(KARA_KV_METHOD_RKV), "rkv"));
    CHECK(!strcmp(kara_kv_method_name(KARA_KV_METHOD_LAZY), "lazy"));
    CHECK(!strcmp(kara_kv_method_name((kara_kv_method)99), "?"));
    kara_kv_method keep = KARA_KV_METHOD_H2O;
    CHECK_EQ_INT(kara_kv_method_parse("Kara", &keep), KARA_ERR_ARG);
    CHECK_EQ_INT(keep, KARA_KV_METHOD_H2O);
    CHECK_MSG(
        !strcmp(
            kara_last_error(),
            "unknown KV method 'Kara' (expected full | streaming | snapkv | h2o | chunkkv | random | recent | kara | "
            "rkv | lazy | prior_recent)"),
        "got '%s'", kara_last_error());
    kara_kv_dtype dt;
    CHECK_EQ_INT(kara_kv_dtype_parse("f32", &dt), KARA_OK);
    CHECK_EQ_INT(dt, KARA_KV_F32);
    CHECK_EQ_INT(kara_kv_dtype_parse("q8_0", &dt), KARA_OK);
    CHECK_EQ_INT(dt, KARA_KV_Q8_0);
    CHECK_EQ_INT(kara_kv_dtype_parse("q4_0", &dt), KARA_OK);
    CHECK_EQ_INT(dt, KARA_KV_Q4_0);
    CHECK(!strcmp(kara_kv_dtype_name(KARA_KV_Q4_0), "q4_0"));
    CHECK_EQ_INT(kara_kv_dtype_parse("q5_1", &dt), KARA_ERR_ARG);
    CHECK_MSG(!strcmp(kara_last_error(), "unknown KV dtype 'q5_1' (expected f16 | f32 | q8_0 | q4_0)"), "got '%s'",
              kara_last_error());
    kr_score_mode sm;
    CHECK_EQ_INT(kr_score_mode_parse("two_sided", &sm), KARA_OK);
    CHECK_EQ_INT(sm, KR_SCORE_TWO_SIDED);
    CHECK(!strcmp(kr_score_mode_name(KR_SCORE_BUFFER_ONLY), "buffer_only"));
}

static void test_shipped_configs(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/configs", KARA_SOURCE_DIR);
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "cannot open %s", dir);
    if (!d) return;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".yaml")) continue;
        /* Kubernetes manifests shipped beside the configurations (examples
         * for spreading a batch job) are not Kara configurations */
        char *text = kr_test_read_file(kr_test_path(dir, e->d_name), NULL);
        bool manifest = text && strstr(text, "\napiVersion:") != NULL;
        free(text);
        if (manifest) continue;
        kara_config c;
        kara_config_init(&c);
        kara_status st = kara_config_load(&c, kr_test_path(dir, e->d_name));
        CHECK_MSG(st == KARA_OK, "%s: %s", e->d_name, kara_last_error());
        n++;
    }
    closedir(d);
    CHECK_MSG(n >= 5, "found %d shipped configs", n);

    /* default.yaml names every key, each with its built-in default */
    kara_config def, c;
    kara_config_init(&def);
    kara_config_init(&c);
    const char *path = kr_test_path(dir, "default.yaml");
    CHECK_EQ_INT(kara_config_load(&c, path), KARA_OK);
    CHECK(same_values(&def, &c));
    for (int i = 0; kara_config_key(i); i++) {
        const char *o = kara_config_origin(&c, kara_config_key(i));
        CHECK_MSG(!strncmp(o, path, strlen(path)) && o[strlen(path)] == ':', "default.yaml lacks %s (origin %s)",
                  kara_config_key(i), o);
    }

    /* the schema document lists every key */
    char *readme = kr_test_read_file(kr_test_path(dir, "README.md"), NULL);
    CHECK(readme != NULL);
    for (int i = 0; readme && kara_config_key(i); i++) {
        char quoted[128];
        snprintf(quoted, sizeof quoted, "`%s`", kara_config_key(i));
        CHECK_MSG(strstr(readme, quoted) != NULL, "configs/README.md lacks %s", quoted);
    }
    free(readme);

    /* presets carry the model cards' sampling settings */
    kara_config_init(&c);
    path = kr_test_path(dir, "qwen3-thinking.yaml");
    CHECK_EQ_INT(kara_config_load(&c, path), KARA_OK);
    CHECK_NEAR(c.sampling.temperature, 0.6, 1e-7);
    CHECK_NEAR(c.sampling.top_p, 0.95, 1e-7);
    CHECK_EQ_INT(c.sampling.top_k, 20);
    CHECK_NEAR(c.sampling.min_p, 0.0, 0);
    CHECK_EQ_INT(c.think, KARA_THINK_ON);
    char want[1200];
    snprintf(want, sizeof want, "%s:14:16", path); /* "  temperature: 0.6" on line 14 */
    CHECK_MSG(!strcmp(kara_config_origin(&c, "sampling.temperature"), want), "origin %s",
              kara_config_origin(&c, "sampling.temperature"));
    CHECK(!strcmp(kara_config_origin(&c, "sampling.repeat_last_n"), "default"));

    kara_config_init(&c);
    CHECK_EQ_INT(kara_config_load(&c, kr_test_path(dir, "qwen3-nothink.yaml")), KARA_OK);
    CHECK_NEAR(c.sampling.temperature, 0.7, 1e-7);
    CHECK_NEAR(c.sampling.top_p, 0.8, 1e-7);
    CHECK_EQ_INT(c.sampling.top_k, 20);
    CHECK_NEAR(c.sampling.min_p, 0.0, 0);
    CHECK_EQ_INT(c.think, KARA_THINK_OFF);

    kara_config_init(&c);
    CHECK_EQ_INT(kara_config_load(&c, kr_test_path(dir, "deepseek-r1.yaml")), KARA_OK);
    CHECK_NEAR(c.sampling.temperature, 0.6, 1e-7);
    CHECK_NEAR(c.sampling.top_p, 0.95, 1e-7);

    /* layering: a KV file on top of a preset keeps the preset's sampling */
    CHECK_EQ_INT(kara_config_load(&c, kr_test_path(dir, "kv-kara-20.yaml")), KARA_OK);
    CHECK_NEAR(c.sampling.temperature, 0.6, 1e-7);
    CHECK_EQ_INT(c.context.kv.method, KARA_KV_METHOD_KARA);
    CHECK_NEAR(c.context.kv.retention, 0.2, 1e-7);
    CHECK(c.context.kv.budget == 256ULL << 20);
}

/* Load text from a file and expect status st with the message
 * "<path>:<where>" exactly. */
static void expect_error(const char *name, const char *text, kara_status st, const char *where) {
    const char *path = write_tmp(name, text);
    kara_config c, before;
    kara_config_init(&c);
    CHECK_EQ_INT(kara_config_set(&c, "sampling.top_k", "7", "--top-k"), KARA_OK);
    before = c;
    kara_status got = kara_config_load(&c, path);
    CHECK_MSG(got == st, "%s: status %d, want %d (%s)", name, got, st, kara_last_error());
    char want[2048];
    snprintf(want, sizeof want, "%s:%s", path, where);
    CHECK_MSG(!strcmp(kara_last_error(), want), "%s:\n   got  '%s'\n   want '%s'", name, kara_last_error(), want);
    CHECK_MSG(!memcmp(&c, &before, sizeof c), "%s: a failed load changed the config", name);
}

static void test_errors(void) {
    expect_error("unknown.yaml", "sampling:\n  temperature: 0.5\n  tmperature: 0.3\n", KARA_ERR_CONFIG,
                 "3:3: unknown key 'sampling.tmperature' (did you mean 'sampling.temperature'?)");
    expect_error("misplaced.yaml", "kara:\n  block_size: 32\n", KARA_ERR_CONFIG,
                 "2:3: unknown key 'kara.block_size' (did you mean 'kv_cache.block_size'?)");
    expect_error("unknown_section.yaml", "# comment\nsamplers:\n  top_k: 3\n", KARA_ERR_CONFIG,
                 "2:1: unknown key 'samplers' (did you mean 'sampling'?)");
    expect_error("unknown_flow.yaml", "baselines:\n  snapkv: {obs_window: 8, kernal: 5}\n", KARA_ERR_CONFIG,
                 "2:27: unknown key 'baselines.snapkv.kernal' (did you mean 'baselines.snapkv.kernel'?)");
    { /* every unknown key at once, in file order; nothing changes */
        const char *path =
            write_tmp("two_unknown.yaml", "sampling:\n  tmperature: 0.3\n  top_k: 5\nkara:\n  retenton: 1\n");
        kara_config c;
        kara_config_init(&c);
        CHECK_EQ_INT(kara_config_load(&c, path), KARA_ERR_CONFIG);
        char want[1024];
        snprintf(want, sizeof want,
                 "%s:2:3: unknown key 'sampling.tmperature' (did you mean 'sampling.temperature'?); %s:5:3: unknown "
                 "key 'kara.retenton' (did you mean 'kara.retention'?)",
                 path, path);
        CHECK_MSG(!strcmp(kara_last_error(), want), "got '%s'", kara_last_error());
        CHECK_EQ_INT(c.sampling.top_k, 40);
    }
    expect_error("type.yaml", "kara:\n  interval: often\n", KARA_ERR_CONFIG,
                 "2:13: kara.interval: expected an integer, got 'often'");
    expect_error("type_float.yaml", "kara:\n  retention: 20%\n", KARA_ERR_CONFIG,
                 "2:14: kara.retention: expected a number, got '20%'");
    expect_error("type_bool.yaml", "kara:\n  rerotate_keys: maybe\n", KARA_ERR_CONFIG,
                 "2:18: kara.rerotate_keys: expected true or false, got 'maybe'");
    expect_error("type_map.yaml", "sampling:\n  seed:\n    value: 1\n", KARA_ERR_CONFIG,
                 "3:5: sampling.seed: expected a non-negative integer or -1 (random), got a mapping");
    expect_error("type_list.yaml", "kara:\n  protect_token_ids: [1, x]\n", KARA_ERR_CONFIG,
                 "2:26: kara.protect_token_ids: expected an integer in the list, got 'x'");
    expect_error("type_section.yaml", "kara: 5\n", KARA_ERR_CONFIG,
                 "1:7: 'kara' is a section and needs keys below it, got a value");
    expect_error("type_missing.yaml", "kara:\n  interval:\n", KARA_ERR_CONFIG,
                 "2:12: kara.interval: missing value (expected an integer)");
    expect_error(
        "unit.yaml", "kv_cache:\n  budget: 12 parsecs\n", KARA_ERR_CONFIG,
        "2:11: kv_cache.budget: unknown size unit 'parsecs' in '12 parsecs' (expected B, KB, KiB, MB, MiB, GB or GiB)");
    expect_error("unit_nonumber.yaml", "kv_cache:\n  budget: lots\n", KARA_ERR_CONFIG,
                 "2:11: kv_cache.budget: expected a size such as 256MiB, got 'lots'");
    expect_error("range.yaml", "kara:\n  interval: 64\n  retention: 1.5\n", KARA_ERR_CONFIG,
                 "3:14: kara.retention: 1.5 is out of range [0, 1]");
    expect_error("range_int.yaml", "kv_cache:\n    block_size: 0\n", KARA_ERR_CONFIG,
                 "2:17: kv_cache.block_size: 0 is out of range [1, 4096]");
    expect_error("range_list.yaml",
                 "kara:\n  protect_token_ids: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]\n",
                 KARA_ERR_CONFIG, "2:78: kara.protect_token_ids: too many entries (at most 16)");
    expect_error("enum.yaml", "kv_cache:\n  method: fast\n", KARA_ERR_CONFIG,
                 "2:11: kv_cache.method: unknown value 'fast' (expected full | streaming | snapkv | h2o | chunkkv | "
                 "random | recent | kara | rkv | lazy | prior_recent)");
    expect_error("enum_nested.yaml", "kara:\n  score:\n    gqa_reduce: normalized_mean\n", KARA_ERR_CONFIG,
                 "3:17: kara.score.gqa_reduce: unknown value 'normalized_mean' (expected mean | max)");
    expect_error("enum_trigger.yaml", "kv_cache:\n  method: kara\nkara:\n  trigger: sometimes\n", KARA_ERR_CONFIG,
                 "4:12: kara.trigger: unknown value 'sometimes' (expected periodic | threshold)");
    expect_error("range_trigger_slack.yaml", "kara:\n  trigger: threshold\n  trigger_slack: 0\n", KARA_ERR_CONFIG,
                 "3:18: kara.trigger_slack: 0 is out of range [1, 1048576]");
    expect_error("range_rkv.yaml", "baselines:\n  rkv:\n    lambda: 1.5\n", KARA_ERR_CONFIG,
                 "3:13: baselines.rkv.lambda: 1.5 is out of range [0, 1]");
    expect_error("range_lazy.yaml", "baselines:\n  lazy:\n    window: 0\n", KARA_ERR_CONFIG,
                 "3:13: baselines.lazy.window: 0 is out of range [1, 1048576]");
    expect_error("enum_layers.yaml", "kara:\n  score:\n    layers: every:2\n", KARA_ERR_CONFIG,
                 "3:13: kara.score.layers: expected all or stride:N, got 'every:2'");
    expect_error("dup.yaml", "sampling:\n  top_k: 10\n  top_p: 0.9\n  top_k: 20\n", KARA_ERR_CONFIG,
                 "4:3: duplicate key 'sampling.top_k' (first given at line 2, column 3)");
    expect_error("dup_section.yaml", "kara:\n  interval: 64\nsampling:\n  top_k: 1\nkara:\n  buffer: 8\n",
                 KARA_ERR_CONFIG, "5:1: duplicate key 'kara' (first given at line 1, column 1)");
    expect_error("two_docs.yaml", "kara:\n  buffer: 8\n---\nkara:\n  buffer: 9\n", KARA_ERR_CONFIG,
                 "4:1: only one YAML document is allowed");
    expect_error("not_map.yaml", "- kara\n", KARA_ERR_CONFIG,
                 "1:1: the top level must be a mapping of sections (model:, sampling:, ...)");
    expect_error("shard.yaml", "batch:\n  shard: 5/4\n", KARA_ERR_CONFIG,
                 "2:10: batch.shard: shard 5 of 4 does not exist (K must be 1..N)");

    /* syntax errors: position from libyaml, message prefixed */
    const char *path = write_tmp("syntax.yaml", "kara:\n  interval: [1, 2\n  buffer: 3\n");
    kara_config c;
    kara_config_init(&c);
    CHECK_EQ_INT(kara_config_load(&c, path), KARA_ERR_CONFIG);
    char prefix[1200];
    snprintf(prefix, sizeof prefix, "%s:3:", path);
    CHECK_MSG(!strncmp(kara_last_error(), prefix, strlen(prefix)) && strstr(kara_last_error(), "invalid YAML"),
              "syntax error message '%s'", kara_last_error());

    /* bad encoding: libyaml reports the byte offset of the offending octet (here the
     * newline after the lone lead byte 0xc3 at column 18), shown as line:column */
    path = write_tmp("utf8.yaml", "kara:\n  buffer: 8 # caf\xc3\n");
    CHECK_EQ_INT(kara_config_load(&c, path), KARA_ERR_CONFIG);
    snprintf(prefix, sizeof prefix, "%s:2:19: invalid YAML: ", path);
    CHECK_MSG(!strncmp(kara_last_error(), prefix, strlen(prefix)), "utf-8 error message '%s'", kara_last_error());

    /* the first error wins and the config stays untouched (checked in expect_error) */
    expect_error("first.yaml", "sampling:\n  temperature: 0.1\n  top_k: -3\nkara:\n  retention: 7\n", KARA_ERR_CONFIG,
                 "3:10: sampling.top_k: -3 is out of range [-1, 16777216]");

    /* a dotted key beside its nested form is one key given twice, in either order */
    expect_error("dotted-after.yaml", "sampling:\n  top_k: 5\nsampling.top_k: 7\n", KARA_ERR_CONFIG,
                 "3:1: duplicate key 'sampling.top_k' (first given at line 2, column 3: a dotted key and its nested "
                 "form are the same key)");
    expect_error("dotted-before.yaml", "kara.score.mode: causal\nkara:\n  score:\n    mode: causal\n", KARA_ERR_CONFIG,
                 "4:5: duplicate key 'kara.score.mode' (first given at line 1, column 1: a dotted key and its nested "
                 "form are the same key)");

    /* a missing file is an I/O error, not a config error */
    const char *missing = kr_test_path(kr_test_tmpdir(), "does-not-exist.yaml");
    CHECK_EQ_INT(kara_config_load(&c, missing), KARA_ERR_IO);
    CHECK(strstr(kara_last_error(), missing) != NULL);

    /* an empty file, comments only, or empty sections change nothing */
    kara_config d;
    kara_config_init(&d);
    CHECK_EQ_INT(kara_config_load(&c, write_tmp("empty.yaml", "")), KARA_OK);
    CHECK_EQ_INT(kara_config_load(&c, write_tmp("comments.yaml", "# nothing\nkara:\n  # interval: 5\nbatch:\n")),
                 KARA_OK);
    CHECK(same_values(&c, &d));
}

static void test_set(void) {
    kara_config c;
    kara_config_init(&c);
    const char *path = write_tmp("base.yaml", "sampling:\n  temperature: 0.5\n");
    CHECK_EQ_INT(kara_config_load(&c, path), KARA_OK);
    char want[1200];
    snprintf(want, sizeof want, "%s:2:16", path);
    CHECK(!strcmp(kara_config_origin(&c, "sampling.temperature"), want));

    /* a flag beats the file and records itself */
    CHECK_EQ_INT(kara_config_set(&c, "sampling.temperature", "0.3", "--temp"), KARA_OK);
    CHECK_NEAR(c.sampling.temperature, 0.3, 1e-7);
    CHECK(!strcmp(kara_config_origin(&c, "sampling.temperature"), "--temp"));
    CHECK_EQ_INT(kara_config_set(&c, "sampling.top_k", "5", NULL), KARA_OK);
    CHECK(!strcmp(kara_config_origin(&c, "sampling.top_k"), "api"));

    /* the same checks as the file, named by the flag; the value is kept */
    CHECK_EQ_INT(kara_config_set(&c, "sampling.temperature", "hot", "--temp"), KARA_ERR_CONFIG);
    CHECK_MSG(!strcmp(kara_last_error(), "--temp: sampling.temperature: expected a number, got 'hot'"), "got '%s'",
              kara_last_error());
    CHECK_NEAR(c.sampling.temperature, 0.3, 1e-7);
    CHECK(!strcmp(kara_config_origin(&c, "sampling.temperature"), "--temp"));
    CHECK_EQ_INT(kara_config_set(&c, "kara.retention", "1.5", "--kv-retention"), KARA_ERR_CONFIG);
    CHECK(!strcmp(kara_last_error(), "--kv-retention: kara.retention: 1.5 is out of range [0, 1]"));
    CHECK_EQ_INT(kara_config_set(&c, "kara.retenton", "0.5", "--x"), KARA_ERR_CONFIG);
    CHECK(!strcmp(kara_last_error(), "--x: unknown key 'kara.retenton' (did you mean 'kara.retention'?)"));
    CHECK_EQ_INT(kara_config_set(&c, "kara.score", "causal", "--x"), KARA_ERR_CONFIG);
    CHECK(!strcmp(kara_last_error(), "--x: 'kara.score' is a section, not a key"));
    CHECK_EQ_INT(kara_config_set(&c, "kv_cache.method", "", "--kv-method"), KARA_ERR_CONFIG);
    /* the cache takes the block types (issue 20); the query cache f16, f32 or q8_0, not q4_0 */
    CHECK_EQ_INT(kara_config_set(&c, "kv_cache.dtype", "q8_0", "-ctk"), KARA_OK);
    CHECK_EQ_INT(c.context.kv.dtype, KARA_KV_Q8_0);
    CHECK_EQ_INT(kara_config_set(&c, "kv_cache.dtype", "q4_0", NULL), KARA_OK);
    CHECK_EQ_INT(c.context.kv.dtype, KARA_KV_Q4_0);
    CHECK_EQ_INT(kara_config_set(&c, "kara.query_cache_dtype", "f16", NULL), KARA_OK);
    CHECK_EQ_INT(kr_kv_tune(&c.context.kv)->query_cache_dtype, KARA_KV_F16);
    CHECK_EQ_INT(kara_config_set(&c, "kara.query_cache_dtype", "q4_0", NULL), KARA_ERR_CONFIG);
    CHECK_EQ_INT(kr_kv_tune(&c.context.kv)->query_cache_dtype, KARA_KV_F16);
    CHECK_EQ_INT(kara_config_set(&c, "kara.query_cache_dtype", "q8_0", NULL), KARA_OK);
    CHECK_EQ_INT(kr_kv_tune(&c.context.kv)->query_cache_dtype, KARA_KV_Q8_0);
    CHECK_EQ_INT(kara_config_set(NULL, "kara.buffer", "1", NULL), KARA_ERR_ARG);
    CHECK_EQ_INT(kara_config_set(&c, "kara.buffer", NULL, NULL), KARA_ERR_ARG);

    /* sizes: KB = 1000, KiB = 1024, a fraction of a byte rounds up, an exponent is a number, auto = 0 */
    static const struct {
        const char *text;
        uint64_t bytes;
    } sizes[] = {{"512", 512},
                 {"512B", 512},
                 {"2KB", 2000},
                 {"2kib", 2048},
                 {"256MiB", 256u << 20},
                 {"256 MiB", 256u << 20},
                 {"1.5GB", 1500000000ULL},
                 {"1.5GiB", 3ULL << 29},
                 {"3mb", 3000000},
                 {"0.5", 1},
                 {"0.9B", 1},
                 {"1.0001KiB", 1025},
                 {"1.5e6", 1500000},
                 {"2E3", 2000},
                 {"1.5e+3KiB", 1536000},
                 {"auto", 0}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        CHECK_EQ_INT(kara_config_set(&c, "kv_cache.budget", sizes[i].text, "--kv-budget"), KARA_OK);
        CHECK_MSG(c.context.kv.budget == sizes[i].bytes, "%s -> %llu", sizes[i].text,
                  (unsigned long long)c.context.kv.budget);
    }
    CHECK_EQ_INT(kara_config_set(&c, "kv_cache.budget", "2 TB", "--kv-budget"), KARA_ERR_CONFIG);
    CHECK_EQ_INT(kara_config_set(&c, "kv_cache.budget", "-1GiB", "--kv-budget"), KARA_ERR_CONFIG);
    CHECK_EQ_INT(kara_config_set(&c, "kv_cache.budget", "99999999999GiB", "--kv-budget"), KARA_ERR_CONFIG);
    /* only auto means no cap: 0 bytes is refused, and an exponent is a number, never a unit */
    static const struct {
        const char *text, *msg;
    } bad_sizes[] = {
        {"0", "--kv-budget: kv_cache.budget: '0' is 0 bytes, which holds nothing; give a size (auto: no limit)"},
        {"0B", "--kv-budget: kv_cache.budget: '0B' is 0 bytes, which holds nothing; give a size (auto: no limit)"},
        {"0.0 MiB",
         "--kv-budget: kv_cache.budget: '0.0 MiB' is 0 bytes, which holds nothing; give a size (auto: no limit)"},
        {"1e30", "--kv-budget: kv_cache.budget: 1e30 is out of range (at most 1125899906842624 bytes)"},
        {"1e999", "--kv-budget: kv_cache.budget: 1e999 is out of range (at most 1125899906842624 bytes)"},
        {"2e3x",
         "--kv-budget: kv_cache.budget: unknown size unit 'x' in '2e3x' (expected B, KB, KiB, MB, MiB, GB or GiB)"},
    };
    for (size_t i = 0; i < sizeof bad_sizes / sizeof bad_sizes[0]; i++) {
        c.context.kv.budget = 12345;
        CHECK_EQ_INT(kara_config_set(&c, "kv_cache.budget", bad_sizes[i].text, "--kv-budget"), KARA_ERR_CONFIG);
        CHECK_MSG(!strcmp(kara_last_error(), bad_sizes[i].msg), "%s:\n   got  '%s'\n   want '%s'", bad_sizes[i].text,
                  kara_last_error(), bad_sizes[i].msg);
        CHECK(c.context.kv.budget == 12345);
    }

    /* the other value forms */
    CHECK_EQ_INT(kara_config_set(&c, "kara.protect_token_ids", "151667, 151668", "--kv-protect"), KARA_OK);
    CHECK_EQ_INT(kr_kv_tune(&c.context.kv)->n_protect_token_ids, 2);
    CHECK_EQ_INT(kr_kv_tune(&c.context.kv)->protect_token_ids[1], 151668);
    CHECK_EQ_INT(kara_config_set(&c, "kara.protect_token_ids", "[]", NULL), KARA_OK);
    CHECK_EQ_INT(kr_kv_tune(&c.context.kv)->n_protect_token_ids, 0);
    CHECK_EQ_INT(kara_config_set(&c, "kara.protect_token_ids", "[3]", NULL), KARA_OK);
    CHECK_EQ_INT(kr_kv_tune(&c.context.kv)->n_protect_token_ids, 1);
    CHECK_EQ_INT(kr_kv_tune(&c.context.kv)->protect_token_ids[0], 3);
    CHECK_EQ_INT(kara_config_set(&c, "kara.protect_token_ids", "[3", NULL), KARA_ERR_CONFIG);
    CHECK_EQ_INT(kara_config_set(&c, "batch.shard", "3/4", "--shard"), KARA_OK);
    CHECK_EQ_INT(c.shard_index, 2);
    CHECK_EQ_INT(c.shard_count, 4);
    CHECK_EQ_INT(kara_config_set(&c, "batch.shard", "0/4", "--shard"), KARA_ERR_CONFIG);
    CHECK_EQ_INT(kara_config_set(&c, "kara.score.layers", "stride:2", NULL), KARA_OK);
    CHECK_EQ_INT(kr_kv_tune(&c.context.kv)->layer_stride, 2);
    CHECK_EQ_INT(kara_config_set(&c, "kara.score.layers", "stride:0", NULL), KARA_ERR_CONFIG);
    CHECK_EQ_INT(kara_config_set(&c, "chat.think", "false", "--think"), KARA_OK);
    CHECK_EQ_INT(c.think, KARA_THINK_OFF);
    CHECK_EQ_INT(kara_config_set(&c, "kara.compress_scope", "think_only", NULL), KARA_OK);
    CHECK(kr_kv_tune(&c.context.kv)->think_only);
    CHECK_EQ_INT(kara_config_set(&c, "kara.selection_scope", "per_layer", NULL), KARA_OK);
    CHECK(kr_kv_tune(&c.context.kv)->per_layer_selection);
    CHECK_EQ_INT(kara_config_set(&c, "sampling.seed", "0x10", NULL), KARA_OK);
    CHECK(c.sampling.seed == 16);
    /* -1 (llama.cpp's --seed -1) and "random" draw a seed below 2^32, kept in the config */
    CHECK_EQ_INT(kara_config_set(&c, "sampling.seed", "-1", NULL), KARA_OK);
    CHECK(c.sampling.seed <= UINT32_MAX);
    CHECK_EQ_INT(kara_config_set(&c, "sampling.seed", "random", NULL), KARA_OK);
    CHECK(c.sampling.seed <= UINT32_MAX);
    CHECK_EQ_INT(kara_config_set(&c, "sampling.seed", "-2", NULL), KARA_ERR_CONFIG);
    CHECK_MSG(strstr(kara_last_error(), "sampling.seed: expected a non-negative integer or -1 (random), got '-2'"),
              "%s", kara_last_error());
    CHECK_EQ_INT(kara_config_set(&c, "sampling.seed", "18446744073709551615", NULL), KARA_OK);
    CHECK(c.sampling.seed == UINT64_MAX);
    CHECK_EQ_INT(kara_config_set(&c, "runtime.threads", "auto", "-t"), KARA_OK);
    CHECK_EQ_INT(c.context.n_threads, 0);
    CHECK_EQ_INT(kara_config_set(&c, "runtime.threads", "1.5", "-t"), KARA_ERR_CONFIG);
    CHECK(!strcmp(kara_last_error(), "-t: runtime.threads: expected an integer or auto, got '1.5'"));
    CHECK_EQ_INT(kara_config_set(&c, "sampling.top_p", "nan", NULL), KARA_ERR_CONFIG);
    CHECK_EQ_INT(kara_config_set(&c, "batch.max_concurrency", "8", "--parallel"), KARA_OK);
    CHECK_EQ_INT(c.context.n_seq_max, 8);
    CHECK_EQ_INT(kara_config_set(&c, "batch.resume", "yes", NULL), KARA_OK);
    CHECK(c.batch_resume);
    CHECK_EQ_INT(c.batch_on_changed, 0); /* rerun */
    CHECK_EQ_INT(kara_config_set(&c, "batch.on_changed", "keep", NULL), KARA_OK);
    CHECK_EQ_INT(c.batch_on_changed, 2);
    CHECK_EQ_INT(kara_config_set(&c, "batch.on_changed", "skip", "--on-changed"), KARA_ERR_CONFIG);
    CHECK_MSG(!strcmp(kara_last_error(),
                      "--on-changed: batch.on_changed: unknown value 'skip' (expected rerun | refuse | "
                      "keep)"),
              "%s", kara_last_error());

    /* strings: length limit, get returns them unquoted */
    char big[KARA_CONFIG_PATH_MAX + 8];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    CHECK_EQ_INT(kara_config_set(&c, "model.path", big, "-m"), KARA_ERR_CONFIG);
    big[KARA_CONFIG_PATH_MAX - 1] = 0;
    CHECK_EQ_INT(kara_config_set(&c, "model.path", big, "-m"), KARA_OK);
    CHECK_EQ_INT(kara_config_set(&c, "model.path", "m/x y.gguf", "-m"), KARA_OK);
    char v[64];
    CHECK_EQ_INT(kara_config_get(&c, "model.path", v, sizeof v), KARA_OK);
    CHECK(!strcmp(v, "m/x y.gguf"));
    CHECK_EQ_INT(kara_config_get(&c, "model.path", v, 4), KARA_ERR_BUFFER);
    CHECK_EQ_INT(kara_config_get(&c, "model.nope", v, sizeof v), KARA_ERR_CONFIG);
}

/* format -> write -> load gives the same values, whatever they are. */
static void round_trip(const kara_config *a, const char *name) {
    size_t need = kara_config_format(a, NULL, 0);
    char *text = malloc(need + 1);
    CHECK_EQ_INT(kara_config_format(a, text, need + 1), need);
    CHECK_EQ_INT(strlen(text), need);
    const char *path = write_tmp(name, text);
    kara_config b;
    kara_config_init(&b);
    kara_status st = kara_config_load(&b, path);
    CHECK_MSG(st == KARA_OK, "%s: %s", name, kara_last_error());
    CHECK_MSG(same_values(a, &b), "%s: values changed in the round trip", name);
    free(text);
}

static void test_format(void) {
    kara_config c;
    kara_config_init(&c);
    round_trip(&c, "rt_default.yaml");

    static const char *sets[][2] = {
        {"model.path", "dir with space/q\"uote\\back: #hash \xc3\xa9\t.gguf"},
        {"model.preset", "qwen3-thinking"},
        {"runtime.threads", "-1"},
        {"context.size", "4096"},
        {"sampling.temperature", "0.1"},
        {"sampling.top_p", "0.333333343"},
        {"sampling.min_p", "0"},
        {"sampling.repeat_penalty", "1.1"},
        {"sampling.seed", "18446744073709551615"},
        {"sampling.max_tokens", "100"},
        {"kv_cache.dtype", "f32"},
        {"kv_cache.budget", "1500000001"},
        {"kv_cache.method", "snapkv"},
        {"kara.retention", "1e-3"},
        {"kara.max_compress_per_step", "3"},
        {"kara.compress_scope", "think_only"},
        {"kara.protect_token_ids", "1, 2, 2147483647"},
        {"kara.on_pool_exhausted", "recompress_history"},
        {"kara.score.mode", "causal"},
        {"kara.score.softmax_over", "window_plus_sinks"},
        {"kara.score.exclude_self", "false"},
        {"kara.score.layers", "stride:3"},
        {"kara.t2c.len_penalty", "2.5"},
        {"baselines.budget_tokens", "300"},
        {"baselines.snapkv.pool", "avg"},
        {"baselines.rkv.lambda", "0.25"},
        {"baselines.rkv.sim_threshold", "-0.5"},
        {"baselines.lazy.window", "64"},
        {"baselines.lazy.alpha", "0.001"},
        {"baselines.lazy.protect_prompt", "false"},
        {"chat.template", ""},
        {"chat.think", "on"},
        {"batch.input", "in.jsonl"},
        {"batch.resume", "on"},
        {"batch.on_changed", "refuse"},
        {"batch.shard", "2/3"},
    };
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        CHECK_MSG(kara_config_set(&c, sets[i][0], sets[i][1], "--flag") == KARA_OK, "%s=%s: %s", sets[i][0], sets[i][1],
                  kara_last_error());
    round_trip(&c, "rt_changed.yaml");

    /* sizes keep their unit, names are canonical, origins are comments */
    char text[16384];
    size_t n = kara_config_format(&c, text, sizeof text);
    CHECK(n < sizeof text);
    CHECK(strstr(text, "  budget: 1500000001B") != NULL);
    CHECK(strstr(text, "    pool: mean") != NULL);
    CHECK(strstr(text, "  think: on") != NULL);
    CHECK(strstr(text, "    layers: stride:3") != NULL);
    CHECK(strstr(text, "  protect_token_ids: [1, 2, 2147483647]") != NULL);
    CHECK(strstr(text, "\nkara:\n  evict: on_demand") != NULL);
    CHECK(strstr(text, "\n  interval: 128") != NULL);
    CHECK(strstr(text, "\n  t2c:\n    mode: line_tails") != NULL);
    CHECK(strstr(text, "\n    candidate_frac: 0.5") != NULL);
    CHECK(strstr(text, "\n  streaming:\n    n_sink: 4") != NULL);
    const char *line = strstr(text, "  temperature: 0.1");
    CHECK(line && !strncmp(strchr(line, '#'), "# --flag\n", 9));
    line = strstr(text, "  top_k: 40");
    CHECK(line && !strncmp(strchr(line, '#'), "# default\n", 10));

    kara_config_init(&c);
    kara_config_set(&c, "kv_cache.budget", "256MiB", NULL);
    n = kara_config_format(&c, text, sizeof text);
    CHECK(strstr(text, "  budget: 256MiB ") != NULL);
    CHECK(strstr(text, "  block_size: 16 ") != NULL);

    /* truncation: snprintf-like length, always NUL-terminated */
    char small[32];
    CHECK_EQ_INT(kara_config_format(&c, small, sizeof small), n);
    CHECK_EQ_INT(strlen(small), sizeof small - 1);
    CHECK(!strncmp(small, text, sizeof small - 1));

    /* a loaded file's origins show up as FILE:LINE:COL comments */
    const char *path = write_tmp("origin.yaml", "kara:\n  buffer: 16\n");
    CHECK_EQ_INT(kara_config_load(&c, path), KARA_OK);
    kara_config_format(&c, text, sizeof text);
    char want[1200];
    snprintf(want, sizeof want, "# %s:2:11\n", path);
    line = strstr(text, "  buffer: 16");
    CHECK(line && !strncmp(strchr(line, '#'), want, strlen(want)));
    round_trip(&c, "rt_loaded.yaml");
}

/* kara.trigger (ablation A8) through all three doors: a file, a flag of the
 * shared CLI table, and --print-config's output. */
static void test_trigger(void) {
    kara_config c;
    kara_config_init(&c);
    const char *path = write_tmp("trigger.yaml", "kara:\n  trigger: threshold\n  trigger_slack: 64\n");
    CHECK_EQ_INT(kara_config_load(&c, path), KARA_OK);
    CHECK_EQ_INT(kr_kv_tune(&c.context.kv)->trigger, KARA_KV_TRIGGER_THRESHOLD);
    CHECK_EQ_INT(kr_kv_tune(&c.context.kv)->trigger_slack, 64);
    char want[1200];
    snprintf(want, sizeof want, "%s:2:12", path);
    CHECK_MSG(!strcmp(kara_config_origin(&c, "kara.trigger"), want), "origin %s",
              kara_config_origin(&c, "kara.trigger"));
    CHECK_EQ_INT(kara_config_set(&c, "kara.trigger_slack", "auto", "--x"), KARA_OK);
    CHECK_EQ_INT(kr_kv_tune(&c.context.kv)->trigger_slack, 0);
    char text[16384];
    kara_config_format(&c, text, sizeof text);
    CHECK(strstr(text, "\n  trigger: threshold ") != NULL);
    CHECK(strstr(text, "\n  trigger_slack: auto ") != NULL);
    /* a float key with a name: the retention prior's weight */
    CHECK(strstr(text, "\n    prior_weight: auto ") != NULL);
    CHECK(kr_kv_tune(&c.context.kv)->prior_weight < 0.0f);
    CHECK_EQ_INT(kara_config_set(&c, "kara.score.prior_weight", "4.5", "--kv-prior-weight"), KARA_OK);
    CHECK(kr_kv_tune(&c.context.kv)->prior_weight == 4.5f);
    kara_config_format(&c, text, sizeof text);
    CHECK(strstr(text, "\n    prior_weight: 4.5 ") != NULL);
    CHECK_EQ_INT(kara_config_set(&c, "kara.score.prior_weight", "auto", "--kv-prior-weight"), KARA_OK);
    CHECK(kr_kv_tune(&c.context.kv)->prior_weight < 0.0f);
    CHECK_EQ_INT(kara_config_set(&c, "kara.score.prior_weight", "-1", "--kv-prior-weight"), KARA_ERR_CONFIG);
    CHECK_EQ_INT(kara_config_set(&c, "kara.score.prior_weight", "lots", "--kv-prior-weight"), KARA_ERR_CONFIG);
    CHECK_MSG(
        !strcmp(kara_last_error(), "--kv-prior-weight: kara.score.prior_weight: expected a number or auto, got 'lots'"),
        "got '%s'", kara_last_error());
    CHECK_EQ_INT(kara_config_set(&c, "kara.trigger", "Threshold", "--kv-trigger"), KARA_ERR_CONFIG);
    CHECK_MSG(!strcmp(kara_last_error(),
                      "--kv-trigger: kara.trigger: unknown value 'Threshold' (expected periodic | threshold)"),
              "got '%s'", kara_last_error());

    /* the shared flag; flags win over files */
    char *argv[] = {"kara", "--config", (char *)path, "--kv-trigger", "periodic", NULL};
    kr_cli_parsed cli;
    CHECK_EQ_INT(kr_cli_parse("run", 5, argv, NULL, 0, &c, &cli), -1);
    CHECK_EQ_INT(kr_kv_tune(&c.context.kv)->trigger, KARA_KV_TRIGGER_PERIODIC);
    CHECK_EQ_INT(kr_kv_tune(&c.context.kv)->trigger_slack, 64);
    CHECK(!strcmp(kara_config_origin(&c, "kara.trigger"), "--kv-trigger"));
    kr_cli_parsed_free(&cli);
    round_trip(&c, "rt_trigger.yaml");
}

/* The research knobs by name, through the same table (issue 17). */
static void test_params_set(void) {
    kara_kv_params kv;
    kara_kv_params_init(&kv);
    CHECK_EQ_INT(kara_kv_params_set(&kv, "kara.score.mode", "two_sided"), KARA_OK);
    CHECK_EQ_INT(kr_kv_tune(&kv)->score_mode, KR_SCORE_TWO_SIDED);
    CHECK_EQ_INT(kara_kv_params_set(&kv, "kara.protect_token_ids", "[5, 7]"), KARA_OK);
    CHECK(kr_kv_tune(&kv)->n_protect_token_ids == 2 && kr_kv_tune(&kv)->protect_token_ids[1] == 7);
    kara_kv_params before = kv;
    CHECK_EQ_INT(kara_kv_params_set(&kv, "kara.retention", "1.5"), KARA_ERR_CONFIG);
    CHECK_MSG(strstr(kara_last_error(), "kara.retention: 1.5 is out of range [0, 1]"), "%s", kara_last_error());
    CHECK_EQ_INT(kara_kv_params_set(&kv, "sampling.temperature", "0.5"), KARA_ERR_CONFIG);
    CHECK_MSG(strstr(kara_last_error(), "is not a KV cache setting"), "%s", kara_last_error());
    CHECK_EQ_INT(kara_kv_params_set(&kv, "kara.retension", "0.3"), KARA_ERR_CONFIG);
    CHECK_MSG(strstr(kara_last_error(), "kara.retention"), "did-you-mean: %s", kara_last_error());
    CHECK_EQ_INT(kara_kv_params_set(&kv, "runtime.threads", "2"), KARA_ERR_CONFIG);
    CHECK(!memcmp(&kv, &before, sizeof kv));
    CHECK_EQ_INT(kara_kv_params_set(NULL, "kara.retention", "0.3"), KARA_ERR_ARG);

    /* and read back by name: text as YAML gives it, numbers as numbers */
    char buf[64];
    double v = -1;
    CHECK_EQ_INT(kara_kv_params_get(&kv, "kara.score.mode", buf, sizeof buf), KARA_OK);
    CHECK_MSG(!strcmp(buf, "two_sided"), "%s", buf);
    CHECK_EQ_INT(kara_kv_params_get(&kv, "kara.protect_token_ids", buf, sizeof buf), KARA_OK);
    CHECK_MSG(!strcmp(buf, "[5, 7]"), "%s", buf);
    CHECK_EQ_INT(kara_kv_params_get_number(&kv, "kara.score.mode", &v), KARA_OK);
    CHECK(v == KR_SCORE_TWO_SIDED);
    CHECK_EQ_INT(kara_kv_params_get_number(&kv, "kara.t2c.candidate_frac", &v), KARA_OK);
    CHECK(v == 0.5);
    CHECK_EQ_INT(kara_kv_params_get_number(&kv, "kv_cache.budget", &v), KARA_OK);
    CHECK(v == (double)kv.budget);
    /* a stable setting is the same value by field and by name */
    CHECK_EQ_INT(kara_kv_params_set(&kv, "kara.interval", "96"), KARA_OK);
    CHECK_EQ_INT(kv.interval, 96);
    CHECK_EQ_INT(kara_kv_params_get_number(&kv, "kara.interval", &v), KARA_OK);
    CHECK(v == 96);
    v = -1;
    CHECK_EQ_INT(kara_kv_params_get_number(&kv, "kara.protect_token_ids", &v), KARA_ERR_CONFIG);
    CHECK_MSG(strstr(kara_last_error(), "'kara.protect_token_ids' is not a number"), "%s", kara_last_error());
    CHECK(v == -1);
    CHECK_EQ_INT(kara_kv_params_get(&kv, "kara.score.mode", buf, 4), KARA_ERR_BUFFER);
    CHECK_MSG(strstr(kara_last_error(), "buffer too small for 'kara.score.mode' (10 bytes)"), "%s", kara_last_error());
    CHECK_EQ_INT(kara_kv_params_get(&kv, "sampling.temperature", buf, sizeof buf), KARA_ERR_CONFIG);
    CHECK_MSG(strstr(kara_last_error(), "is not a KV cache setting"), "%s", kara_last_error());
    CHECK_EQ_INT(kara_kv_params_get_number(&kv, "kara.score.mood", &v), KARA_ERR_CONFIG);
    CHECK_MSG(strstr(kara_last_error(), "unknown key 'kara.score.mood' (did you mean 'kara.score.mode'?)"), "%s",
              kara_last_error());
    /* the research settings fit their storage; the struct does not grow with them */
    CHECK(sizeof(kr_kv_tuning) <= sizeof kv.tuning);

    kara_context_params cp;
    kara_context_params_init(&cp);
    CHECK_EQ_INT(kara_context_params_set(&cp, "runtime.threads", "3"), KARA_OK);
    CHECK_EQ_INT(cp.n_threads, 3);
    CHECK_EQ_INT(kara_context_params_set(&cp, "batch.max_concurrency", "4"), KARA_OK);
    CHECK_EQ_INT(cp.n_seq_max, 4);
    CHECK_EQ_INT(kara_context_params_set(&cp, "context.size", "auto"), KARA_OK);
    CHECK_EQ_INT(cp.n_ctx, 0);
    CHECK_EQ_INT(kara_context_params_set(&cp, "kv_cache.method", "h2o"), KARA_OK);
    CHECK_EQ_INT(cp.kv.method, KARA_KV_METHOD_H2O);
    CHECK_EQ_INT(kara_context_params_set(&cp, "kv_cache.budget", "64MiB"), KARA_OK);
    CHECK(cp.kv.budget == 64ull << 20);
    CHECK_EQ_INT(kara_context_params_set(&cp, "model.path", "x.gguf"), KARA_ERR_CONFIG);
    CHECK_MSG(strstr(kara_last_error(), "is not a context setting"), "%s", kara_last_error());
}

int main(void) {
    test_params_set();
    test_defaults();
    test_enum_names();
    test_shipped_configs();
    test_errors();
    test_set();
    test_format();
    test_trigger();
    return kr_test_finish();
}
