/* cmd_eval.c - `kara eval --tasks FILE.jsonl`: accuracy of a model on
 * problems with reference answers, for each KV method under KV budgets.
 *
 * Each problem is rendered with the model's chat template (thinking on),
 * generated greedily by default, and its answer (the text after the
 * thinking; the content of \boxed{...} when there is one) compared with the
 * reference. Rows, in order:
 *   full      every token kept (the reference accuracy and peak);
 *   default   the configuration as given (method, eviction, budget);
 *   per budget share f (--budgets): each method with a share of
 *             round(f x full's peak slots) per sequence (kv_cache.seq_tokens),
 *             so every method holds at most the same KV cache;
 *   per retention r (--retentions, none by default): the window methods with
 *             kara.evict per_window at that retention and no share (the
 *             paper's setting), the threshold baselines at Kara's measured
 *             mean footprint.
 * snapkv's and rkv's trigger slack and lazy's window are scaled to a quarter
 * of the share (budget rows) or of Kara's mean footprint (retention rows).
 * A problem a method cannot admit within its share is counted wrong and
 * reported. Every problem has a token cap (twice its reference thinking length plus
 * 64 when the task file gives think_tokens, else -n), so a derailed
 * sequence cannot run on; capped problems are counted. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "cli_config.h"
#include "progress.h"
#include "commands.h"
#include "draft_model.h"
#include "eval_tasks.h"
#include "exit_codes.h"
#include "kara.h"
#include "monotonic_clock.h"
#include "kv_knob.h"

#define MAX_METHODS 16
#define MAX_POINTS 8
#define MAX_ROWS (2 + 2 * MAX_METHODS * MAX_POINTS)

typedef struct method_spec {
    bool as_configured; /* "default": the configuration as given */
    kara_kv_method method;
    kara_kv_evict evict;
    char label[56];
} method_spec;

typedef struct eval_opts {
    kara_config cfg;
    const char *tasks[16];
    int n_tasks_files;
    method_spec methods[MAX_METHODS];
    int n_methods;
    float budgets[MAX_POINTS], retentions[MAX_POINTS];
    int n_budgets, n_retentions;
    double cap_factor;
    int limit;
    const char *out;
    const char *plot;
} eval_opts;

static const kr_cli_flag eval_flags[] = {
    {"--tasks", true,
     "JSONL problems: {id, prompt, answer[, think_tokens]} or MATH-500 style {problem, answer} "
     "(repeatable)"},
    {"--methods", true,
     "comma-separated KV methods, a window method optionally as NAME/per_window, and "
     "`default` for the configuration as given (default: full,default,kara,kara/per_window,"
     "snapkv,streaming,h2o,rkv,lazy,chunkkv,recent,random)"},
    {"--budgets", true,
     "comma-separated KV cache shares of full's peak each method gets (default: 0.5,0.3,0.2; "
     "none to skip)"},
    {"--retentions", true,
     "also run the window methods per_window at these retentions, without a share (default: none)"},
    {"--cap-factor", true, "token cap per problem: this many times its think_tokens, plus 64 (default: 2)"},
    {"--limit", true, "use the first N problems of each file (default: all)"},
    {"--out", true, "write the results as CSV (.csv) or JSON (.json)"},
    {"--plot", true, "write an SVG plot of accuracy against the KV share (or retention)"},
};
#define N_EVAL_FLAGS (int)(sizeof eval_flags / sizeof eval_flags[0])

static int parse_list(const char *what, const char *v, int (*item)(eval_opts *, const char *), eval_opts *o) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", v);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        if (!item(o, t)) {
            fprintf(stderr, "kara eval: %s: bad item '%s'\n", what, t);
            return KR_EXIT_USAGE;
        }
    return -1;
}

/* "kara", "kara/per_window", "chunkkv/on_demand" */
static int add_method(eval_opts *o, const char *text) {
    if (o->n_methods >= MAX_METHODS) return 0;
    char name[40];
    snprintf(name, sizeof name, "%s", text);
    char *slash = strchr(name, '/');
    method_spec *m = &o->methods[o->n_methods];
    memset(m, 0, sizeof *m);
    m->evict = KARA_KV_EVICT_ON_DEMAND;
    if (!strcmp(name, "default")) {
        m->as_configured = true;
        snprintf(m->label, sizeof m->label, "default");
        o->n_methods++;
        return 1;
    }
    if (slash) {
        *slash = 0;
        if (!strcmp(slash + 1, "per_window"))
            m->evict = KARA_KV_EVICT_PER_WINDOW;
        else if (strcmp(slash + 1, "on_demand"))
            return 0;
    }
    if (kara_kv_method_parse(name, &m->method) != KARA_OK) return 0;
    snprintf(m->label, sizeof m->label, "%s%s", name, m->evict == KARA_KV_EVICT_PER_WINDOW ? "/per_window" : "");
    o->n_methods++;
    return 1;
}

static int add_fraction(float *list, int *n, const char *text) {
    char *end;
    double r = strtod(text, &end);
    if (*end || r <= 0 || r > 1 || *n >= MAX_POINTS) return 0;
    list[(*n)++] = (float)r;
    return 1;
}
static int add_budget(eval_opts *o, const char *t) {
    return !strcmp(t, "none") || add_fraction(o->budgets, &o->n_budgets, t);
}
static int add_retention(eval_opts *o, const char *t) { return add_fraction(o->retentions, &o->n_retentions, t); }

static int parse(int argc, char **argv, eval_opts *o) {
    kr_cli_parsed cli;
    int rc = kr_cli_parse("eval", argc, argv, eval_flags, N_EVAL_FLAGS, &o->cfg, &cli);
    bool budgets_given = false;
    o->cap_factor = 2.0;
    for (int i = 0; rc < 0 && i < cli.n_args; i++) {
        const kr_cli_arg *a = &cli.args[i];
        if (!a->flag) {
            fprintf(stderr, "kara eval: unexpected argument '%s'\n", a->value);
            rc = KR_EXIT_USAGE;
        } else if (kr_cli_flag_is(a->flag, "--tasks")) {
            if (o->n_tasks_files < 16) o->tasks[o->n_tasks_files++] = a->value;
        } else if (kr_cli_flag_is(a->flag, "--methods")) {
            rc = parse_list("--methods", a->value, add_method, o);
        } else if (kr_cli_flag_is(a->flag, "--budgets")) {
            budgets_given = true;
            rc = parse_list("--budgets", a->value, add_budget, o);
        } else if (kr_cli_flag_is(a->flag, "--retentions")) {
            rc = parse_list("--retentions", a->value, add_retention, o);
        } else if (kr_cli_flag_is(a->flag, "--cap-factor")) {
            char *end;
            o->cap_factor = strtod(a->value, &end);
            if (*end || !(o->cap_factor >= 1 && o->cap_factor <= 100)) {
                fprintf(stderr, "kara eval: --cap-factor must be a number in [1, 100]\n");
                rc = KR_EXIT_USAGE;
            }
        } else if (kr_cli_flag_is(a->flag, "--limit")) {
            o->limit = atoi(a->value);
            if (o->limit < 1) {
                fprintf(stderr, "kara eval: --limit must be >= 1\n");
                rc = KR_EXIT_USAGE;
            }
        } else if (kr_cli_flag_is(a->flag, "--out")) {
            o->out = a->value;
        } else if (kr_cli_flag_is(a->flag, "--plot")) {
            o->plot = a->value;
        }
    }
    rc = kr_cli_finish("eval",
                       "usage: kara eval -m MODEL --tasks FILE.jsonl [options]\n\n"
                       "Accuracy, thinking length, KV memory and speed: full KV, the configuration as given,\n"
                       "then every method under KV shares of full's peak. Greedy unless --temp is given.\n\n",
                       eval_flags, N_EVAL_FLAGS, &o->cfg, &cli, rc);
    if (rc >= 0) return rc;
    if (!o->n_tasks_files) {
        fprintf(stderr, "kara eval: give at least one --tasks file\n");
        return KR_EXIT_USAGE;
    }
    if (!o->n_methods)
        parse_list("--methods", "full,default,kara,kara/per_window,snapkv,streaming,h2o,rkv,lazy,chunkkv,recent,random",
                   add_method, o);
    if (!budgets_given) parse_list("--budgets", "0.5,0.3,0.2", add_budget, o);
    /* evaluation is greedy unless asked otherwise */
    if (!strcmp(kara_config_origin(&o->cfg, "sampling.temperature"), "default")) o->cfg.sampling.temperature = 0;
    return -1;
}

/* ---- one configuration over all problems ---- */

typedef struct eval_run {
    const eval_opts *o;
    kara_model *m;
    const kara_chat_template *tmpl;
    const kr_eval_tasks *tasks;
    kr_task_row rows[MAX_ROWS];
    int n_rows;
    bool dry;         /* counting the rows run_all would run, for the progress line */
    int planned;      /* rows of the whole run */
    kr_progress prog; /* problems done of planned x tasks */
} eval_run;

/* The token cap of a problem: cap_factor x its reference thinking length
 * plus room for the answer, or the configured -n. */
static int32_t token_cap(const eval_opts *o, const kr_eval_task *t) {
    if (t->think_tokens > 0) return (int32_t)lround(o->cap_factor * t->think_tokens) + 64;
    return o->cfg.max_tokens;
}

static int run_config(eval_run *e, const kara_context_params *cp_in, kr_task_row *row) {
    const eval_opts *o = e->o;
    kara_model *m = e->m;
    const kara_chat_template *tmpl = e->tmpl;
    const kr_eval_tasks *tasks = e->tasks;
    kara_context_params cp = *cp_in;
    cp.n_seq_max = 1;
    cp.verify_max = kr_cli_context_params(&o->cfg).verify_max; /* cp_in is a row's KV settings */
    kara_context *ctx;
    if (kara_context_create(m, &cp, &ctx) != KARA_OK) {
        fprintf(stderr, "kara eval: %s: %s\n", row->label, kara_last_error());
        return KR_EXIT_CONFIG;
    }
    kara_kv_stats ks;
    kara_context_kv_stats(ctx, &ks);
    row->seq_tokens = ks.seq_tokens;
    kara_generator_params gp;
    kara_generator_params_init(&gp);
    gp.sampling = o->cfg.sampling;
    gp.spec = o->cfg.spec;
    gp.draft_max = o->cfg.draft_max;
    gp.draft_p_min = o->cfg.draft_p_min;
    kr_draft_model draft;
    kara_status dst = kr_draft_model_open("eval", &o->cfg, ctx, 1, &draft);
    if (dst) {
        kara_context_free(ctx);
        return kr_exit_for_status(dst);
    }
    gp.draft_ctx = draft.ctx;
    kara_generator *gen;
    if (kara_generator_create(ctx, &gp, &gen) != KARA_OK) {
        fprintf(stderr, "kara eval: %s\n", kara_last_error());
        kr_draft_model_close(&draft);
        kara_context_free(ctx);
        return KR_EXIT_CONFIG;
    }
    size_t cap = 1 << 16;
    char *prompt = malloc(cap), *answer = malloc(cap);
    int32_t *ids = malloc(cap * sizeof *ids);
    double think = 0, cached = 0, t_gen = 0;
    long steps = 0, generated = 0, drafted = 0, accepted = 0, verify = 0;
    bool spec_on = false;
    int rc = prompt && answer && ids ? KR_EXIT_OK : KR_EXIT_SOFTWARE;
    for (int i = 0; i < tasks->n && rc == KR_EXIT_OK; i++) {
        const kr_eval_task *t = &tasks->items[i];
        kara_chat_message msg = {"user", t->prompt};
        size_t len = 0;
        if (kara_chat_apply(tmpl, &msg, 1, true, true, prompt, cap, &len) != KARA_OK) {
            fprintf(stderr, "kara eval: %s: %s\n", t->where, kara_last_error());
            rc = KR_EXIT_DATAERR;
            break;
        }
        int32_t n = 0;
        kara_status st = kara_tokenize(m, prompt, (int32_t)len, ids, (int32_t)cap, true, true, &n);
        kara_generator_set_max_tokens(gen, token_cap(o, t));
        /* the admission check tells a method that cannot keep what it
         * protects within the share from one that ran and failed */
        if (!st) st = kara_seq_admit(ctx, 0, n, token_cap(o, t));
        if (!st) st = kara_generator_start(gen, 0, ids, n);
        row->n++;
        if (st) {
            if (!row->failed++) fprintf(stderr, "kara eval: %s: %s: %s\n", row->label, t->where, kara_last_error());
            continue; /* counts as wrong: the request could not run */
        }
        size_t alen = 0;
        kara_piece piece;
        double t0 = kr_monotonic_seconds();
        while ((st = kara_generator_next(gen, &piece)) == KARA_OK) {
            if (piece.channel == KARA_CHANNEL_ANSWER && alen + (size_t)piece.len < cap) {
                memcpy(answer + alen, piece.text, (size_t)piece.len);
                alen += (size_t)piece.len;
            }
            int32_t held = kara_seq_n_cached(ctx, 0);
            if (held > row->peak_slots) row->peak_slots = held;
            cached += held;
            steps++;
        }
        t_gen += kr_monotonic_seconds() - t0;
        if (st < 0) {
            if (!row->failed++) fprintf(stderr, "kara eval: %s: %s: %s\n", row->label, t->where, kara_last_error());
            continue;
        }
        answer[alen] = 0;
        kara_generator_stats gs;
        kara_generator_get_stats(gen, &gs);
        think += gs.n_think;
        generated += gs.n_generated;
        /* what plain decoding holds at the end; a verify step holds its
         * drafts too, so peak_slots with drafts can be larger */
        if (n + gs.n_generated - 1 > row->plain_peak) row->plain_peak = n + gs.n_generated - 1;
        drafted += gs.n_drafted;
        accepted += gs.n_accepted;
        verify += gs.n_verify;
        spec_on |= gs.spec_on;
        row->capped += kara_generator_stop_reason(gen) == KARA_STOP_MAX_TOKENS;
        row->correct += kr_eval_answer_matches(answer, t->answer);
        char what[96];
        snprintf(what, sizeof what, "row %d/%d: %s", e->n_rows, e->planned, row->label);
        kr_progress_update(&e->prog, (double)(e->n_rows - 1) * tasks->n + i + 1, "problems", what, false);
    }
    if (o->cfg.spec != KARA_SPEC_NONE)
        fprintf(stderr,
                "kara eval: %s: speculative %s: %ld tokens drafted, %ld accepted (%.1f%%), in %ld verify steps of %ld "
                "tokens generated\n",
                row->label, spec_on ? "on" : "off (the context batch holds no drafts)", drafted, accepted,
                drafted ? 100.0 * (double)accepted / (double)drafted : 0.0, verify, generated);
    row->think_tokens = row->n ? think / row->n : 0;
    row->cached_slots = steps ? cached / (double)steps : 0;
    row->tok_s = t_gen > 0 ? (double)generated / t_gen : 0;
    kara_context_kv_stats(ctx, &ks);
    row->cache_peak = ks.cache_bytes_peak;
    row->reserved = ks.reserved_bytes;
    row->events = ks.events;
    row->evicted = ks.slots_evicted;
    free(prompt);
    free(answer);
    free(ids);
    kara_generator_free(gen);
    kr_draft_model_close(&draft);
    kara_context_free(ctx);
    return rc;
}

static void print_header(FILE *f) {
    fprintf(f, "%-20s %7s %6s %5s %7s %6s %9s %10s %9s %11s %12s %9s %7s %8s\n", "method", "kv", "share", "n", "acc",
            "capped", "think_tok", "mean_slots", "peak_slot", "cache_KiB", "reserved_KiB", "tok/s", "events",
            "evicted");
}

static void print_row(FILE *f, const kr_task_row *r) {
    char kv[16];
    if (!strcmp(r->axis, "-"))
        snprintf(kv, sizeof kv, "-");
    else
        snprintf(kv, sizeof kv, "%s%.2f", !strcmp(r->axis, "budget") ? "" : "r=", r->x);
    fprintf(f, "%-20s %7s %6d %5d %6.1f%% %6d %9.1f %10.1f %9d %11.1f %12.1f %9.1f %7llu %8llu\n", r->label, kv,
            r->seq_tokens, r->n, r->n ? 100.0 * r->correct / r->n : 0.0, r->capped, r->think_tokens, r->cached_slots,
            r->peak_slots, r->cache_peak / 1024.0, r->reserved / 1024.0, r->tok_s, (unsigned long long)r->events,
            (unsigned long long)r->evicted);
    if (r->failed)
        fprintf(f, "%-20s %d of %d problems could not run (counted wrong; stderr says why)\n", "", r->failed, r->n);
    fflush(f);
}

static bool threshold_method(kara_kv_method m) {
    return m == KARA_KV_METHOD_STREAMING || m == KARA_KV_METHOD_SNAPKV || m == KARA_KV_METHOD_H2O ||
        m == KARA_KV_METHOD_RKV || m == KARA_KV_METHOD_LAZY;
}

/* Within a small share (or budget), a slack (snapkv, rkv) or lazy's window,
 * which the cache grows by past its budget between events, is scaled down to
 * a quarter of it, or the method could not run at all. */
static void fit_slacks(kara_kv_params *kv, int32_t share) {
    static const char *const keys[] = {"baselines.snapkv.trigger_slack", "baselines.rkv.trigger_slack",
                                       "baselines.lazy.window"};
    for (int i = 0; i < 3; i++)
        if (kr_kv_int(kv, keys[i]) > share / 4) kr_kv_set_num(kv, keys[i], share / 4 > 8 ? share / 4 : 8);
}

static int run_row(eval_run *e, const kara_context_params *cp, const char *label, const char *axis, double x) {
    kr_task_row *r = &e->rows[e->n_rows++];
    memset(r, 0, sizeof *r);
    snprintf(r->label, sizeof r->label, "%s", label);
    r->method = cp->kv.method;
    r->evict = (kara_kv_evict)kr_kv_int(&cp->kv, "kara.evict");
    r->axis = axis;
    r->x = x;
    r->budget_tokens = kr_kv_int(&cp->kv, "baselines.budget_tokens");
    if (e->dry) return KR_EXIT_OK;
    int rc = run_config(e, cp, r);
    kr_progress_clear(&e->prog); /* the table row goes to the same terminal */
    if (rc == KR_EXIT_OK) print_row(stdout, r);
    fflush(stdout);
    return rc;
}

static bool listed(const eval_opts *o, bool as_configured, kara_kv_method m) {
    for (int i = 0; i < o->n_methods; i++)
        if (o->methods[i].as_configured == as_configured && (as_configured || o->methods[i].method == m)) return true;
    return false;
}

/* full (always: its peak sets the shares), the configuration as given,
 * then each budget share and retention. */
static int run_all(eval_run *e) {
    const eval_opts *o = e->o;
    kara_context_params cp = o->cfg.context;
    cp.kv.method = KARA_KV_METHOD_FULL;
    int rc = run_row(e, &cp, "full", "-", 1.0);
    if (rc) return rc;
    /* the shares: of full's peak as plain decoding holds it, so that they
     * do not depend on --spec */
    int32_t full_peak = e->rows[0].plain_peak;
    char label[48];
    snprintf(label, sizeof label, "default (%s)", kara_kv_method_name(o->cfg.context.kv.method));
    if (listed(o, true, 0) && (rc = run_row(e, &o->cfg.context, label, "-", 1.0))) return rc;
    for (int b = 0; b < o->n_budgets && !rc; b++)
        for (int i = 0; i < o->n_methods && !rc; i++) {
            const method_spec *ms = &o->methods[i];
            if (ms->as_configured || ms->method == KARA_KV_METHOD_FULL) continue;
            cp = o->cfg.context;
            cp.kv.method = ms->method;
            kr_kv_set(&cp.kv, "kara.evict", ms->evict == KARA_KV_EVICT_ON_DEMAND ? "on_demand" : "per_window");
            cp.kv.seq_tokens = (int32_t)lround(o->budgets[b] * full_peak);
            if (cp.kv.seq_tokens < 1) cp.kv.seq_tokens = 1;
            fit_slacks(&cp.kv, cp.kv.seq_tokens);
            rc = run_row(e, &cp, ms->label, "budget", o->budgets[b]);
        }
    for (int ri = 0; ri < o->n_retentions && !rc; ri++) {
        /* Kara first: its mean footprint is the threshold baselines' budget */
        int32_t kr_slots = 0;
        for (int pass = 0; pass < 2 && !rc; pass++)
            for (int i = 0; i < o->n_methods && !rc; i++) {
                const method_spec *ms = &o->methods[i];
                bool kr_first = ms->method == KARA_KV_METHOD_KARA && ms->evict == KARA_KV_EVICT_PER_WINDOW;
                if (ms->as_configured || ms->method == KARA_KV_METHOD_FULL || kr_first != (pass == 0)) continue;
                if (ms->evict == KARA_KV_EVICT_ON_DEMAND && !threshold_method(ms->method)) continue;
                cp = o->cfg.context;
                cp.kv.method = ms->method;
                kr_kv_set(&cp.kv, "kara.evict", "per_window");
                cp.kv.retention = o->retentions[ri];
                if (threshold_method(ms->method) && kr_slots > 0) {
                    kr_kv_set_num(&cp.kv, "baselines.budget_tokens", kr_slots);
                    fit_slacks(&cp.kv, kr_slots);
                }
                rc = run_row(e, &cp, ms->label, "retention", o->retentions[ri]);
                if (kr_first && !rc) kr_slots = (int32_t)lround(e->rows[e->n_rows - 1].cached_slots);
            }
    }
    return rc;
}

static int eval_main(int argc, char **argv) {
    static eval_opts o;
    memset(&o, 0, sizeof o);
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    kr_eval_tasks tasks;
    if (!kr_eval_tasks_load(&tasks, o.tasks, o.n_tasks_files, o.limit)) return KR_EXIT_DATAERR;
    kara_model *m;
    kara_status st = kr_cli_load_model(&o.cfg, &m);
    if (st) {
        fprintf(stderr, "kara eval: %s\n", kara_last_error());
        kr_eval_tasks_free(&tasks);
        return st == KARA_ERR_IO ? KR_EXIT_NOINPUT : KR_EXIT_DATAERR;
    }
    kara_chat_template tmpl;
    if (kara_chat_template_from_model(m, o.cfg.chat_template, &tmpl) != KARA_OK) {
        fprintf(stderr, "kara eval: %s\n", kara_last_error());
        kara_model_free(m);
        kr_eval_tasks_free(&tasks);
        return KR_EXIT_CONFIG;
    }
    static eval_run e;
    memset(&e, 0, sizeof e);
    e.o = &o;
    e.m = m;
    e.tmpl = &tmpl;
    e.tasks = &tasks;
    e.dry = true; /* the same loops, counting rows: the progress line's total */
    run_all(&e);
    e.planned = e.n_rows;
    e.n_rows = 0;
    e.dry = false;
    kr_progress_init(&e.prog, "kara eval", (double)e.planned * tasks.n);
    print_header(stdout);
    fflush(stdout);
    rc = run_all(&e);
    kr_progress_clear(&e.prog);
    if (rc == KR_EXIT_OK && o.out) rc = kr_eval_write_results(o.out, e.rows, e.n_rows);
    if (rc == KR_EXIT_OK && o.plot) rc = kr_eval_write_svg(o.plot, e.rows, e.n_rows);
    kara_model_free(m);
    kr_eval_tasks_free(&tasks);
    return rc;
}

const kr_command kr_cmd_eval = {"eval", "accuracy on JSONL problems for each KV method under KV budgets", eval_main};
