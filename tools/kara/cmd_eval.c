/* cmd_eval.c - `kara eval --tasks FILE.jsonl`: accuracy of a model on
 * problems with reference answers, for each KV method and retention.
 *
 * Each problem is rendered with the model's chat template (thinking on),
 * generated greedily by default, and its answer (the text after the
 * thinking; the content of \boxed{...} when there is one) compared with the
 * reference. The baselines that keep a per-sequence token budget
 * (streaming, snapkv, h2o) get Kara's measured mean footprint at the same
 * retention, so every method is compared at equal mean KV memory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_config.h"
#include "cli_args.h"
#include "commands.h"
#include "eval_tasks.h"
#include "exit_codes.h"
#include "kara.h"
#include "monotonic_clock.h"

#define MAX_METHODS 8
#define MAX_RETENTIONS 8

typedef struct eval_opts {
    kara_config cfg;
    const char *tasks[16];
    int n_tasks_files;
    kara_kv_method methods[MAX_METHODS];
    int n_methods;
    float retentions[MAX_RETENTIONS];
    int n_retentions;
    int limit;
    const char *out;
    const char *plot;
} eval_opts;

static const kara_cli_flag eval_flags[] = {
    {"--tasks", true, "JSONL problems: {id, prompt, answer} or MATH-500 style {problem, answer} (repeatable)"},
    {"--methods", true, "comma-separated KV methods (default full,kara,snapkv,streaming,h2o,chunkkv,recent)"},
    {"--retentions", true, "comma-separated retentions for the compressing methods (default 0.1,0.2,0.3,0.5)"},
    {"--limit", true, "use the first N problems of each file"},
    {"--out", true, "write the results as CSV (.csv) or JSON (.json)"},
    {"--plot", true, "write an SVG plot of accuracy against retention"},
};
#define N_EVAL_FLAGS (int)(sizeof eval_flags / sizeof eval_flags[0])

static int parse_list(const char *what, const char *v, int (*item)(eval_opts *, const char *), eval_opts *o) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (!item(o, t)) {
            fprintf(stderr, "kara eval: %s: bad item '%s'\n", what, t);
            return KARA_EXIT_USAGE;
        }
    return -1;
}

static int add_method(eval_opts *o, const char *name) {
    kara_kv_method m;
    if (o->n_methods >= MAX_METHODS || kara_kv_method_parse(name, &m) != KARA_OK) return 0;
    o->methods[o->n_methods++] = m;
    return 1;
}

static int add_retention(eval_opts *o, const char *text) {
    char *end;
    double r = strtod(text, &end);
    if (*end || r <= 0 || r > 1 || o->n_retentions >= MAX_RETENTIONS) return 0;
    o->retentions[o->n_retentions++] = (float)r;
    return 1;
}

static int parse(int argc, char **argv, eval_opts *o) {
    kara_cli_parsed cli;
    int rc = kara_cli_parse("eval", argc, argv, eval_flags, N_EVAL_FLAGS, &o->cfg, &cli);
    for (int i = 0; rc < 0 && i < cli.n_args; i++) {
        const kara_cli_arg *a = &cli.args[i];
        if (!a->flag) {
            fprintf(stderr, "kara eval: unexpected argument '%s'\n", a->value);
            rc = KARA_EXIT_USAGE;
        } else if (kara_cli_flag_is(a->flag, "--tasks")) {
            if (o->n_tasks_files < 16) o->tasks[o->n_tasks_files++] = a->value;
        } else if (kara_cli_flag_is(a->flag, "--methods")) {
            rc = parse_list("--methods", a->value, add_method, o);
        } else if (kara_cli_flag_is(a->flag, "--retentions")) {
            rc = parse_list("--retentions", a->value, add_retention, o);
        } else if (kara_cli_flag_is(a->flag, "--limit")) {
            o->limit = atoi(a->value);
            if (o->limit < 1) {
                fprintf(stderr, "kara eval: --limit must be >= 1\n");
                rc = KARA_EXIT_USAGE;
            }
        } else if (kara_cli_flag_is(a->flag, "--out")) {
            o->out = a->value;
        } else if (kara_cli_flag_is(a->flag, "--plot")) {
            o->plot = a->value;
        }
    }
    rc = kara_cli_finish("eval",
                         "usage: kara eval -m MODEL --tasks FILE.jsonl [options]\n\n"
                         "Accuracy, mean thinking length, KV memory and speed for each KV method and retention.\n"
                         "Greedy unless --temp is given.\n\n",
                         eval_flags, N_EVAL_FLAGS, &o->cfg, &cli, rc);
    if (rc >= 0) return rc;
    if (!o->n_tasks_files) {
        fprintf(stderr, "kara eval: give at least one --tasks file\n");
        return KARA_EXIT_USAGE;
    }
    if (!o->n_methods)
        parse_list("--methods", "full,kara,snapkv,streaming,h2o,chunkkv,recent", add_method, o);
    if (!o->n_retentions) parse_list("--retentions", "0.1,0.2,0.3,0.5", add_retention, o);
    /* evaluation is greedy unless asked otherwise */
    if (!strcmp(kara_config_origin(&o->cfg, "sampling.temperature"), "default")) o->cfg.sampling.temperature = 0;
    return -1;
}

/* ---- one configuration over all problems ---- */

static int run_config(const eval_opts *o, kara_model *m, const kara_chat_template *tmpl, const kara_eval_tasks *tasks,
                      kara_eval_row *row) {
    kara_context_params cp = o->cfg.context;
    cp.n_seq_max = 1;
    cp.kv.method = row->method;
    if (row->retention > 0) cp.kv.retention = row->retention;
    if (row->budget_tokens > 0) cp.kv.budget_tokens = row->budget_tokens;
    kara_context *ctx;
    if (kara_context_create(m, &cp, &ctx) != KARA_OK) {
        fprintf(stderr, "kara eval: %s\n", kara_last_error());
        return KARA_EXIT_CONFIG;
    }
    kara_generator_params gp;
    kara_generator_params_init(&gp);
    gp.sampling = o->cfg.sampling;
    gp.max_tokens = o->cfg.max_tokens;
    kara_generator *gen;
    if (kara_generator_create(ctx, &gp, &gen) != KARA_OK) {
        fprintf(stderr, "kara eval: %s\n", kara_last_error());
        kara_context_free(ctx);
        return KARA_EXIT_CONFIG;
    }
    size_t cap = 1 << 16;
    char *prompt = malloc(cap), *answer = malloc(cap);
    int32_t *ids = malloc(cap * sizeof *ids);
    double think = 0, cached = 0, t_gen = 0;
    long steps = 0, generated = 0;
    int rc = KARA_EXIT_OK;
    for (int i = 0; i < tasks->n && prompt && answer && ids; i++) {
        const kara_eval_task *t = &tasks->items[i];
        kara_chat_message msg = {"user", t->prompt};
        size_t len = 0;
        if (kara_chat_apply(tmpl, &msg, 1, true, true, prompt, cap, &len) != KARA_OK) {
            fprintf(stderr, "kara eval: %s: %s\n", t->where, kara_last_error());
            rc = KARA_EXIT_DATAERR;
            break;
        }
        int32_t n = kara_tokenize(m, prompt, (int32_t)len, ids, (int32_t)cap, true, true);
        kara_status st = n > 0 ? kara_generator_start(gen, 0, ids, n) : KARA_ERR_FORMAT;
        if (st) {
            fprintf(stderr, "kara eval: %s: %s\n", t->where, kara_last_error());
            row->n++;
            continue; /* counts as wrong: the request could not run */
        }
        size_t alen = 0;
        kara_piece piece;
        double t0 = kara_monotonic_seconds();
        while ((st = kara_generator_next(gen, &piece)) == KARA_OK) {
            if (piece.channel == KARA_CHANNEL_ANSWER && alen + (size_t)piece.len < cap) {
                memcpy(answer + alen, piece.text, (size_t)piece.len);
                alen += (size_t)piece.len;
            }
            cached += kara_seq_n_cached(ctx, 0);
            steps++;
        }
        t_gen += kara_monotonic_seconds() - t0;
        answer[alen] = 0;
        kara_generator_stats gs;
        kara_generator_get_stats(gen, &gs);
        think += gs.n_think;
        generated += gs.n_generated;
        row->n++;
        row->correct += kara_eval_answer_matches(answer, t->answer);
    }
    row->think_tokens = row->n ? think / row->n : 0;
    row->cached_slots = steps ? cached / (double)steps : 0;
    row->kv_peak = kara_context_kv_bytes_peak(ctx);
    row->tok_s = t_gen > 0 ? (double)generated / t_gen : 0;
    kara_kv_stats ks;
    kara_context_kv_stats(ctx, &ks);
    row->events = ks.events;
    free(prompt);
    free(answer);
    free(ids);
    kara_generator_free(gen);
    kara_context_free(ctx);
    return rc;
}

static bool budget_method(kara_kv_method m) {
    return m == KARA_KV_METHOD_STREAMING || m == KARA_KV_METHOD_SNAPKV || m == KARA_KV_METHOD_H2O;
}

static void print_row(FILE *f, const kara_eval_row *r) {
    fprintf(f, "%-10s %9.2f %6d %6.1f%% %10.1f %12.1f %12.2f %9.1f %7llu\n", kara_kv_method_name(r->method),
            r->retention, r->n, r->n ? 100.0 * r->correct / r->n : 0.0, r->think_tokens, r->cached_slots,
            r->kv_peak / 1048576.0, r->tok_s, (unsigned long long)r->events);
}

static int eval_main(int argc, char **argv) {
    eval_opts o;
    memset(&o, 0, sizeof o);
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    rc = KARA_EXIT_OK;
    kara_eval_tasks tasks;
    if (!kara_eval_tasks_load(&tasks, o.tasks, o.n_tasks_files, o.limit)) return KARA_EXIT_DATAERR;
    kara_model *m;
    kara_status st = kara_cli_load_model(&o.cfg, &m);
    if (st) {
        fprintf(stderr, "kara eval: %s\n", kara_last_error());
        kara_eval_tasks_free(&tasks);
        return st == KARA_ERR_IO ? KARA_EXIT_NOINPUT : KARA_EXIT_DATAERR;
    }
    kara_chat_template tmpl;
    if (kara_chat_template_from_model(m, o.cfg.chat_template, &tmpl) != KARA_OK) {
        fprintf(stderr, "kara eval: %s\n", kara_last_error());
        kara_model_free(m);
        kara_eval_tasks_free(&tasks);
        return KARA_EXIT_CONFIG;
    }
    kara_eval_row rows[1 + MAX_METHODS * MAX_RETENTIONS];
    int n_rows = 0;
    printf("%-10s %9s %6s %7s %10s %12s %12s %9s %7s\n", "method", "retention", "n", "acc", "think_tok",
           "mean_slots", "peak_kv_MiB", "tok/s", "events");
    for (int mi = 0; mi < o.n_methods && rc == KARA_EXIT_OK; mi++)
        if (o.methods[mi] == KARA_KV_METHOD_FULL) {
            kara_eval_row *r = &rows[n_rows++];
            memset(r, 0, sizeof *r);
            r->method = KARA_KV_METHOD_FULL;
            rc = run_config(&o, m, &tmpl, &tasks, r);
            print_row(stdout, r);
            fflush(stdout);
        }
    for (int ri = 0; ri < o.n_retentions && rc == KARA_EXIT_OK; ri++) {
        /* Kara first: its mean footprint is the baselines' budget */
        int32_t kara_slots = 0;
        for (int pass = 0; pass < 2 && rc == KARA_EXIT_OK; pass++)
            for (int mi = 0; mi < o.n_methods && rc == KARA_EXIT_OK; mi++) {
                kara_kv_method me = o.methods[mi];
                bool first_pass = me == KARA_KV_METHOD_KARA;
                if (me == KARA_KV_METHOD_FULL || first_pass != (pass == 0)) continue;
                kara_eval_row *r = &rows[n_rows++];
                memset(r, 0, sizeof *r);
                r->method = me;
                r->retention = o.retentions[ri];
                if (budget_method(me)) r->budget_tokens = kara_slots > 0 ? kara_slots : 0;
                rc = run_config(&o, m, &tmpl, &tasks, r);
                if (me == KARA_KV_METHOD_KARA) kara_slots = (int32_t)lround(r->cached_slots);
                print_row(stdout, r);
                fflush(stdout);
            }
    }
    if (rc == KARA_EXIT_OK && o.out && !kara_eval_write_results(o.out, rows, n_rows)) rc = KARA_EXIT_CANTCREAT;
    if (rc == KARA_EXIT_OK && o.plot && !kara_eval_write_svg(o.plot, rows, n_rows)) rc = KARA_EXIT_CANTCREAT;
    kara_model_free(m);
    kara_eval_tasks_free(&tasks);
    return rc;
}

const kara_command kara_cmd_eval = {"eval", "accuracy on JSONL problems for each KV method and retention", eval_main};
