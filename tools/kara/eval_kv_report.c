/* eval_kv_report.c - the results of `kara eval-kv` as a table (stdout),
 * CSV or JSON. One row per method run; CSV joins per-depth and per-region
 * lists with ';' so every row has the same columns. */
#include <stdio.h>
#include <string.h>

#include "eval_kv.h"
#include "kv_knob.h"
#include "safe_output.h"

static const char k_csv_header[] =
    "method,label,retention,budget_tokens,threads,steps,mean_slots,peak_kv_bytes,kl_mean,kl_max,"
    "steps_compressed,kl_mean_compressed,top1_agree,nll_mean,ppl_ratio,first_divergence,free_cap,"
    "needle_hits,needle_trials,needle_digits,needle_kept,region_size,region_min,region_kept,events,"
    "slots_evicted,event_ms_mean,event_share,decode_tok_s,cap_share,cap_bytes,peak_share,error";

const char *kr_eval_csv_header(void) { return k_csv_header; }

static int needle_hits(const kr_eval_row *r) {
    int n = 0;
    for (int i = 0; i < r->n_depths; i++) n += r->needle_hit[i];
    return n;
}

static double mean_f(const float *x, int n) {
    double s = 0.0;
    for (int i = 0; i < n; i++) s += x[i];
    return n ? s / n : 0.0;
}

static double event_ms(const kr_eval_row *r) { return r->events ? 1e3 * r->event_s / (double)r->events : 0.0; }
static double event_share(const kr_eval_row *r) { return r->decode_s > 0 ? r->event_s / r->decode_s : 0.0; }
static double tok_s(const kr_eval_row *r) { return r->decode_s > 0 ? (r->steps - 1) / r->decode_s : 0.0; }
/* A row's peak KV bytes as a share of the reference's (rows[0], full). */
static double peak_share(const kr_eval_row *rows, const kr_eval_row *r) {
    return rows[0].peak_kv_bytes ? (double)r->peak_kv_bytes / (double)rows[0].peak_kv_bytes : 0.0;
}

void kr_eval_print_table(FILE *f, const kr_eval_setup *s, const kr_eval_meta *m, const kr_eval_row *rows, int n_rows) {
    fprintf(f, "model %s (%s), text %s\n", m->model_path, m->model_desc, m->text_path);
    fprintf(f,
            "prompt %d tokens, replay %d steps, free-running cap %d, needle %d depths x %d-token filler, "
            "context %d, regions of %d\n",
            s->n_prompt, s->n_text, s->n_free, s->n_depths, s->n_filler, m->n_ctx, s->region);
    fprintf(f,
            "kara: interval %d, buffer %d, min_compressible %d, max_defer %d; snapkv trigger_slack %d, "
            "obs_window %d; rkv trigger_slack %d, obs_window %d, lambda %g; lazy window %d, alpha %g\n\n",
            m->kv->interval, kr_kv_int(m->kv, "kara.buffer"), kr_kv_int(m->kv, "kara.min_compressible"),
            kr_kv_int(m->kv, "kara.max_defer"), kr_kv_int(m->kv, "baselines.snapkv.trigger_slack"),
            kr_kv_int(m->kv, "baselines.snapkv.obs_window"), kr_kv_int(m->kv, "baselines.rkv.trigger_slack"),
            kr_kv_int(m->kv, "baselines.rkv.obs_window"), kr_kv_num(m->kv, "baselines.rkv.lambda"),
            kr_kv_int(m->kv, "baselines.lazy.window"), kr_kv_num(m->kv, "baselines.lazy.alpha"));
    fprintf(f, "%-12s %5s %5s %6s %6s %8s %6s %8s %8s %8s %6s %6s %6s %7s %5s %6s %6s %8s %7s\n", "method", "r", "cap",
            "budget", "slots", "peak_KiB", "peak%", "KL_mean", "KL_cmp", "KL_max", "top1", "ppl_x", "1stdiv", "needle",
            "kept", "regmin", "events", "ms/event", "ev_shr");
    for (int i = 0; i < n_rows; i++) {
        const kr_eval_row *r = &rows[i];
        char ret[16] = "-", cap[16] = "-", bud[16] = "-", div[16], nd[16];
        if (r->retention >= 0) snprintf(ret, sizeof ret, "%.2f", r->retention);
        if (r->cap_share > 0) snprintf(cap, sizeof cap, "%.2f", r->cap_share);
        if (r->error[0]) {
            fprintf(f, "%-12s %5s %5s  did not run within its cap: %s\n", r->label, ret, cap, r->error);
            continue;
        }
        if (r->budget_tokens > 0) snprintf(bud, sizeof bud, "%d", r->budget_tokens);
        snprintf(div, sizeof div, "%s%d", r->first_div >= s->n_free ? ">=" : "", r->first_div);
        snprintf(nd, sizeof nd, "%d/%d", needle_hits(r), r->n_depths);
        fprintf(f,
                "%-12s %5s %5s %6s %6.1f %8.1f %5.1f%% %8.4f %8.4f %8.4f %6.3f %6.3f %6s %7s %5.2f %6.3f %6llu %8.3f "
                "%6.2f%%\n",
                r->label, ret, cap, bud, r->mean_slots, r->peak_kv_bytes / 1024.0, 100.0 * peak_share(rows, r),
                r->kl_mean, r->kl_mean_compressed, r->kl_max, r->top1, r->ppl_ratio, div, nd,
                mean_f(r->needle_kept, r->n_depths), r->region_min, (unsigned long long)r->events, event_ms(r),
                100.0 * event_share(r));
    }
    fprintf(f,
            "\ncap: the row's hard cap on peak KV bytes, as a share of full's (--budgets); peak%%: peak KV bytes "
            "(cache, query rings, scoring scratch) as a share of full's; KL_cmp: mean KL over the steps whose cache "
            "had lost slots; ppl_x: perplexity ratio to full; "
            "1stdiv: first greedy token differing from full; needle: exact answers over depths; kept: needle "
            "tokens still cached; regmin: least fraction kept of a %d-token region; ev_shr: event time / "
            "decode time\n",
            s->region);
}

/* ---- CSV ---- */

/* The error text of a CSV field: commas and quotes would split it. */
static void csv_text(FILE *f, const char *t) {
    for (; *t; t++) fputc(*t == ',' || *t == '"' || *t == '\n' ? ';' : *t, f);
}

static void csv_row(FILE *f, const kr_eval_setup *s, const kr_eval_row *rows, const kr_eval_row *r) {
    fprintf(f, "%s,%s,", kara_kv_method_name(r->method), r->label);
    if (r->retention >= 0) fprintf(f, "%.4g", r->retention);
    fprintf(f, ",%d,%d,%d,%.3f,%llu,%.9g,%.9g,%d,%.9g,%.6f,%.9g,%.9g,%d,%d,%d,%d,", r->budget_tokens, r->threads,
            r->steps, r->mean_slots, (unsigned long long)r->peak_kv_bytes, r->kl_mean, r->kl_max, r->steps_compressed,
            r->kl_mean_compressed, r->top1, r->nll_mean, r->ppl_ratio, r->first_div, s->n_free, needle_hits(r),
            r->n_depths);
    for (int i = 0; i < r->n_depths; i++) fprintf(f, "%s%d", i ? ";" : "", r->needle_digits[i]);
    fputc(',', f);
    for (int i = 0; i < r->n_depths; i++) fprintf(f, "%s%.4g", i ? ";" : "", r->needle_kept[i]);
    fprintf(f, ",%d,%.4g,", s->region, r->region_min);
    for (int i = 0; i < r->n_regions; i++) fprintf(f, "%s%.4g", i ? ";" : "", r->region_kept[i]);
    fprintf(f, ",%llu,%llu,%.6g,%.6g,%.6g,", (unsigned long long)r->events, (unsigned long long)r->slots_evicted,
            event_ms(r), event_share(r), tok_s(r));
    if (r->cap_share > 0) fprintf(f, "%.4g", r->cap_share);
    fprintf(f, ",%llu,%.6g,", (unsigned long long)r->cap_bytes, peak_share(rows, r));
    csv_text(f, r->error);
    fputc('\n', f);
}

/* ---- JSON ---- */

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_row(FILE *f, const kr_eval_setup *s, const kr_eval_row *rows, const kr_eval_row *r, bool last) {
    fprintf(f, "    {\"method\": \"%s\", \"label\": ", kara_kv_method_name(r->method));
    json_str(f, r->label);
    if (r->retention >= 0)
        fprintf(f, ", \"retention\": %.4g", r->retention);
    else
        fprintf(f, ", \"retention\": null");
    fprintf(f, ", \"budget_tokens\": %d, \"threads\": %d,\n", r->budget_tokens, r->threads);
    fprintf(f,
            "     \"steps\": %d, \"mean_slots\": %.3f, \"peak_kv_bytes\": %llu, \"kl_mean\": %.9g, "
            "\"kl_max\": %.9g, \"steps_compressed\": %d, \"kl_mean_compressed\": %.9g, \"top1_agree\": %.6f, "
            "\"nll_mean\": %.9g, \"ppl_ratio\": %.9g,\n",
            r->steps, r->mean_slots, (unsigned long long)r->peak_kv_bytes, r->kl_mean, r->kl_max, r->steps_compressed,
            r->kl_mean_compressed, r->top1, r->nll_mean, r->ppl_ratio);
    fprintf(f, "     \"first_divergence\": %d, \"free_cap\": %d, \"needle\": [", r->first_div, s->n_free);
    for (int i = 0; i < r->n_depths; i++)
        fprintf(f, "%s{\"depth\": %.3g, \"hit\": %s, \"digits\": %d, \"kept\": %.4g}", i ? ", " : "", s->depths[i],
                r->needle_hit[i] ? "true" : "false", r->needle_digits[i], r->needle_kept[i]);
    fprintf(f, "],\n     \"region_size\": %d, \"region_min\": %.4g, \"region_kept\": [", s->region, r->region_min);
    for (int i = 0; i < r->n_regions; i++) fprintf(f, "%s%.4g", i ? ", " : "", r->region_kept[i]);
    fprintf(f,
            "],\n     \"events\": %llu, \"slots_evicted\": %llu, \"event_seconds\": %.6g, \"decode_seconds\": %.6g, "
            "\"event_ms_mean\": %.6g, \"event_share\": %.6g, \"decode_tok_s\": %.6g,\n",
            (unsigned long long)r->events, (unsigned long long)r->slots_evicted, r->event_s, r->decode_s, event_ms(r),
            event_share(r), tok_s(r));
    if (r->cap_share > 0)
        fprintf(f, "     \"cap_share\": %.4g", r->cap_share);
    else
        fprintf(f, "     \"cap_share\": null");
    fprintf(f, ", \"cap_bytes\": %llu, \"peak_share\": %.6g, \"error\": ", (unsigned long long)r->cap_bytes,
            peak_share(rows, r));
    json_str(f, r->error);
    fprintf(f, "}%s\n", last ? "" : ",");
}

static void json_all(FILE *f, const kr_eval_setup *s, const kr_eval_meta *m, const kr_eval_row *rows, int n_rows) {
    char score_mode[32]; /* by its key: the research enums are not in kara.h */
    if (kara_kv_params_get(m->kv, "kara.score.mode", score_mode, sizeof score_mode) != KARA_OK)
        snprintf(score_mode, sizeof score_mode, "?");
    fprintf(f, "{\n  \"model\": ");
    json_str(f, m->model_path);
    fprintf(f, ",\n  \"model_desc\": ");
    json_str(f, m->model_desc);
    fprintf(f, ",\n  \"text\": ");
    json_str(f, m->text_path);
    fprintf(f,
            ",\n  \"n_ctx\": %d, \"n_prompt\": %d, \"n_text\": %d, \"free_cap\": %d, \"n_filler\": %d, "
            "\"region_size\": %d,\n",
            m->n_ctx, s->n_prompt, s->n_text, s->n_free, s->n_filler, s->region);
    fprintf(f,
            "  \"kv\": {\"interval\": %d, \"buffer\": %d, \"min_compressible\": %d, \"max_defer\": %d, "
            "\"block_size\": %d, \"dtype\": \"%s\", \"score_mode\": \"%s\", \"candidate_frac\": %.4g, "
            "\"snapkv_trigger_slack\": %d, \"snapkv_obs_window\": %d},\n",
            m->kv->interval, kr_kv_int(m->kv, "kara.buffer"), kr_kv_int(m->kv, "kara.min_compressible"),
            kr_kv_int(m->kv, "kara.max_defer"), m->kv->block_size, kara_kv_dtype_name(m->kv->dtype), score_mode,
            kr_kv_num(m->kv, "kara.t2c.candidate_frac"), kr_kv_int(m->kv, "baselines.snapkv.trigger_slack"),
            kr_kv_int(m->kv, "baselines.snapkv.obs_window"));
    fprintf(f, "  \"rows\": [\n");
    for (int i = 0; i < n_rows; i++) json_row(f, s, rows, &rows[i], i + 1 == n_rows);
    fprintf(f, "  ]\n}\n");
}

typedef struct report {
    const char *path;
    const kr_eval_setup *s;
    const kr_eval_meta *m;
    const kr_eval_row *rows;
    int n_rows;
} report;

static void report_body(FILE *f, void *user) {
    const report *r = user;
    size_t len = strlen(r->path);
    if (len >= 5 && !strcmp(r->path + len - 5, ".json")) {
        json_all(f, r->s, r->m, r->rows, r->n_rows);
    } else {
        fprintf(f, "%s\n", k_csv_header);
        for (int i = 0; i < r->n_rows; i++) csv_row(f, r->s, r->rows, &r->rows[i]);
    }
}

int kr_eval_write(const char *path, const kr_eval_setup *s, const kr_eval_meta *m, const kr_eval_row *rows,
                  int n_rows) {
    report r = {path, s, m, rows, n_rows};
    return kr_out_write_file("eval-kv", path, report_body, &r);
}
