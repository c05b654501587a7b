/* cmd_eval.c - `kara eval --tasks FILE.jsonl`: accuracy of a model on
 * problems with reference answers, for each KV method under KV budgets.
 *
 * Each problem is rendered with the model's chat template (thinking on),
 * generated greedily by default, and its answer (the text after the
 * thinking; the content of \boxed{...} when there is one) compared with the
 * reference. A method's cost is its peak KV bytes (blocks in use plus query
 * rings and scoring scratch: kara_context_kv_bytes_peak) over full's peak
 * bytes on the same problem: each problem runs in a context of its own, so
 * its cap and its peak are its own. Rows, in order:
 *   full      every token kept (the unit of every share);
 *   default   the configuration as given (method, eviction, budget);
 *   per budget share f (--budgets): each method with kv.budget capped at
 *             f x full's peak bytes on each problem, so no method holds more;
 *   per retention r (--retentions, none by default): kara/per_window at r
 *             (the paper's setting), the other NAME/per_window methods at r,
 *             and every on-demand method capped on each problem at
 *             kara/per_window's peak on it.
 * A row's peak_share is the mean over its problems of peak / full's peak.
 * snapkv's and rkv's trigger slack and lazy's window are scaled to a quarter
 * of the slots the cap stands for. A method that cannot be created within
 * its cap, or a problem it cannot admit, makes an error row (counted wrong,
 * the reason kept) and the exit status 1.
 * Every problem has a token cap (twice its reference thinking length plus
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
#define MAX_ROWS (2 + MAX_POINTS * (2 * MAX_METHODS + 1)) /* a retention adds its reference */

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
     "comma-separated hard caps on each method's peak KV bytes (cache, query rings, scoring scratch), as shares "
     "of full's peak bytes (default: 0.5,0.3,0.2; none to skip)"},
    {"--retentions", true,
     "also run kara/per_window at these retentions, the methods listed NAME/per_window the same way, and every "
     "other method capped at kara/per_window's peak bytes (default: none)"},
    {"--cap-factor", true, "token cap per problem: this many times its think_tokens, plus 64 (default: 2)"},
    {"--limit", true, "use the first N problems of each file (default: all)"},
    {"--out", true, "write the results as CSV (.csv: method,row,share,accuracy,peak_share,...) or JSON (.json)"},
    {"--plot", true, "write an SVG plot of accuracy against the share of full's peak KV bytes"},
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

/* Whether a method runs events over windows, where kara.evict applies. */
static bool window_method(kara_kv_method m) {
    kara_kv_method_info info;
    return kara_kv_method_info_get(m, &info) == KARA_OK && info.compresses && !info.at_budget;
}

/* "kara, chunkkv, ...": the methods with per-window eviction, for a message. */
static void window_methods(char *buf, size_t size) {
    kara_kv_method_info info;
    size_t used = 0;
    buf[0] = 0;
    for (int m = 0; kara_kv_method_info_get((kara_kv_method)m, &info) == KARA_OK && used < size; m++)
        if (window_method((kara_kv_method)m))
            used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? ", " : "", info.name);
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
    if (slash && !window_method(m->method)) {
        char list[256];
        window_methods(list, sizeof list);
        fprintf(stderr, "kara eval: --methods: %s has no per-window eviction (only %s)\n", name, list);
        return 0;
    }
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
// "none" adds no row: the help's default, and what scripts pass to say so
static int add_retention(eval_opts *o, const char *t) {
    return !strcmp(t, "none") || add_fraction(o->retentions, &o->n_retentions, t);
}

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
                       "then every method under hard caps on its peak KV bytes, as shares of full's. A method\n"
                       "that cannot run within its cap is an error row, and the exit status is then 1.\n"
                       "Greedy unless --temp is given.\n\n",
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
    bool dry;            /* counting the rows run_all would run, for the progress line */
    int planned;         /* rows of the whole run */
    kr_progress prog;    /* problems done of planned x tasks */
    uint64_t full_bytes; /* full's largest peak KV bytes over the problems, in plain decoding */
    /* per problem: full's peak bytes (the unit of its shares) and slots, the
     * peak bytes and slots of the row just run (0 where it did not run), and
     * the caps of the row being run (NULL: as configured) */
    uint64_t *full_of, *peak_of, *cap_of, *ref_of;
    int32_t *full_slots_of, *peak_slots_of, *plain_of;
    int32_t *ref_slots_of; /* a retention row's reference peak slots, for the baselines' slacks */
    double cap_f;          /* a budget row's share (its caps are cap_f x full_of), else 0 */
} eval_run;

/* The token cap of a problem: cap_factor x its reference thinking length
 * plus room for the answer, or the configured -n. */
static int32_t token_cap(const eval_opts *o, const kr_eval_task *t) {
    if (t->think_tokens > 0) return (int32_t)lround(o->cap_factor * t->think_tokens) + 64;
    return o->cfg.max_tokens;
}

/* The first problem of a row that could not run: on stderr, and as the
 * row's error (an error row: the method did not fit its cap). */
static void note_failure(kr_task_row *row, const kr_eval_task *t, const char *what) {
    fprintf(stderr, "kara eval: %s: %s: %s%s\n", row->label, t->where, what, kara_last_error());
    snprintf(row->error, sizeof row->error, "%s: %s%s", t->where, what, kara_last_error());
}

/* The context, draft model and generator of one problem, made and freed
 * together. */
typedef struct problem_ctx {
    kara_context *ctx;
    kr_draft_model draft;
    kara_generator *gen;
} problem_ctx;

static void problem_close(problem_ctx *p) {
    if (p->gen) kara_generator_free(p->gen);
    if (p->ctx) {
        kr_draft_model_close(&p->draft);
        kara_context_free(p->ctx);
    }
    memset(p, 0, sizeof *p);
}

/* KR_EXIT_OK with p ready; -1 when the context cannot be made within a cap
 * (the problem fails, the row goes on); an exit code otherwise. */
static int problem_open(const eval_run *e, const kara_context_params *cp, bool capped, kr_task_row *row,
                        problem_ctx *p) {
    const eval_opts *o = e->o;
    memset(p, 0, sizeof *p);
    if (kara_context_create(e->m, cp, &p->ctx) != KARA_OK) {
        p->ctx = NULL;
        if (capped) return -1; /* a cap the method cannot fit (its reservation and one block) */
        fprintf(stderr, "kara eval: %s: %s\n", row->label, kara_last_error());
        return KR_EXIT_CONFIG;
    }
    kara_generator_params gp;
    kara_generator_params_init(&gp);
    gp.sampling = o->cfg.sampling;
    gp.spec = o->cfg.spec;
    gp.draft_max = o->cfg.draft_max;
    gp.draft_p_min = o->cfg.draft_p_min;
    kara_status dst = kr_draft_model_open("eval", &o->cfg, p->ctx, 1, &p->draft);
    if (dst) {
        kara_context_free(p->ctx);
        p->ctx = NULL;
        return kr_exit_for_status(dst);
    }
    gp.draft_ctx = p->draft.ctx;
    if (kara_generator_create(p->ctx, &gp, &p->gen) != KARA_OK) {
        fprintf(stderr, "kara eval: %s\n", kara_last_error());
        p->gen = NULL;
        problem_close(p);
        return KR_EXIT_CONFIG;
    }
    return KR_EXIT_OK;
}

/* The counters a row sums over its problems. */
typedef struct row_sums {
    double think, cached, t_gen, share, cap_share;
    long steps, generated, drafted, accepted, verify;
    int ran;
    bool spec_on;
} row_sums;

/* One problem in a context of its own, under its cap. */
static int run_problem(eval_run *e, const kara_context_params *cp_in, kr_task_row *row, int i, row_sums *sum,
                       char *prompt, char *answer, int32_t *ids, size_t cap) {
    const eval_opts *o = e->o;
    const kr_eval_task *t = &e->tasks->items[i];
    kara_context_params cp = *cp_in;
    cp.n_seq_max = 1;
    cp.verify_max = kr_cli_context_params(&o->cfg).verify_max; /* cp_in is a row's KV settings */
    const bool capped = e->cap_f > 0 || e->cap_of;
    uint64_t cap_i = e->cap_f > 0 ? (uint64_t)floor(e->cap_f * (double)e->full_of[i]) : e->cap_of ? e->cap_of[i] : 0;
    e->peak_of[i] = 0;
    e->peak_slots_of[i] = e->plain_of[i] = 0;
    row->n++;
    if (e->cap_of && !e->cap_of[i]) {
        if (!row->failed++) note_failure(row, t, "the row's reference (kara/per_window) did not run this problem");
        return KR_EXIT_OK;
    }
    if (e->cap_f > 0) kr_kv_fit_slacks(&cp.kv, (int32_t)lround(e->cap_f * e->full_slots_of[i]));
    if (e->cap_of) kr_kv_fit_slacks(&cp.kv, e->ref_slots_of[i]);
    if (capped) {
        cp.kv.budget = cap_i ? cap_i : 1;
        cp.kv.seq_tokens = 0; /* the whole pool the cap leaves after the method's reservation */
        if (cap_i > row->cap_bytes) row->cap_bytes = cap_i;
    }
    problem_ctx p;
    int rc = problem_open(e, &cp, capped, row, &p);
    if (rc < 0) {
        if (!row->failed++) note_failure(row, t, "");
        return KR_EXIT_OK;
    }
    if (rc) return rc;
    kara_kv_stats ks;
    kara_context_kv_stats(p.ctx, &ks);
    row->seq_tokens = ks.seq_tokens;
    row->block_bytes = ks.blocks_total > 0 ? ks.pool_bytes / (uint64_t)ks.blocks_total : 0;
    kara_chat_message msg = {"user", t->prompt};
    size_t len = 0;
    if (kara_chat_apply(e->tmpl, &msg, 1, true, true, prompt, cap, &len) != KARA_OK) {
        fprintf(stderr, "kara eval: %s: %s\n", t->where, kara_last_error());
        problem_close(&p);
        return KR_EXIT_DATAERR;
    }
    int32_t n = 0;
    kara_status st = kara_tokenize(e->m, prompt, (int32_t)len, ids, (int32_t)cap, true, true, &n);
    kara_generator_set_max_tokens(p.gen, token_cap(o, t));
    /* the admission check tells a method that cannot keep what it
     * protects within the share from one that ran and failed */
    if (!st) st = kara_seq_admit(p.ctx, 0, n, token_cap(o, t));
    if (!st) st = kara_generator_start(p.gen, 0, ids, n);
    if (st) {
        if (!row->failed++) note_failure(row, t, "");
        problem_close(&p);
        return KR_EXIT_OK; /* counts as wrong: the request could not run */
    }
    size_t alen = 0;
    kara_piece piece;
    int32_t held_max = 0;
    double t0 = kr_monotonic_seconds();
    while ((st = kara_generator_next(p.gen, &piece)) == KARA_OK) {
        if (piece.channel == KARA_CHANNEL_ANSWER && alen + (size_t)piece.len < cap) {
            memcpy(answer + alen, piece.text, (size_t)piece.len);
            alen += (size_t)piece.len;
        }
        int32_t held = kara_seq_n_cached(p.ctx, 0);
        if (held > held_max) held_max = held;
        sum->cached += held;
        sum->steps++;
    }
    sum->t_gen += kr_monotonic_seconds() - t0;
    if (st < 0) {
        if (!row->failed++) note_failure(row, t, "stopped: ");
        problem_close(&p);
        return KR_EXIT_OK;
    }
    answer[alen] = 0;
    kara_generator_stats gs;
    kara_generator_get_stats(p.gen, &gs);
    sum->think += gs.n_think;
    sum->generated += gs.n_generated;
    /* what plain decoding holds at the end; a verify step holds its
     * drafts too, so peak_slots with drafts can be larger */
    int32_t plain = n + gs.n_generated - 1;
    if (plain > row->plain_peak) row->plain_peak = plain;
    e->plain_of[i] = plain;
    sum->drafted += gs.n_drafted;
    sum->accepted += gs.n_accepted;
    sum->verify += gs.n_verify;
    sum->spec_on |= gs.spec_on;
    row->capped += kara_generator_stop_reason(p.gen) == KARA_STOP_MAX_TOKENS;
    row->correct += kr_eval_answer_matches(answer, t->answer);
    kara_context_kv_stats(p.ctx, &ks);
    uint64_t peak = kara_context_kv_bytes_peak(p.ctx);
    if (held_max > row->peak_slots) row->peak_slots = held_max;
    if (peak > row->kv_peak) row->kv_peak = peak;
    if (ks.cache_bytes_peak > row->cache_peak) row->cache_peak = ks.cache_bytes_peak;
    if (ks.reserved_bytes > row->reserved) row->reserved = ks.reserved_bytes;
    row->events += ks.events;
    row->evicted += ks.slots_evicted;
    e->peak_of[i] = peak;
    e->peak_slots_of[i] = held_max;
    if (e->full_of[i]) {
        sum->share += (double)peak / (double)e->full_of[i];
        sum->cap_share += (double)cap_i / (double)e->full_of[i];
    }
    sum->ran++;
    problem_close(&p);
    return KR_EXIT_OK;
}

static int run_config(eval_run *e, const kara_context_params *cp_in, kr_task_row *row) {
    const eval_opts *o = e->o;
    const kr_eval_tasks *tasks = e->tasks;
    size_t cap = 1 << 16;
    char *prompt = malloc(cap), *answer = malloc(cap);
    int32_t *ids = malloc(cap * sizeof *ids);
    row_sums sum;
    memset(&sum, 0, sizeof sum);
    int rc = prompt && answer && ids ? KR_EXIT_OK : KR_EXIT_SOFTWARE;
    for (int i = 0; i < tasks->n && rc == KR_EXIT_OK; i++) {
        rc = run_problem(e, cp_in, row, i, &sum, prompt, answer, ids, cap);
        char what[96];
        snprintf(what, sizeof what, "row %d/%d: %s", e->n_rows, e->planned, row->label);
        kr_progress_update(&e->prog, (double)(e->n_rows - 1) * tasks->n + i + 1, "problems", what, false);
    }
    if (o->cfg.spec != KARA_SPEC_NONE)
        fprintf(stderr,
                "kara eval: %s: speculative %s: %ld tokens drafted, %ld accepted (%.1f%%), in %ld verify steps of %ld "
                "tokens generated\n",
                row->label, sum.spec_on ? "on" : "off (the context batch holds no drafts)", sum.drafted, sum.accepted,
                sum.drafted ? 100.0 * (double)sum.accepted / (double)sum.drafted : 0.0, sum.verify, sum.generated);
    int done = row->n - row->failed;
    row->think_tokens = done > 0 ? sum.think / done : 0;
    row->cached_slots = sum.steps ? sum.cached / (double)sum.steps : 0;
    row->tok_s = sum.t_gen > 0 ? (double)sum.generated / sum.t_gen : 0;
    row->peak_share = sum.ran ? sum.share / sum.ran : 0;
    row->cap_share = e->cap_f > 0 ? e->cap_f : sum.ran && e->cap_of ? sum.cap_share / sum.ran : 0;
    free(prompt);
    free(answer);
    free(ids);
    return rc;
}

static void print_header(FILE *f) {
    fprintf(f, "%-20s %7s %6s %5s %7s %6s %9s %10s %9s %11s %12s %9s %7s %8s %8s %10s\n", "method", "kv", "share", "n",
            "acc", "capped", "think_tok", "mean_slots", "peak_slot", "cache_KiB", "reserved_KiB", "tok/s", "events",
            "evicted", "cap", "peak_share");
}

static void print_row(FILE *f, const kr_task_row *r) {
    char kv[16];
    if (!strcmp(r->axis, "-"))
        snprintf(kv, sizeof kv, "-");
    else
        snprintf(kv, sizeof kv, "%s%.2f", !strcmp(r->axis, "budget") ? "" : "r=", r->x);
    char capv[16];
    if (r->cap_bytes)
        snprintf(capv, sizeof capv, "%.4f", r->cap_share);
    else
        snprintf(capv, sizeof capv, "-");
    fprintf(f, "%-20s %7s %6d %5d %6.1f%% %6d %9.1f %10.1f %9d %11.1f %12.1f %9.1f %7llu %8llu %8s %10.4f\n", r->label,
            kv, r->seq_tokens, r->n, r->n ? 100.0 * r->correct / r->n : 0.0, r->capped, r->think_tokens,
            r->cached_slots, r->peak_slots, r->cache_peak / 1024.0, r->reserved / 1024.0, r->tok_s,
            (unsigned long long)r->events, (unsigned long long)r->evicted, capv, r->peak_share);
    if (r->error[0])
        fprintf(f, "%-20s error row: %d of %d problems could not run (counted wrong): %s\n", "", r->failed, r->n,
                r->error);
    fflush(f);
}

/* One row. cap: the row's hard cap on peak KV bytes (kv.budget: pool, query
 * rings and scoring scratch together), 0 to run as configured. */
static kr_task_row *new_row(eval_run *e, const kara_context_params *cp, const char *label, const char *axis, double x) {
    kr_task_row *r = &e->rows[e->n_rows++];
    memset(r, 0, sizeof *r);
    snprintf(r->label, sizeof r->label, "%s", label);
    r->method = cp->kv.method;
    r->evict = (kara_kv_evict)kr_kv_int(&cp->kv, "kara.evict");
    r->axis = axis;
    r->x = x;
    r->budget_tokens = kr_kv_int(&cp->kv, "baselines.budget_tokens");
    return r;
}

/* One row. Its caps, per problem: cap_f x full's peak bytes on the problem
 * (a budget row), cap_of[i] (a retention row, NULL-free), or none (cap_f 0
 * and cap_of NULL: as configured). */
static int run_row(eval_run *e, const kara_context_params *cp, const char *label, const char *axis, double x,
                   double cap_f, uint64_t *cap_of) {
    kr_task_row *r = new_row(e, cp, label, axis, x);
    if (e->dry) return KR_EXIT_OK;
    e->cap_f = cap_f;
    e->cap_of = cap_of;
    bool full = e->n_rows == 1;
    if (full) memset(e->full_of, 0, (size_t)e->tasks->n * sizeof *e->full_of);
    int rc = run_config(e, cp, r);
    if (full) {
        /* full's peak bytes on each problem in plain decoding (its most
         * slots held, in whole blocks), so that the shares do not depend on
         * --spec; a problem full could not run has none, and no share */
        int32_t bs = cp->kv.block_size > 0 ? cp->kv.block_size : 16;
        for (int i = 0; i < e->tasks->n; i++) {
            int32_t slots = e->plain_of[i];
            e->full_slots_of[i] = slots;
            e->full_of[i] = slots ? (uint64_t)((slots + bs - 1) / bs) * r->block_bytes + r->reserved : 0;
            if (e->full_of[i] > e->full_bytes) e->full_bytes = e->full_of[i];
        }
        r->peak_share = e->full_bytes ? 1.0 : 0.0;
    }
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

/* A row that cannot be run at all (nothing to match its cap to): an error
 * row with the reason, every problem counted wrong. */
static void refuse_row(eval_run *e, const kara_context_params *cp, const char *label, double x, const char *why) {
    kr_task_row *r = new_row(e, cp, label, "retention", x);
    if (e->dry) return;
    snprintf(r->error, sizeof r->error, "%s", why);
    r->n = r->failed = e->tasks->n;
    fprintf(stderr, "kara eval: %s at r %.2f: %s\n", label, x, why);
    print_row(stdout, r);
}

/* The reference row of a retention: Kara evicting per window. */
static bool is_reference(const method_spec *ms) {
    return !ms->as_configured && ms->method == KARA_KV_METHOD_KARA && ms->evict == KARA_KV_EVICT_PER_WINDOW;
}

static kara_context_params method_params(const eval_opts *o, const method_spec *ms, const char *evict) {
    kara_context_params cp = o->cfg.context;
    cp.kv.method = ms->method;
    kr_kv_set(&cp.kv, "kara.evict", evict);
    return cp;
}

/* full first (always: its peak bytes are the unit of every share), the
 * configuration as given, then each budget and retention row.
 *
 * Full's peak bytes are those of plain decoding (run_row). A budget row
 * caps each method's peak bytes at share x those. A retention row runs
 * kara/per_window at that retention (as the reference, listed or not) and
 * every other window method listed NAME/per_window the same way; every
 * method listed on demand (the threshold baselines, kara, chunkkv, ...) runs
 * under a cap of the reference's measured peak bytes, so that no method in
 * the row holds more memory than Kara did. */
static int run_all(eval_run *e) {
    const eval_opts *o = e->o;
    kara_context_params cp = o->cfg.context;
    cp.kv.method = KARA_KV_METHOD_FULL;
    e->full_bytes = 0;
    int rc = run_row(e, &cp, "full", "-", 1.0, 0, NULL);
    if (rc) return rc;
    int32_t full_peak = e->rows[0].plain_peak;
    if (!e->dry && e->full_bytes)
        fprintf(stderr,
                "kara eval: full's peak: up to %d slots, %.1f KiB (plain decoding); each problem's shares are of "
                "full's peak bytes on it\n",
                full_peak, e->full_bytes / 1024.0);
    if (!e->dry && !e->full_bytes) {
        fprintf(stderr, "kara eval: full's peak bytes are 0 (no problem ran): no share can be set\n");
        return KR_EXIT_DATAERR;
    }
    char label[48];
    snprintf(label, sizeof label, "default (%s)", kara_kv_method_name(o->cfg.context.kv.method));
    if (listed(o, true, 0) && (rc = run_row(e, &o->cfg.context, label, "-", 1.0, 0, NULL))) return rc;
    for (int b = 0; b < o->n_budgets && !rc; b++)
        for (int i = 0; i < o->n_methods && !rc; i++) {
            const method_spec *ms = &o->methods[i];
            if (ms->as_configured || ms->method == KARA_KV_METHOD_FULL) continue;
            cp = method_params(o, ms, ms->evict == KARA_KV_EVICT_ON_DEMAND ? "on_demand" : "per_window");
            rc = run_row(e, &cp, ms->label, "budget", o->budgets[b], o->budgets[b], NULL);
        }
    static const method_spec reference = {false, KARA_KV_METHOD_KARA, KARA_KV_EVICT_PER_WINDOW, "kara/per_window"};
    for (int ri = 0; ri < o->n_retentions && !rc; ri++) {
        cp = method_params(o, &reference, "per_window");
        cp.kv.retention = o->retentions[ri];
        rc = run_row(e, &cp, reference.label, "retention", o->retentions[ri], 0, NULL);
        const kr_task_row *ref = &e->rows[e->n_rows - 1];
        /* what Kara held on each problem (0 where it did not run); none ran: nothing to match */
        bool ref_ran = !e->dry && ref->failed < ref->n;
        if (!e->dry) {
            memcpy(e->ref_of, e->peak_of, (size_t)e->tasks->n * sizeof *e->ref_of);
            memcpy(e->ref_slots_of, e->peak_slots_of, (size_t)e->tasks->n * sizeof *e->ref_slots_of);
        }
        for (int i = 0; i < o->n_methods && !rc; i++) {
            const method_spec *ms = &o->methods[i];
            if (ms->as_configured || ms->method == KARA_KV_METHOD_FULL || is_reference(ms)) continue;
            if (ms->evict == KARA_KV_EVICT_PER_WINDOW) {
                cp = method_params(o, ms, "per_window");
                cp.kv.retention = o->retentions[ri];
                rc = run_row(e, &cp, ms->label, "retention", o->retentions[ri], 0, NULL);
                continue;
            }
            cp = method_params(o, ms, "on_demand");
            if (!e->dry && !ref_ran)
                refuse_row(e, &cp, ms->label, o->retentions[ri],
                           "kara/per_window ran no problem at this retention: no peak bytes to cap this method at");
            else
                rc = run_row(e, &cp, ms->label, "retention", o->retentions[ri], 0, e->ref_of);
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
    size_t n = (size_t)(tasks.n > 0 ? tasks.n : 1);
    e.full_of = calloc(n, sizeof *e.full_of);
    e.peak_of = calloc(n, sizeof *e.peak_of);
    e.ref_of = calloc(n, sizeof *e.ref_of);
    e.full_slots_of = calloc(n, sizeof *e.full_slots_of);
    e.peak_slots_of = calloc(n, sizeof *e.peak_slots_of);
    e.plain_of = calloc(n, sizeof *e.plain_of);
    e.ref_slots_of = calloc(n, sizeof *e.ref_slots_of);
    if (!e.full_of || !e.peak_of || !e.ref_of || !e.full_slots_of || !e.peak_slots_of || !e.plain_of ||
        !e.ref_slots_of) {
        fprintf(stderr, "kara eval: out of memory for %d problems' peaks\n", tasks.n);
        rc = KR_EXIT_SOFTWARE;
        goto done;
    }
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
    int errors = 0;
    for (int i = 0; i < e.n_rows; i++) errors += e.rows[i].error[0] != 0;
    if (rc == KR_EXIT_OK && errors) {
        fprintf(stderr,
                "kara eval: %d of %d rows are error rows (their methods could not run; the table says why); exit %d\n",
                errors, e.n_rows, KR_EXIT_PARTIAL);
        rc = KR_EXIT_PARTIAL;
    }
done:
    free(e.full_of);
    free(e.peak_of);
    free(e.ref_of);
    free(e.full_slots_of);
    free(e.peak_slots_of);
    free(e.plain_of);
    free(e.ref_slots_of);
    kara_model_free(m);
    kr_eval_tasks_free(&tasks);
    return rc;
}

const kr_command kr_cmd_eval = {"eval", "accuracy on JSONL problems for each KV method under KV budgets", eval_main};
