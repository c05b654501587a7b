/* cmd_eval_kv.c - `kara eval-kv`: how faithful each KV method is to `full`
 * on one model and one text (docs/KV_COMPRESSION.md, "The tool: `kara
 * eval-kv`"; the window methods run per window, docs/KARA_METHOD.md
 * section 7.2): teacher-forced KL, top-1 agreement and perplexity ratio,
 * the first greedy divergence, a needle placed in generated text,
 * retention per region, and the cost of compression events. The baselines
 * that take a token budget (streaming, snapkv, h2o, rkv, lazy) get Kara's measured
 * mean footprint at the same retention unless --kv-budget-tokens is given
 * (the original specification's `budget_tokens: auto`, docs/KARA_METHOD.md
 * section 13). */
#include <math.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_args.h"
#include "cli_config.h"
#include "progress.h"
#include "commands.h"
#include "cpu_features.h"
#include "eval_kv.h"
#include "exit_codes.h"
#include "kara.h"
#include "kv_knob.h"

#define MAX_METHODS 16 /* at least every kara_kv_method */
#define MAX_RETENTIONS 16
#define MAX_CAPS 16

/* A TinyStories-like text written for this tool, used when no -f is given. */
static const char k_builtin_text[] =
    "Once upon a time, there was a little girl named Mia. Mia loved to play in the garden behind her house. "
    "One sunny day, she saw a small bird sitting on a branch. The bird looked sad because it could not fly. "
    "Mia said, \"Do not be sad, little bird. I will help you.\" She ran inside and got a box and a soft towel. "
    "She put the bird in the box and gave it some water. Every day, Mia came to see the bird. She sang songs "
    "and told it stories about the big blue sky.\n"
    "One morning, Mia's mom came into the garden. \"What is in the box?\" she asked. Mia showed her the bird. "
    "Mom smiled and said, \"You are a kind girl. The bird is getting strong.\" Mia was very happy. The next day, "
    "the bird hopped out of the box and flapped its wings. It flew up to the tree and sang a happy song. Mia "
    "clapped her hands and laughed.\n"
    "Then the bird flew down and sat on Mia's hand. It was saying thank you. Mia said, \"You can come back and "
    "play with me any time.\" From that day on, the bird came to the garden every morning. Mia and the bird "
    "were best friends.\n"
    "One day, Mia's friend Tom came over to play. Tom had a big red ball. They kicked the ball around the "
    "garden and ran after it. The ball rolled under the tree where the bird lived. Tom wanted to climb the "
    "tree, but Mia said, \"Be careful, Tom. The bird has a nest up there.\" Tom looked up and saw three small "
    "eggs in the nest. \"Wow,\" he said. \"I will be very quiet.\" They sat under the tree and watched the nest "
    "all afternoon.\n"
    "A few days later, the eggs opened and three baby birds came out. They were very hungry and made a lot of "
    "noise. The mother bird flew back and forth to bring them food. Mia and Tom were so happy to see the babies. "
    "They learned that being kind and gentle is the best way to make new friends. And every morning after that, "
    "the garden was full of happy songs.\n";

static const char k_needle[] = "Remember, the code is 48213.";
static const char k_question[] = "What is the code? The code is";
static const char k_code[] = "48213";

typedef struct eval_opts {
    kara_config cfg;
    const char *text_path;
    const char *out_path;
    kara_kv_method methods[MAX_METHODS];
    int n_methods;
    float retentions[MAX_RETENTIONS];
    int n_retentions;
    float caps[MAX_CAPS]; /* --budgets: hard caps on peak KV bytes, as shares of full's */
    int n_caps;
    long long prompt_tokens, max_tokens, free_tokens, region, noise_threads;
    bool equal_mean; /* --budget-match equal-mean */
    bool ref_dtype_set;
    kara_kv_dtype ref_dtype; /* --ref-kv-dtype: the reference's KV type, when not --kv-dtype's */
    int n_depths;
    float depths[KR_EVAL_MAX_DEPTHS];
} eval_opts;

static const kr_cli_flag eval_flags[] = {
    {"-f|--file", true, "text replayed as if generated (default: a built-in short story)"},
    {"--methods", true, "comma-separated methods (default: all; full is always the reference)"},
    {"--retention", true, "comma-separated retentions (default: kara.retention, i.e. --kv-retention)"},
    {"--budgets", true,
     "comma-separated hard caps on each method's peak KV bytes (cache, query rings, scoring scratch), as shares "
     "of full's peak bytes: every method runs under each cap, Kara as configured (kara.evict); a method that "
     "cannot run within a cap is an error row and the exit status is 1 (default: none)"},
    {"--prompt-tokens", true, "tokens of the text used as the prompt (default: 16)"},
    {"--max-tokens", true, "at most this many replayed tokens (default: what the context holds)"},
    {"--free-tokens", true, "cap of the free-running comparison (default: 256)"},
    {"--needle-depths", true, "comma-separated depths in (0,1), or 'none' (default: 0.1,0.3,0.5,0.7,0.9)"},
    {"--region", true, "region size of the retention profile (default: 2 x kara.interval: 256 at 128)"},
    {"--noise-threads", true, "thread count of the full-vs-full noise run (default: 1, or 2 when -t 1)"},
    {"--budget-match", true,
     "kara-mean: budget = Kara's mean slots (default, the spec's auto); equal-mean: the "
     "budget whose own mean footprint equals Kara's"},
    {"--ref-kv-dtype", true,
     "KV type of the full reference (default: --kv-dtype's); another one adds a row full(TYPE) of --kv-dtype "
     "measured against it"},
    {"--out", true, "also write the results to FILE.csv or FILE.json"},
};
#define N_EVAL_FLAGS (int)(sizeof eval_flags / sizeof eval_flags[0])

static bool parse_methods(const char *list, eval_opts *o) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    o->n_methods = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        kara_kv_method m;
        if (kara_kv_method_parse(tok, &m) != KARA_OK) {
            fprintf(stderr, "kara eval-kv: --methods: %s\n", kara_last_error());
            return false;
        }
        bool dup = false;
        for (int i = 0; i < o->n_methods; i++) dup |= o->methods[i] == m;
        if (!dup && o->n_methods < MAX_METHODS) o->methods[o->n_methods++] = m;
    }
    if (!o->n_methods) {
        fprintf(stderr, "kara eval-kv: --methods: no method given\n");
        return false;
    }
    return true;
}

/* "0.1,0.3" into out (each within [lo, hi]); returns the count or -1. */
static int parse_floats(const char *flag, const char *list, double lo, double hi, float *out, int max) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    int n = 0;
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        double v;
        if (!kr_arg_float("eval-kv", flag, tok, lo, hi, &v)) return -1;
        if (n == max) {
            fprintf(stderr, "kara eval-kv: %s: at most %d values\n", flag, max);
            return -1;
        }
        out[n++] = (float)v;
    }
    if (!n) fprintf(stderr, "kara eval-kv: %s: no value given\n", flag);
    return n ? n : -1;
}

/* Parse flags; returns -1 to go on, else the exit code. */
static int parse(int argc, char **argv, eval_opts *o) {
    o->prompt_tokens = 16;
    o->free_tokens = 256;
    o->noise_threads = 0;
    o->n_depths = 5;
    for (int i = 0; i < 5; i++) o->depths[i] = 0.1f + 0.2f * (float)i;
    kara_kv_method_info info;
    o->n_methods = 0;
    /* default: every method that runs on any model (not those needing a retention prior) */
    for (int m = 0; o->n_methods < MAX_METHODS && kara_kv_method_info_get((kara_kv_method)m, &info) == KARA_OK; m++)
        if (!info.needs_prior) o->methods[o->n_methods++] = (kara_kv_method)m;
    kr_cli_parsed cli;
    int rc = kr_cli_parse("eval-kv", argc, argv, eval_flags, N_EVAL_FLAGS, &o->cfg, &cli);
    o->retentions[0] = o->cfg.context.kv.retention;
    o->n_retentions = 1;
    for (int i = 0; rc < 0 && i < cli.n_args; i++) {
        const kr_cli_arg *a = &cli.args[i];
        const kr_cli_flag *f = a->flag;
        bool ok = true;
        if (!f) {
            fprintf(stderr, "kara eval-kv: unexpected argument '%s'\n", a->value);
            ok = false;
        } else if (kr_cli_flag_is(f, "-f")) {
            o->text_path = a->value;
        } else if (kr_cli_flag_is(f, "--out")) {
            o->out_path = a->value;
        } else if (kr_cli_flag_is(f, "--methods")) {
            ok = parse_methods(a->value, o);
        } else if (kr_cli_flag_is(f, "--retention")) {
            o->n_retentions = parse_floats("--retention", a->value, 0.0, 1.0, o->retentions, MAX_RETENTIONS);
            ok = o->n_retentions > 0;
        } else if (kr_cli_flag_is(f, "--budgets")) {
            if (!strcmp(a->value, "none"))
                o->n_caps = 0;
            else
                ok = (o->n_caps = parse_floats("--budgets", a->value, 1e-6, 1.0, o->caps, MAX_CAPS)) > 0;
        } else if (kr_cli_flag_is(f, "--needle-depths")) {
            if (!strcmp(a->value, "none"))
                o->n_depths = 0;
            else
                ok = (o->n_depths =
                          parse_floats("--needle-depths", a->value, 0.0, 1.0, o->depths, KR_EVAL_MAX_DEPTHS)) > 0;
        } else if (kr_cli_flag_is(f, "--prompt-tokens")) {
            ok = kr_arg_int("eval-kv", a->flag->names, a->value, 1, 1 << 20, &o->prompt_tokens);
        } else if (kr_cli_flag_is(f, "--max-tokens")) {
            ok = kr_arg_int("eval-kv", a->flag->names, a->value, 2, 1 << 24, &o->max_tokens);
        } else if (kr_cli_flag_is(f, "--free-tokens")) {
            ok = kr_arg_int("eval-kv", a->flag->names, a->value, 1, 1 << 24, &o->free_tokens);
        } else if (kr_cli_flag_is(f, "--region")) {
            ok = kr_arg_int("eval-kv", a->flag->names, a->value, 1, 1 << 20, &o->region);
        } else if (kr_cli_flag_is(f, "--budget-match")) {
            o->equal_mean = !strcmp(a->value, "equal-mean");
            if (!o->equal_mean && strcmp(a->value, "kara-mean")) {
                fprintf(stderr, "kara eval-kv: --budget-match: expected kara-mean or equal-mean, got '%s'\n", a->value);
                ok = false;
            }
        } else if (kr_cli_flag_is(f, "--ref-kv-dtype")) {
            ok = kara_kv_dtype_parse(a->value, &o->ref_dtype) == KARA_OK;
            if (!ok) fprintf(stderr, "kara eval-kv: --ref-kv-dtype: %s\n", kara_last_error());
            o->ref_dtype_set = ok;
        } else if (kr_cli_flag_is(f, "--noise-threads")) {
            ok = kr_arg_int("eval-kv", a->flag->names, a->value, 1, 4096, &o->noise_threads);
        }
        if (!ok) rc = KR_EXIT_USAGE;
    }
    return kr_cli_finish("eval-kv",
                         "usage: kara eval-kv -m MODEL [-f TEXT] [--methods full,kara,...] [--retention R[,R...]] "
                         "[--budgets S[,S...]] [--out FILE.csv|FILE.json] [options]\n\n"
                         "Replays a text under each KV method and compares it with `full`: per-step KL and top-1\n"
                         "agreement, perplexity ratio, first greedy divergence, a needle in the generated text,\n"
                         "retention per region, KV memory and the cost of compression events. streaming, snapkv,\n"
                         "h2o, rkv and lazy get Kara's measured mean footprint as their token budget unless\n"
                         "--kv-budget-tokens is set. --budgets adds rows with every method under a hard cap on its\n"
                         "peak KV bytes (cache, query rings, scoring scratch), as a share of full's.\n\n",
                         eval_flags, N_EVAL_FLAGS, &o->cfg, &cli, rc);
}

/* Tokens of a piece of text to insert mid-stream: SPM vocabularies put a
 * space in front by themselves, byte-level BPE ones need it written. */
static int32_t tokenize_insert(const kara_model *m, const char *text, int32_t *out, int32_t max) {
    int32_t probe[8], n = 0, len = 0;
    char piece[16];
    bool prefixed = kara_tokenize(m, "x", 1, probe, 8, false, false, &n) == KARA_OK && n >= 1 &&
        kara_token_to_piece(m, probe[0], piece, sizeof piece, false, &len) == KARA_OK && len >= 1 && piece[0] == ' ';
    char buf[256];
    snprintf(buf, sizeof buf, "%s%s", prefixed ? "" : " ", text);
    return kara_tokenize(m, buf, (int32_t)strlen(buf), out, max, false, false, &n) == KARA_OK ? n : -1;
}

static bool is_budget_method(kara_kv_method m) {
    kara_kv_method_info info;
    return kara_kv_method_info_get(m, &info) == KARA_OK && info.at_budget;
}

/* Slots past its budget a method's cache reaches before its event (0:
 * fires on the first slot over), and the newest slots it always keeps. */
static int32_t method_key(const kara_kv_params *kv, kara_kv_method m, bool tail) {
    kara_kv_method_info info;
    if (kara_kv_method_info_get(m, &info) != KARA_OK) return 0;
    const char *key = tail ? info.tail_key : info.slack_key;
    return key ? kr_kv_int(kv, key) : 0;
}
static int32_t budget_slack(const kara_kv_params *kv, kara_kv_method m) { return method_key(kv, m, false); }
static int32_t budget_tail(const kara_kv_params *kv, kara_kv_method m) { return method_key(kv, m, true); }

/* Mean slots a budget baseline holds over the replay (after each of the
 * n_steps single-token decodes from n_prompt slots) with token budget b:
 * streaming and h2o cut back to b as soon as they exceed it, snapkv, rkv
 * and lazy once it reaches b + slack (docs/KARA_METHOD.md section 11). */
static double baseline_mean(int32_t b, int32_t n_prompt, int32_t n_steps, int32_t slack) {
    double sum = 0;
    int32_t n = n_prompt;
    for (int32_t t = 0; t < n_steps; t++) {
        n++;
        if (slack > 0 ? n >= b + slack : n > b) n = b;
        sum += n;
    }
    return n_steps ? sum / n_steps : n_prompt;
}

/* The smallest budget whose simulated mean footprint reaches target
 * (--budget-match equal-mean); the budget of snapkv, rkv and lazy must
 * hold the prompt and the newest slots they keep (tail). */
static int32_t equal_mean_budget(double target, int32_t n_prompt, int32_t n_steps, int32_t slack, int32_t tail) {
    int32_t lo = tail > 0 ? n_prompt + tail + 1 : 1, hi = n_prompt + n_steps + 1;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (baseline_mean(mid, n_prompt, n_steps, slack) >= target)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

typedef struct eval_job {
    const eval_opts *o;
    const kr_eval_setup *s;
    kr_eval_ref ref;
    kr_eval_row *rows;
    int n_rows;
    int32_t threads;
    int planned;        /* rows run_all will run */
    char last_err[200]; /* the last row that failed: why */
    kr_progress prog;   /* rows done of planned */
} eval_job;

/* The rows run_all runs: full, the noise run, then per retention Kara
 * (when asked for, or when it sets the baselines' budget) and the others. */
static int planned_rows(const eval_opts *o, const kara_context_params *base) {
    bool want_kara = false, want_budget = false;
    int others = 0;
    for (int i = 0; i < o->n_methods; i++) {
        want_kara |= o->methods[i] == KARA_KV_METHOD_KARA;
        want_budget |= is_budget_method(o->methods[i]);
        others += o->methods[i] != KARA_KV_METHOD_FULL && o->methods[i] != KARA_KV_METHOD_KARA;
    }
    bool kara_row = want_kara || (want_budget && kr_kv_int(&base->kv, "baselines.budget_tokens") <= 0);
    bool dtype_row = o->ref_dtype_set && o->ref_dtype != base->kv.dtype;
    return 2 + dtype_row + o->n_retentions * (kara_row + others) + o->n_caps * (others + want_kara);
}

static kara_status run_row(eval_job *j, const kara_context_params *cp, const char *label, float retention,
                           bool make_ref) {
    kr_eval_row *r = &j->rows[j->n_rows];
    memset(r, 0, sizeof *r);
    snprintf(r->label, sizeof r->label, "%s", label);
    r->method = cp->kv.method;
    r->retention = retention;
    r->cap_share = -1.0f;
    r->budget_tokens = is_budget_method(cp->kv.method) ? kr_kv_int(&cp->kv, "baselines.budget_tokens") : 0;
    r->threads = cp->n_threads > 0 ? cp->n_threads : kr_cpu_count();
    char what[96];
    int k = snprintf(what, sizeof what, "row %d/%d: %s", j->n_rows + 1, j->planned, label);
    if (retention >= 0) k += snprintf(what + k, sizeof what - (size_t)k, " r=%.2f", retention);
    if (r->budget_tokens) snprintf(what + k, sizeof what - (size_t)k, " budget=%d", r->budget_tokens);
    kr_progress_update(&j->prog, j->n_rows, "rows", what, true);
    char err[512];
    kara_status st = kr_eval_method(j->s, cp, &j->ref, make_ref, r, err, sizeof err);
    if (st) {
        kr_progress_end(&j->prog);
        fprintf(stderr, "kara eval-kv: %s: %s\n", label, err);
        snprintf(j->last_err, sizeof j->last_err, "%.199s", err);
        return st;
    }
    j->n_rows++;
    return KARA_OK;
}

/* The cap rows (--budgets): every method but full under a hard cap on
 * its peak KV bytes (kv.budget: blocks, query rings and scoring scratch
 * together), cap x full's peak; the budget baselines keep what the pool
 * holds (baselines.budget_tokens auto) and Kara evicts as configured. A
 * method that cannot run within its cap is an error row, not a stop. */
static kara_status run_caps(eval_job *j, const kara_context_params *base, uint64_t full_peak, double full_slots) {
    const eval_opts *o = j->o;
    for (int ci = 0; ci < o->n_caps; ci++) {
        for (int i = 0; i < o->n_methods; i++) {
            kara_kv_method m = o->methods[i];
            if (m == KARA_KV_METHOD_FULL) continue;
            kara_context_params cp = *base;
            cp.kv.method = m;
            cp.kv.budget = (uint64_t)floor(o->caps[ci] * (double)full_peak);
            if (cp.kv.budget < 1) cp.kv.budget = 1;
            cp.kv.seq_tokens = 0; /* the whole pool the cap leaves after the method's reservation */
            kr_kv_set_num(&cp.kv, "baselines.budget_tokens", 0);
            kr_kv_fit_slacks(&cp.kv, (int32_t)lround(o->caps[ci] * full_slots));
            kr_eval_row *r = &j->rows[j->n_rows];
            const char *label = kara_kv_method_name(m);
            kara_status st = run_row(j, &cp, label, -1.0f, false);
            bool fatal = st == KARA_ERR_NOMEM || st == KARA_ERR_IO || st == KARA_ERR_INTERNAL ||
                st == KARA_ERR_ABORTED || st == KARA_ERR_DEVICE;
            if (fatal) return st;
            if (st) {
                /* run_row printed why; the row stays, marked as not run */
                memset(r, 0, sizeof *r);
                snprintf(r->label, sizeof r->label, "%.39s", label);
                r->method = m;
                r->retention = -1.0f;
                memcpy(r->error, j->last_err, sizeof r->error);
                j->n_rows++;
            }
            r->cap_share = o->caps[ci];
            r->cap_bytes = cp.kv.budget;
        }
    }
    return KARA_OK;
}

/* full, the noise floor, then per retention Kara (its mean footprint sets
 * the budget of the budget baselines) and the other methods. */
static kara_status run_all(eval_job *j, const kara_context_params *base_in) {
    const eval_opts *o = j->o;
    /* fidelity at fixed retentions: the window methods keep `retention` of
     * every window (the paper's setting), whatever the budget */
    kara_context_params base_pw = *base_in;
    kr_kv_set(&base_pw.kv, "kara.evict", "per_window");
    const kara_context_params *base = &base_pw;
    kara_context_params cp = *base;
    cp.kv.method = KARA_KV_METHOD_FULL;
    /* --ref-kv-dtype: the reference and its noise run in that type, then
     * full in --kv-dtype's against it (the type's own error) */
    const bool dtype_row = o->ref_dtype_set && o->ref_dtype != base->kv.dtype;
    char label[40];
    if (dtype_row) cp.kv.dtype = o->ref_dtype;
    snprintf(label, sizeof label, dtype_row ? "full(%s)" : "full", kara_kv_dtype_name(cp.kv.dtype));
    kara_status st = run_row(j, &cp, label, -1.0f, true);
    if (st) return st;
    cp.n_threads = o->noise_threads ? (int32_t)o->noise_threads : (j->threads == 1 ? 2 : 1);
    snprintf(label, sizeof label, "full(t=%d)", cp.n_threads);
    if ((st = run_row(j, &cp, label, -1.0f, false))) return st;
    if (dtype_row) {
        cp = *base;
        cp.kv.method = KARA_KV_METHOD_FULL;
        snprintf(label, sizeof label, "full(%s)", kara_kv_dtype_name(base->kv.dtype));
        if ((st = run_row(j, &cp, label, -1.0f, false))) return st;
    }
    bool want_kara = false, want_budget = false;
    for (int i = 0; i < o->n_methods; i++) {
        want_kara |= o->methods[i] == KARA_KV_METHOD_KARA;
        want_budget |= is_budget_method(o->methods[i]);
    }
    bool auto_budget = kr_kv_int(&base->kv, "baselines.budget_tokens") <= 0;
    for (int ri = 0; ri < o->n_retentions; ri++) {
        float r = o->retentions[ri];
        int32_t budget = kr_kv_int(&base->kv, "baselines.budget_tokens");
        double kr_mean = 0;
        if (want_kara || (want_budget && auto_budget)) {
            cp = *base;
            cp.kv.method = KARA_KV_METHOD_KARA;
            cp.kv.retention = r;
            if ((st = run_row(j, &cp, "kara", r, false))) return st;
            kr_mean = j->rows[j->n_rows - 1].mean_slots;
            if (auto_budget) budget = (int32_t)lround(kr_mean);
        }
        for (int i = 0; i < o->n_methods; i++) {
            kara_kv_method m = o->methods[i];
            if (m == KARA_KV_METHOD_FULL || m == KARA_KV_METHOD_KARA) continue;
            cp = *base;
            cp.kv.method = m;
            cp.kv.retention = r;
            if (is_budget_method(m) && auto_budget && o->equal_mean && j->n_rows > 0)
                budget = equal_mean_budget(kr_mean, j->s->n_prompt, j->s->n_text - 1, budget_slack(&base->kv, m),
                                           budget_tail(&base->kv, m));
            if (is_budget_method(m)) kr_kv_set_num(&cp.kv, "baselines.budget_tokens", budget > 0 ? budget : 1);
            if ((st = run_row(j, &cp, kara_kv_method_name(m), r, false))) return st;
        }
    }
    return run_caps(j, base_in, j->rows[0].peak_kv_bytes, j->rows[0].mean_slots);
}

/* Lay out prompt, replay, free-running and needle lengths within the
 * context. Returns false (message printed) when the text is too short. */
static bool make_setup(const eval_opts *o, kara_model *m, const int32_t *toks, int32_t n_toks, int32_t n_ctx,
                       int32_t interval, int32_t *needle, int32_t n_needle, int32_t *question, int32_t n_question,
                       kr_eval_setup *s) {
    memset(s, 0, sizeof *s);
    s->model = m;
    s->n_vocab = kara_model_n_vocab(m);
    s->n_prompt = (int32_t)(o->prompt_tokens < n_toks - 2 ? o->prompt_tokens : n_toks - 2);
    if (s->n_prompt < 1 || n_ctx < s->n_prompt + 8) {
        fprintf(stderr, "kara eval-kv: the text (%d tokens) or the context (%d) is too short\n", n_toks, n_ctx);
        return false;
    }
    s->prompt = toks;
    s->text = toks + s->n_prompt;
    s->n_text = n_toks - s->n_prompt;
    if (s->n_text > n_ctx - s->n_prompt) s->n_text = n_ctx - s->n_prompt;
    if (o->max_tokens && s->n_text > o->max_tokens) s->n_text = (int32_t)o->max_tokens;
    s->n_free = (int32_t)(o->free_tokens < n_ctx - s->n_prompt ? o->free_tokens : n_ctx - s->n_prompt);
    /* two compression windows per region by default (256 at interval 128,
     * docs/KV_COMPRESSION.md, `regmin`): a region shorter than a window may
     * rightly be empty */
    s->region = o->region ? (int32_t)o->region : 2 * (interval > 0 ? interval : 128);
    s->needle = needle;
    s->n_needle = n_needle;
    s->question = question;
    s->n_question = n_question;
    s->code = k_code;
    s->n_answer = (int32_t)strlen(k_code) + 3;
    s->n_filler = n_ctx - s->n_prompt - n_needle - n_question - s->n_answer;
    if (s->n_filler > s->n_text) s->n_filler = s->n_text;
    s->n_depths = o->n_depths;
    memcpy(s->depths, o->depths, sizeof s->depths);
    if (s->n_depths && s->n_filler < 16) {
        fprintf(stderr, "kara eval-kv: no room for the needle test (filler of %d tokens); skipping it\n", s->n_filler);
        s->n_depths = 0;
    }
    return true;
}

static int eval_main(int argc, char **argv) {
    eval_opts o;
    memset(&o, 0, sizeof o);
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    kara_model *m;
    kara_status st = kr_cli_load_model(&o.cfg, &m);
    if (st) {
        fprintf(stderr, "kara eval-kv: %s\n", kara_last_error());
        return kr_exit_for_status(st);
    }
    size_t len = strlen(k_builtin_text);
    char *file_text = NULL;
    if (o.text_path && !(file_text = kr_read_text_file("eval-kv", o.text_path, &len))) {
        kara_model_free(m);
        return errno == EFBIG ? KR_EXIT_DATAERR : KR_EXIT_NOINPUT;
    }
    const char *text = file_text ? file_text : k_builtin_text;
    int32_t cap = (int32_t)len + 8, needle[64], question[64];
    int32_t *toks = malloc((size_t)cap * sizeof *toks);
    int32_t n_toks = -1;
    if (toks && kara_tokenize(m, text, (int32_t)len, toks, cap, true, false, &n_toks) != KARA_OK) n_toks = -1;
    int32_t n_needle = tokenize_insert(m, k_needle, needle, 64);
    int32_t n_question = tokenize_insert(m, k_question, question, 64);
    free(file_text);
    kara_context_params base = o.cfg.context;
    int32_t n_ctx = base.n_ctx ? base.n_ctx : kara_model_n_ctx_train(m);
    base.n_ctx = n_ctx;
    kr_eval_setup s;
    eval_job job = {&o, &s, {0}, NULL, 0, base.n_threads > 0 ? base.n_threads : kr_cpu_count(), 0, {0}, {0}};
    job.planned = planned_rows(&o, &base);
    kr_progress_init(&job.prog, "kara eval-kv", job.planned);
    rc = KR_EXIT_OK;
    if (n_toks < 0 || n_needle < 0 || n_question < 0) {
        fprintf(stderr, "kara eval-kv: cannot tokenize the text: %s\n", kara_last_error());
        rc = KR_EXIT_DATAERR;
    } else if (!make_setup(&o, m, toks, n_toks, n_ctx, base.kv.interval, needle, n_needle, question, n_question, &s)) {
        rc = KR_EXIT_DATAERR;
    } else {
        job.rows = calloc((size_t)(3 + (o.n_retentions + o.n_caps) * (MAX_METHODS + 1)), sizeof *job.rows);
        if (!job.rows)
            rc = KR_EXIT_SOFTWARE;
        else if ((st = run_all(&job, &base)))
            rc = kr_exit_for_status(st);
        if (!rc) kr_progress_update(&job.prog, job.n_rows, "rows", "done", true);
        kr_progress_end(&job.prog);
    }
    if (!rc) {
        kr_eval_meta meta = {o.cfg.model_path, kara_model_desc(m), o.text_path ? o.text_path : "(built-in)", n_ctx,
                             &base.kv};
        kr_eval_print_table(stdout, &s, &meta, job.rows, job.n_rows);
        if (o.out_path) rc = kr_eval_write(o.out_path, &s, &meta, job.rows, job.n_rows);
        for (int i = 0; !rc && i < job.n_rows; i++)
            if (job.rows[i].error[0]) {
                fprintf(stderr, "kara eval-kv: %s at a cap of %.2f of full's peak bytes did not run: %s\n",
                        job.rows[i].label, job.rows[i].cap_share, job.rows[i].error);
                rc = KR_EXIT_PARTIAL;
            }
    }
    kr_eval_ref_free(&job.ref);
    free(job.rows);
    free(toks);
    kara_model_free(m);
    return rc;
}

const kr_command kr_cmd_eval_kv = {"eval-kv", "measure KV methods against full (KL, needle, memory, cost)", eval_main};
