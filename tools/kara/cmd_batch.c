/* cmd_batch.c - `kara batch JOB.yaml`: run a JSONL file of OpenAI Batch API
 * requests through the continuous-batching engine and append one result
 * line per request (formats: tools/common/batch_jsonl.h; durability and
 * resume: batch_output.h; input order with --ordered: batch_order.h;
 * progress: batch_progress.h).
 *
 * Flow: read the whole input and reject duplicate custom_ids (exit 65,
 * nothing done); open the output, skipping what it already answers; load
 * the model; size the context (max_concurrency, capped to what the KV
 * budget holds); then keep the engine's queue full with this shard's
 * requests, step, and write each request's line as soon as it finishes
 * (--ordered: as soon as every request before it in the input is written).
 * A line that cannot be parsed or a request that can never fit becomes an
 * error line and the job goes on. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "batch_input.h"
#include "batch_jsonl.h"
#include "batch_fit.h"
#include "batch_order.h"
#include "batch_output.h"
#include "batch_progress.h"
#include "batch_resume.h"
#include "batch_shard.h"
#include "cli_args.h"
#include "cli_config.h"
#include "commands.h"
#include "draft_model.h"
#include "exit_codes.h"
#include "safe_output.h"
#include "json.h"
#include "kara.h"
#include "strset.h"
#include "monotonic_clock.h"
#include "kv_knob.h"
#include "prompt_fit.h"

typedef struct batch_opts {
    kara_config cfg;
    const char *stats_json;
    int resume; /* -1: on when the output exists (default), 0, 1 */
    bool ignore_eos, no_fit, optimistic, ordered;
    kr_on_changed on_changed;
    int ordered_hold; /* results held in memory with --ordered; -1: 4 x concurrency + 256 */
    int32_t prefill_chunk;
} batch_opts;

static const kr_cli_flag batch_flags[] = {
    {"-i|--input", true, "requests, JSONL (OpenAI Batch API or {\"id\",\"prompt\"}) [batch.input]"},
    {"-o|--output", true, "results, JSONL, appended one line per request [batch.output]"},
    {"-j|--max-concurrency", true, "requests decoded together [batch.max_concurrency]"},
    {"--shard", true, "K/N: take input lines i with (i-1) % N == K-1 [batch.shard]"},
    {"--resume", false, "skip requests already answered in the output (the default when it exists)"},
    {"--no-resume", false, "empty the output and start over"},
    {"--on-changed", true,
     "rerun|refuse|keep: a request edited since its answer was written runs again (its old answer moves to "
     "OUTPUT.superseded; the default), stops the resume, or keeps the old answer [batch.on_changed]"},
    {"--ordered", false,
     "write the results in input order (held ones wait in memory, then in OUTPUT.hold) [batch.ordered]"},
    {"--ordered-hold", true,
     "with --ordered: results held in memory before they go to OUTPUT.hold (default: 4 x max_concurrency + 256)"},
    {"--think", true, "auto|on|off: thinking for templates that switch it [chat.think]"},
    {"--stats-json", true, "write the final statistics (tokens/s, KV peak, events) to FILE as JSON"},
    {"--ignore-eos", false, "generate past end-of-generation tokens (fixed-length benchmarks)"},
    {"--prefill-chunk", true, "prompt tokens fed per step, all arrivals together (256)"},
    {"--no-fit", false, "keep max_concurrency even when the KV budget cannot hold that many sequences"},
    {"--optimistic", false, "admit on free KV blocks alone: more run at once, more are preempted"},
};
#define N_BATCH_FLAGS (int)(sizeof batch_flags / sizeof batch_flags[0])

static volatile sig_atomic_t g_signal;
static void on_signal(int sig) { g_signal = sig; }

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */

static int set_key(kara_config *cfg, const char *key, const char *value, const char *origin) {
    if (kara_config_set(cfg, key, value, origin) == KARA_OK) return -1;
    fprintf(stderr, "kara batch: %s\n", kara_last_error());
    return KR_EXIT_USAGE;
}

static void usage(bool all) {
    printf("usage: kara batch [JOB.yaml] [options]\n\n"
           "Runs every request of a JSONL file (OpenAI Batch API lines, or {\"id\":...,\"prompt\":...}) through\n"
           "one model with continuous batching under the KV budget, appending one result line per request.\n"
           "A job stopped at any moment (even kill -9) resumes where it was when run again. JOB.yaml is a\n"
           "configuration file (see configs/batch-example.yaml); flags win over it.\n\n"
           "exit status: 0 all answered, 1 the output holds error lines, 64 usage, 65 bad input (duplicate\n"
           "custom_ids, broken output, changed requests under --on-changed refuse), 66 missing input or model,\n"
           "73 cannot create the output, 74 I/O error, 78 configuration (or a resume on another model or other\n"
           "settings than OUTPUT.meta records: an explicit --on-changed rerun reruns every request), 129/130/143\n"
           "interrupted (run again to resume)\n\n");
    kr_cli_usage(stdout, batch_flags, N_BATCH_FLAGS, all);
}

/* Parse: a positional JOB.yaml is loaded like --config before every other
 * file, so flags still win over it. Returns -1 to go on, else the code. */
static int parse(int argc, char **argv, batch_opts *o) {
    kr_cli_parsed cli;
    int rc = kr_cli_parse("batch", argc, argv, batch_flags, N_BATCH_FLAGS, &o->cfg, &cli);
    const char *job = NULL;
    for (int i = 0; rc < 0 && i < cli.n_args; i++)
        if (!cli.args[i].flag) {
            if (job) {
                fprintf(stderr, "kara batch: more than one job file ('%s' and '%s')\n", job, cli.args[i].value);
                rc = KR_EXIT_USAGE;
            }
            job = cli.args[i].value;
        }
    if (rc < 0 && job) {
        kr_cli_parsed_free(&cli);
        char **argv2 = malloc(((size_t)argc + 2) * sizeof *argv2);
        if (!argv2) return KR_EXIT_SOFTWARE;
        int n = 0;
        argv2[n++] = argv[0];
        argv2[n++] = "--config";
        argv2[n++] = (char *)job;
        for (int i = 1; i < argc; i++)
            if (argv[i] != job) argv2[n++] = argv[i];
        argv2[n] = NULL;
        rc = kr_cli_parse("batch", n, argv2, batch_flags, N_BATCH_FLAGS, &o->cfg, &cli);
        free(argv2);
    }
    o->resume = -1;
    o->prefill_chunk = 256;
    o->ordered_hold = -1;
    for (int i = 0; rc < 0 && i < cli.n_args; i++) {
        const kr_cli_arg *a = &cli.args[i];
        long long v;
        if (!a->flag) continue;
        if (kr_cli_flag_is(a->flag, "-i"))
            rc = set_key(&o->cfg, "batch.input", a->value, "--input");
        else if (kr_cli_flag_is(a->flag, "-o"))
            rc = set_key(&o->cfg, "batch.output", a->value, "--output");
        else if (kr_cli_flag_is(a->flag, "-j"))
            rc = set_key(&o->cfg, "batch.max_concurrency", a->value, "--max-concurrency");
        else if (kr_cli_flag_is(a->flag, "--shard"))
            rc = set_key(&o->cfg, "batch.shard", a->value, "--shard");
        else if (kr_cli_flag_is(a->flag, "--think"))
            rc = set_key(&o->cfg, "chat.think", a->value, "--think");
        else if (kr_cli_flag_is(a->flag, "--resume"))
            o->resume = 1;
        else if (kr_cli_flag_is(a->flag, "--no-resume"))
            o->resume = 0;
        else if (kr_cli_flag_is(a->flag, "--on-changed"))
            rc = set_key(&o->cfg, "batch.on_changed", a->value, "--on-changed");
        else if (kr_cli_flag_is(a->flag, "--stats-json"))
            o->stats_json = a->value;
        else if (kr_cli_flag_is(a->flag, "--ignore-eos"))
            o->ignore_eos = true;
        else if (kr_cli_flag_is(a->flag, "--no-fit"))
            o->no_fit = true;
        else if (kr_cli_flag_is(a->flag, "--optimistic"))
            o->optimistic = true;
        else if (kr_cli_flag_is(a->flag, "--ordered"))
            o->ordered = true;
        else if (kr_cli_flag_is(a->flag, "--ordered-hold")) {
            if (!kr_arg_int("batch", "--ordered-hold", a->value, 0, 1 << 24, &v))
                rc = KR_EXIT_USAGE;
            else
                o->ordered_hold = (int)v;
        } else if (kr_cli_flag_is(a->flag, "--prefill-chunk")) {
            if (!kr_arg_int("batch", "--prefill-chunk", a->value, 2, 1 << 20, &v))
                rc = KR_EXIT_USAGE;
            else
                o->prefill_chunk = (int32_t)v;
        }
    }
    if (rc < 0) rc = kr_batch_shard_from_env(&o->cfg);
    if (rc < 0 && cli.help) {
        usage(cli.help_all);
        rc = KR_EXIT_OK;
    } else if (rc < 0 && cli.print_config) {
        kr_cli_print_config(stdout, &o->cfg);
        rc = KR_EXIT_OK;
    }
    kr_cli_parsed_free(&cli);
    if (rc >= 0) return rc;
    o->ordered = o->ordered || o->cfg.batch_ordered;        /* --ordered or batch.ordered: true */
    o->on_changed = (kr_on_changed)o->cfg.batch_on_changed; /* --on-changed wins over batch.on_changed */
    if (o->resume < 0) {
        /* a resume key set in a file decides; the built-in default is "auto" */
        const char *origin = kara_config_origin(&o->cfg, "batch.resume");
        if (origin && strcmp(origin, "default")) o->resume = o->cfg.batch_resume;
    }
    const char *missing = !o->cfg.model_path[0] ? "no model (-m MODEL.gguf or model.path)"
        : !o->cfg.batch_input[0]                ? "no input (-i FILE or batch.input)"
        : !o->cfg.batch_output[0]               ? "no output (-o FILE or batch.output)"
                                                : NULL;
    if (missing) {
        fprintf(stderr, "kara batch: %s; see kara batch --help\n", missing);
        return KR_EXIT_USAGE;
    }
    kr_cli_note_inputs(&o->cfg);
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Requests in flight                                                        */
/* ------------------------------------------------------------------------ */

typedef struct job job;

typedef struct pending {
    struct pending *prev, *next; /* in job.live */
    int line;
    int slot;        /* rank in this shard's input order */
    bool completion; /* /v1/completions: raw text, a text_completion body */
    char *custom_id;
    char *model_name;
    int32_t *tokens;
    int32_t n_tokens;
    char *stops[KR_BATCH_MAX_STOP];
    int n_stop;
    kr_jbuf content, reasoning;
} pending;

static void pending_free(pending *p) {
    if (!p) return;
    free(p->custom_id);
    free(p->model_name);
    free(p->tokens);
    for (int i = 0; i < p->n_stop; i++) free(p->stops[i]);
    kr_jbuf_free(&p->content);
    kr_jbuf_free(&p->reasoning);
    free(p);
}

struct job {
    batch_opts *o;
    kr_batch_input in;
    kr_batch_output out;
    kr_batch_order ord;
    kara_model *model;
    kara_context *ctx;
    kr_draft_model draft; /* speculative.mode draft */
    kara_engine *eng;
    kara_chat_template tmpl;
    kr_prompt_fit fit; /* what the context can hold, and why a prompt cannot fit (prompt_fit.h) */
    char fit_err[320];
    char model_name[KARA_CONFIG_PATH_MAX];
    int *todo;           /* slots (indexes into shard) to run */
    int *shard, n_shard; /* indexes of this shard's lines, answered or not: slot -> input line index */
    kr_strset slot_ids;  /* custom_id -> slot, for results taken back from OUTPUT.hold */
    uint64_t *hash;      /* slot -> request hash, written with its answer */
    kr_batch_meta meta;  /* this run's settings record (batch_meta.h) */
    kr_batch_slots slots;
    kr_batch_resume res;
    int n_todo, next;
    kr_jbuf line, prompt;
    kr_batch_progress prog;
    int ok, failed; /* this run */
    int32_t n_seq;  /* sequences of the context (max_concurrency after fitting) */
    pending *live;  /* requests submitted and not finished */
    int io_error;   /* errno of a failed append */
};

static int write_line(job *j, int slot) {
    kr_batch_add_hash(&j->line, j->hash[slot]);
    if (j->line.failed) {
        j->io_error = ENOMEM;
        return -1;
    }
    int e = kr_batch_order_put(&j->ord, slot, j->line.p, j->line.len);
    if (e) j->io_error = e;
    return e ? -1 : 0;
}

static void write_error(job *j, int slot, const char *custom_id, int line, const char *code, const char *msg) {
    kr_jbuf_reset(&j->line);
    kr_batch_write_error(&j->line, custom_id, line, code, msg);
    write_line(j, slot);
    j->failed++;
    j->prog.failed++;
    j->prog.done++;
}

static const char *status_code(kara_status st) {
    switch (st) {
    case KARA_ERR_CONTEXT_FULL: return KR_BATCH_ERR_CONTEXT;
    case KARA_ERR_KV_BUDGET: return KR_BATCH_ERR_BUDGET;
    case KARA_ERR_ARG:
    case KARA_ERR_TOKEN: return KR_BATCH_ERR_REQUEST;
    default: return KR_BATCH_ERR_INTERNAL;
    }
}

/* Render a request's prompt and tokenize it into p->tokens. */
static kara_status tokenize_request(job *j, const kr_batch_request *r, pending *p) {
    const char *text;
    size_t len;
    bool special;
    if (r->chat) {
        bool think = r->think >= 0 ? r->think == 1 : j->o->cfg.think != KARA_THINK_OFF;
        kara_status st = kara_chat_apply(&j->tmpl, r->msgs, r->n_msgs, true, think, NULL, 0, &len);
        if (st) return st;
        if (!kr_jbuf_reserve(&j->prompt, len + 1)) return KARA_ERR_NOMEM;
        kara_chat_apply(&j->tmpl, r->msgs, r->n_msgs, true, think, j->prompt.p, j->prompt.cap, &len);
        text = j->prompt.p;
        special = true;
    } else {
        text = r->prompt;
        len = strlen(text);
        special = false;
    }
    /* too long for the context whatever its tokens: refused before they are made */
    if (!kr_prompt_fits(&j->fit, "the prompt", text, len, special, j->fit_err, sizeof j->fit_err))
        return KARA_ERR_CONTEXT_FULL;
    int32_t cap = (int32_t)len + 16;
    p->tokens = malloc((size_t)cap * sizeof(int32_t));
    if (!p->tokens) return KARA_ERR_NOMEM;
    /* chat prompts carry their special tokens (and BOS) as text */
    int32_t n = 0;
    kara_status st = kara_tokenize(j->model, text, (int32_t)len, p->tokens, cap, !special, special, &n);
    if (st == KARA_ERR_BUFFER && n > cap) { /* more tokens than bytes + 16: room for them all */
        int32_t *t = realloc(p->tokens, (size_t)n * sizeof(int32_t));
        if (!t) return KARA_ERR_NOMEM;
        p->tokens = t;
        st = kara_tokenize(j->model, text, (int32_t)len, p->tokens, n, !special, special, &n);
    }
    if (st) return st;
    p->n_tokens = n;
    return KARA_OK;
}

/* Parse, tokenize and submit one input line (slot of the shard); failures
 * become error lines. */
static void submit_line(job *j, int slot) {
    const kr_batch_line *l = &j->in.lines[j->shard[slot]];
    kr_json_doc doc;
    kr_batch_request r;
    char err[512];
    const char *code = KR_BATCH_ERR_REQUEST;
    bool ok = kr_batch_request_parse(j->in.data + l->off, l->len, l->no, &doc, &r, err, sizeof err, &code);
    pending *p = NULL;
    if (ok) {
        p = calloc(1, sizeof *p);
        if (!p) {
            snprintf(err, sizeof err, "input line %d: out of memory", l->no);
            code = KR_BATCH_ERR_INTERNAL;
            ok = false;
        }
    }
    if (ok) {
        p->line = l->no;
        p->slot = slot;
        p->completion = !r.chat;
        p->custom_id = strdup(r.custom_id);
        p->model_name = r.model ? strdup(r.model) : NULL;
        kara_status st = tokenize_request(j, &r, p);
        if (st == KARA_ERR_CONTEXT_FULL) {
            snprintf(err, sizeof err, "input line %d: %s", l->no, j->fit_err);
            code = KR_BATCH_ERR_CONTEXT;
            ok = false;
        } else if (st) {
            snprintf(err, sizeof err, "input line %d: cannot build the prompt: %s", l->no, kara_last_error());
            code = KR_BATCH_ERR_REQUEST;
            ok = false;
        }
    }
    if (ok) {
        const kara_config *cfg = &j->o->cfg;
        kara_engine_request er;
        kara_engine_request_init(&er);
        er.id = kr_fnv1a(r.custom_id, strlen(r.custom_id));
        er.user = p;
        er.prompt = p->tokens;
        er.n_prompt = p->n_tokens;
        er.max_tokens = r.max_tokens >= 0 ? r.max_tokens : cfg->max_tokens;
        er.sampling = cfg->sampling;
        if (r.has_temperature) er.sampling.temperature = r.temperature;
        if (r.has_top_p) er.sampling.top_p = r.top_p;
        if (r.has_top_k) er.sampling.top_k = r.top_k;
        if (r.has_min_p) er.sampling.min_p = r.min_p;
        if (r.has_repeat_penalty) er.sampling.repeat_penalty = r.repeat_penalty;
        if (r.has_seed) er.sampling.seed = r.seed;
        er.reasoning_budget = cfg->reasoning_budget;
        if (p->completion) { /* a raw completion is the text as generated, think tags and all */
            er.split_thinking = false;
            er.reasoning_budget = -1;
        }
        er.ignore_eog = j->o->ignore_eos;
        for (int i = 0; i < r.n_stop; i++) {
            p->stops[i] = strdup(r.stop[i]);
            if (p->stops[i]) er.stop[p->n_stop++] = p->stops[i];
        }
        er.n_stop = p->n_stop;
        kara_status st = kara_engine_submit(j->eng, &er);
        if (!st) {
            p->next = j->live;
            if (j->live) j->live->prev = p;
            j->live = p;
        } else {
            snprintf(err, sizeof err, "input line %d: %s", l->no, kara_last_error());
            code = status_code(st);
            ok = false;
        }
    }
    if (!ok) {
        write_error(j, slot, r.custom_id ? r.custom_id : l->custom_id, l->no, code, err);
        pending_free(p);
    }
    kr_batch_request_free(&r);
    kr_json_doc_free(&doc);
}

static void finish_request(job *j, const kara_engine_event *ev) {
    pending *p = ev->user;
    if (p->prev)
        p->prev->next = p->next;
    else
        j->live = p->next;
    if (p->next) p->next->prev = p->prev;
    if (ev->status < 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "input line %d: %s", p->line, ev->error ? ev->error : kara_status_str(ev->status));
        write_error(j, p->slot, p->custom_id, p->line, status_code(ev->status), msg);
    } else {
        /* content starts at the text, not at the template's blank line after "</think>" (as OpenAI's) */
        size_t skip = 0;
        while (skip < p->content.len && (p->content.p[skip] == '\n' || p->content.p[skip] == '\r')) skip++;
        kr_batch_result res = {
            p->custom_id,
            p->line,
            p->model_name ? p->model_name : j->model_name,
            p->content.p ? p->content.p + skip : p->content.p,
            p->content.len - skip,
            p->reasoning.p,
            p->reasoning.len,
            ev->reason == KARA_STOP_MAX_TOKENS || ev->reason == KARA_STOP_CONTEXT_FULL ? "length" : "stop",
            ev->n_prompt,
            ev->n_generated,
            (int64_t)time(NULL),
        };
        kr_jbuf_reset(&j->line);
        if (p->completion)
            kr_batch_write_completion(&j->line, &res);
        else
            kr_batch_write_ok(&j->line, &res);
        if (p->content.failed || p->reasoning.failed) {
            kr_jbuf_reset(&j->line);
            char msg[128];
            snprintf(msg, sizeof msg, "input line %d: out of memory collecting the answer", p->line);
            kr_batch_write_error(&j->line, p->custom_id, p->line, KR_BATCH_ERR_INTERNAL, msg);
            j->failed++;
            j->prog.failed++;
        } else {
            j->ok++;
        }
        write_line(j, p->slot);
        j->prog.done++;
    }
    pending_free(p);
}

/* ------------------------------------------------------------------------ */
/* Setup                                                                     */
/* ------------------------------------------------------------------------ */

static int status_exit(kara_status st) {
    switch (st) {
    case KARA_ERR_IO: return KR_EXIT_NOINPUT;
    case KARA_ERR_FORMAT:
    case KARA_ERR_UNSUPPORTED: return KR_EXIT_DATAERR;
    case KARA_ERR_CONFIG:
    case KARA_ERR_ARG:
    case KARA_ERR_KV_BUDGET: return KR_EXIT_CONFIG;
    default: return KR_EXIT_SOFTWARE;
    }
}

/* Prompt and generation lengths of the shard's first 64 requests, for
 * kr_batch_typical (batch_fit.h). Answered ones count too, so a resumed job
 * sizes its context exactly as the first run did; a request whose prompt
 * fills the context can never run and does not count. */
static void typical_request(job *j, int32_t n_ctx, int32_t *n_prompt, int32_t *n_predict) {
    int64_t p_len[64], g_len[64];
    int n = 0;
    for (int i = 0; i < j->n_shard && n < 64; i++) {
        const kr_batch_line *l = &j->in.lines[j->shard[i]];
        kr_json_doc doc;
        kr_batch_request r;
        char err[256];
        const char *code;
        if (kr_batch_request_parse(j->in.data + l->off, l->len, l->no, &doc, &r, err, sizeof err, &code)) {
            pending p = {0};
            if (tokenize_request(j, &r, &p) == KARA_OK && (n_ctx <= 0 || p.n_tokens < n_ctx)) {
                p_len[n] = p.n_tokens;
                g_len[n] = r.max_tokens >= 0 ? r.max_tokens : j->o->cfg.max_tokens;
                n++;
            }
            free(p.tokens);
        }
        kr_batch_request_free(&r);
        kr_json_doc_free(&doc);
    }
    kr_batch_typical(p_len, g_len, n, n_ctx, j->o->cfg.max_tokens, n_prompt, n_predict);
}

static int setup_engine(job *j) {
    const kara_config *cfg = &j->o->cfg;
    kara_status st = kr_cli_load_model(cfg, &j->model);
    if (st) {
        fprintf(stderr, "kara batch: %s\n", kara_last_error());
        return status_exit(st);
    }
    if (!kara_model_meta_str(j->model, "general.name", j->model_name, sizeof j->model_name, NULL)) {
        const char *slash = strrchr(cfg->model_path, '/');
        snprintf(j->model_name, sizeof j->model_name, "%s", slash ? slash + 1 : cfg->model_path);
    }
    st = kara_chat_template_from_model(j->model, cfg->chat_template, &j->tmpl);
    if (st) {
        fprintf(stderr, "kara batch: %s\n", kara_last_error());
        return KR_EXIT_CONFIG;
    }
    kara_context_params cp = kr_cli_context_params(cfg);
    kr_prompt_fit_init(&j->fit, j->model, cp.n_ctx ? cp.n_ctx : kara_model_n_ctx_train(j->model));
    int32_t want = cp.n_seq_max;
    if (!j->o->no_fit && j->n_todo > 0) {
        int32_t P, G;
        typical_request(j, j->fit.n_ctx, &P, &G);
        cp.n_seq_max = kr_batch_fit_note(want, kara_engine_fit_concurrency(j->model, &cp, P, G), &cp, P, G);
    }
    if (cp.n_batch < cp.n_seq_max + j->o->prefill_chunk) cp.n_batch = cp.n_seq_max + j->o->prefill_chunk;
    j->n_seq = cp.n_seq_max;
    st = kara_context_create(j->model, &cp, &j->ctx);
    if (st) {
        fprintf(stderr, "kara batch: %s\n", kara_last_error());
        return cp.device == KARA_DEVICE_CUDA ? kr_exit_for_context(cp.device, st) : status_exit(st);
    }
    st = kr_draft_model_open("batch", cfg, j->ctx, cp.n_seq_max, &j->draft);
    if (st) return st == KARA_ERR_CONFIG ? KR_EXIT_CONFIG : status_exit(st);
    kara_engine_params ep;
    kara_engine_params_init(&ep);
    ep.spec = cfg->spec;
    ep.draft_max = cfg->draft_max;
    ep.draft_ctx = j->draft.ctx;
    ep.draft_p_min = cfg->draft_p_min;
    ep.max_queue = 2 * cp.n_seq_max + 8;
    ep.prefill_chunk = j->o->prefill_chunk;
    ep.optimistic_admission = j->o->optimistic;
    if (cfg->sampling.repeat_last_n > ep.max_repeat_last_n) ep.max_repeat_last_n = cfg->sampling.repeat_last_n;
    st = kara_engine_create(j->ctx, &ep, &j->eng);
    if (st) {
        fprintf(stderr, "kara batch: %s\n", kara_last_error());
        return status_exit(st);
    }
    return -1;
}

/* CPU seconds of this process (all threads): on a shared machine, work
 * done per token is steadier than wall time. */
static double cpu_seconds(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
        ru.ru_stime.tv_usec * 1e-6;
}

/* --stats-json FILE, written whole (safe_output.h); 0 or an exit code. */
static int write_stats_json(job *j, const kara_engine_stats *s, double seconds, double cpu, int total) {
    kr_out_file out;
    FILE *f = kr_out_fopen(&out, "batch", j->o->stats_json);
    if (!f) return KR_EXIT_CANTCREAT;
    const kara_config *cfg = &j->o->cfg;
    fprintf(f,
            "{\"requests\":%d,\"answered_before\":%d,\"ok\":%d,\"failed\":%d,\"seconds\":%.3f,"
            "\"tokens_generated\":%llu,\"tokens_per_second\":%.3f,\"tokens_prefilled\":%llu,"
            "\"tokens_recomputed\":%llu,\"steps\":%llu,\"preemptions\":%llu,\"kv_events\":%llu,"
            "\"kv_forced_events\":%llu,\"kv_recompress_events\":%llu,\"events_per_step\":%.5f,"
            "\"kv_bytes_peak\":%llu,\"kv_cache_bytes_peak\":%llu,\"kv_reserved_bytes\":%llu,"
            "\"kv_slots_evicted\":%llu,\"kv_seq_tokens\":%d,"
            "\"kv_budget\":%llu,\"method\":\"%s\",\"evict\":\"%s\",\"max_concurrency\":%d,"
            "\"context_sequences\":%d,\"peak_running\":%d,\"shard\":\"%d/%d\",\"decode_seconds\":%.3f,"
            "\"cpu_seconds\":%.3f,\"tokens_per_cpu_second\":%.3f,\"tokens_per_step\":%.3f,\"spec_on\":%s,"
            "\"spec_drafted\":%llu,\"spec_accepted\":%llu,\"spec_draft_seconds\":%.3f}\n",
            total, j->out.n_ok + j->out.n_failed + j->ord.recovered, j->ok, j->failed, seconds,
            (unsigned long long)s->tokens_generated, seconds > 0 ? (double)s->tokens_generated / seconds : 0.0,
            (unsigned long long)s->tokens_prefilled, (unsigned long long)s->tokens_recomputed,
            (unsigned long long)s->steps, (unsigned long long)s->preemptions, (unsigned long long)s->kv_events,
            (unsigned long long)s->kv_forced_events, (unsigned long long)s->kv_recompress_events,
            s->steps ? (double)s->kv_events / (double)s->steps : 0.0, (unsigned long long)s->kv_bytes_peak,
            (unsigned long long)s->kv_cache_bytes_peak, (unsigned long long)s->kv_reserved_bytes,
            (unsigned long long)s->kv_slots_evicted, s->kv_seq_tokens, (unsigned long long)s->kv_budget,
            kara_kv_method_name(cfg->context.kv.method),
            kr_kv_int(&cfg->context.kv, "kara.evict") == KARA_KV_EVICT_ON_DEMAND ? "on_demand" : "per_window",
            cfg->context.n_seq_max, j->n_seq, s->peak_running, cfg->shard_index + 1, cfg->shard_count,
            s->decode_seconds, cpu, cpu > 0 ? (double)s->tokens_generated / cpu : 0.0,
            s->steps ? (double)s->tokens_generated / (double)s->steps : 0.0, s->spec_on ? "true" : "false",
            (unsigned long long)s->n_drafted, (unsigned long long)s->n_accepted, s->draft_seconds);
    return kr_out_fclose(&out, "batch");
}

/* ------------------------------------------------------------------------ */
/* Main                                                                      */
/* ------------------------------------------------------------------------ */

static int run(job *j) {
    kara_config *cfg = &j->o->cfg;
    int rc = kr_batch_input_load(&j->in, cfg->batch_input);
    if (rc >= 0) return rc;
    bool resume = j->o->resume != 0;
    rc = kr_batch_output_open(&j->out, cfg->batch_output, resume);
    if (rc >= 0) return rc;
    /* this shard's requests that are not answered yet */
    j->todo = malloc(((size_t)j->in.n_lines + 1) * sizeof *j->todo);
    j->shard = malloc(((size_t)j->in.n_lines + 1) * sizeof *j->shard);
    if (!j->todo || !j->shard) return KR_EXIT_SOFTWARE;
    int total = 0, answered = 0;
    for (int i = 0; i < j->in.n_lines; i++) {
        const kr_batch_line *l = &j->in.lines[i];
        if ((l->no - 1) % cfg->shard_count != cfg->shard_index || kr_batch_line_blank(&j->in, l)) continue;
        total++;
        j->shard[j->n_shard++] = i;
    }
    j->hash = malloc(2 * ((size_t)j->n_shard + 1) * sizeof *j->hash); /* then the raw-bytes hashes */
    if (!j->hash || !kr_batch_order_init(&j->ord, &j->out, j->o->ordered, j->n_shard, 0)) return KR_EXIT_SOFTWARE;
    for (int s = 0; s < j->n_shard; s++) {
        const kr_batch_line *l = &j->in.lines[j->shard[s]];
        if (l->custom_id && kr_strset_add(&j->slot_ids, l->custom_id, s, NULL) < 0) return KR_EXIT_SOFTWARE;
        j->hash[s] = kr_batch_line_hash(&j->in, l);
        j->hash[j->n_shard + 1 + s] = kr_batch_line_hash_raw(&j->in, l);
    }
    /* the settings of the answers there against this run's (batch_meta.h) */
    rc = kr_batch_meta_open(&j->meta, cfg, j->o->ignore_eos, resume, j->out.n_ok + j->out.n_failed, j->ord.hold_path);
    if (rc >= 0) return rc;
    /* what the output answers, and requests changed since (batch_resume.h) */
    j->slots = (kr_batch_slots){&j->in, j->shard, j->n_shard, &j->slot_ids, j->hash, j->hash + j->n_shard + 1};
    j->res = (kr_batch_resume){.slots = &j->slots, .ord = &j->ord, .policy = j->o->on_changed};
    j->res.drop_all = j->meta.c.drop_all, j->res.limits_changed = j->meta.c.limits_changed;
    if ((rc = kr_batch_resume_scan(&j->res, &j->out, &j->ord)) >= 0) return rc;
    answered = j->res.answered;
    if (resume && (rc = kr_batch_resume_hold_check(&j->res, &j->ord)) >= 0) return rc;
    /* results an interrupted --ordered run set aside in OUTPUT.hold */
    rc = kr_batch_order_open(&j->ord, resume, kr_batch_resume_hold_slot, &j->res);
    if (rc >= 0) return rc;
    if (j->ord.hold_truncated)
        fprintf(stderr, "kara batch: cut a torn last line (%ld bytes) from %s; its request runs again\n",
                j->ord.hold_truncated, j->ord.hold_path);
    answered += j->ord.recovered;
    for (int s = 0; s < j->n_shard; s++)
        if (kr_batch_order_waiting(&j->ord, s)) j->todo[j->n_todo++] = s;
    if (answered) {
        fprintf(stderr, "kara batch: resuming: %d of %d requests already answered in %s", answered, total,
                cfg->batch_output);
        if (j->ord.recovered) fprintf(stderr, " (%d of them held in %s)", j->ord.recovered, j->ord.hold_path);
        fputc('\n', stderr);
    }
    kr_batch_resume_report(&j->res, cfg->batch_output, j->ord.hold_path);
    /* after the superseded answers left, before any new one: never a record over answers of other settings */
    if ((rc = kr_batch_meta_commit(&j->meta)) >= 0) return rc;
    rc = setup_engine(j);
    if (rc >= 0) return rc;
    /* held in memory: what can be in flight at once, and a margin; more goes to OUTPUT.hold */
    j->ord.mem_max = j->o->ordered_hold >= 0 ? j->o->ordered_hold : 4 * j->n_seq + 256;
    kr_batch_progress_init(&j->prog, true, total, answered); /* --no-progress: kr_console_progress */
    double t0 = kr_monotonic_seconds(), cpu0 = cpu_seconds();
    kara_engine_stats stats;
    memset(&stats, 0, sizeof stats);
    for (;;) {
        while (j->next < j->n_todo && kara_engine_queue_room(j->eng) > 0 && !j->io_error && !g_signal)
            submit_line(j, j->todo[j->next++]);
        if (j->io_error || g_signal) break;
        kara_status st = kara_engine_step(j->eng);
        if (st < 0) {
            kr_batch_progress_end(&j->prog);
            fprintf(stderr, "kara batch: the engine failed: %s\n", kara_last_error());
            return KR_EXIT_SOFTWARE;
        }
        kara_engine_event ev;
        while (kara_engine_next_event(j->eng, &ev)) {
            pending *p = ev.user;
            if (ev.kind == KARA_ENGINE_TEXT)
                kr_jbuf_raw(ev.channel == KARA_CHANNEL_THINK ? &p->reasoning : &p->content, ev.text, (size_t)ev.len);
            else
                finish_request(j, &ev);
        }
        kara_engine_get_stats(j->eng, &stats);
        kr_batch_progress_update(&j->prog, &stats, false);
        if (st == KARA_DONE && j->next >= j->n_todo) break;
    }
    double seconds = kr_monotonic_seconds() - t0, cpu = cpu_seconds() - cpu0;
    kara_engine_get_stats(j->eng, &stats);
    kr_batch_progress_update(&j->prog, &stats, true);
    kr_batch_progress_end(&j->prog);
    if (g_signal && !j->io_error) {
        int e = kr_batch_order_park(&j->ord); /* so the rerun need not redo them */
        if (e) fprintf(stderr, "kara batch: cannot write %s: %s\n", j->ord.hold_path, strerror(e));
    }
    if (j->io_error) {
        fprintf(stderr, "kara batch: cannot write %s: %s\n", cfg->batch_output, strerror(j->io_error));
        return KR_EXIT_IOERR;
    }
    int failed_total = j->failed + j->out.n_failed + j->ord.rec_failed;
    fprintf(stderr,
            "kara batch: %s: %d ok, %d failed this run (%d answered before); %llu tokens in %.1f s = %.1f tok/s; "
            "%llu steps, %llu preemptions, %llu KV events (%llu forced), %llu slots evicted; KV peak %llu of %llu "
            "bytes (cache %llu, scoring reservation %llu)\n",
            g_signal ? "interrupted" : "done", j->ok, j->failed, answered, (unsigned long long)stats.tokens_generated,
            seconds, seconds > 0 ? (double)stats.tokens_generated / seconds : 0.0, (unsigned long long)stats.steps,
            (unsigned long long)stats.preemptions, (unsigned long long)stats.kv_events,
            (unsigned long long)stats.kv_forced_events, (unsigned long long)stats.kv_slots_evicted,
            (unsigned long long)stats.kv_bytes_peak, (unsigned long long)stats.kv_budget,
            (unsigned long long)stats.kv_cache_bytes_peak, (unsigned long long)stats.kv_reserved_bytes);
    if (cfg->spec != KARA_SPEC_NONE && !stats.spec_on)
        fprintf(stderr, "kara batch: speculative off (a context batch of %d entries holds no drafts: raise -b)\n",
                cfg->context.n_batch);
    else if (cfg->spec != KARA_SPEC_NONE)
        fprintf(stderr, "kara batch: speculative on: %llu tokens drafted, %llu accepted (%.1f%%)\n",
                (unsigned long long)stats.n_drafted, (unsigned long long)stats.n_accepted,
                stats.n_drafted ? 100.0 * (double)stats.n_accepted / (double)stats.n_drafted : 0.0);
    if (cfg->spec == KARA_SPEC_DRAFT && stats.spec_on)
        fprintf(stderr, "kara batch: the draft model's decodes took %.1f s of the %.1f s\n", stats.draft_seconds,
                seconds);
    kr_batch_resume_errors(&j->slots, &j->out, j->failed, j->out.n_failed + j->ord.rec_failed);
    int stats_rc = j->o->stats_json ? write_stats_json(j, &stats, seconds, cpu, total) : KR_EXIT_OK;
    if (g_signal) return 128 + (int)g_signal;
    if (stats_rc) return stats_rc;
    return failed_total ? KR_EXIT_PARTIAL : KR_EXIT_OK;
}

static int batch_main(int argc, char **argv) {
    batch_opts o;
    memset(&o, 0, sizeof o);
    int rc = parse(argc, argv, &o);
    if (rc >= 0) return rc;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL); /* a closed terminal or ssh session: stop the same clean way */
    job j;
    memset(&j, 0, sizeof j);
    j.o = &o;
    j.out.fd = -1;
    j.ord.hold_fd = -1;
    rc = run(&j);
    /* requests still in flight are dropped: a rerun does them */
    kara_engine_free(j.eng);
    while (j.live) {
        pending *next = j.live->next;
        pending_free(j.live);
        j.live = next;
    }
    kara_context_free(j.ctx);
    kr_draft_model_close(&j.draft);
    kara_model_free(j.model);
    kr_batch_order_close(&j.ord);
    kr_batch_output_close(&j.out);
    kr_strset_free(&j.slot_ids);
    kr_batch_input_free(&j.in);
    free(j.todo);
    free(j.shard);
    free(j.hash);
    kr_batch_meta_free(&j.meta);
    kr_jbuf_free(&j.line);
    kr_jbuf_free(&j.prompt);
    return rc;
}

const kr_command kr_cmd_batch = {"batch", "run a JSONL file of requests with continuous batching", batch_main};
