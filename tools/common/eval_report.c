/* eval_report.c - `kara eval` results as CSV, JSON and an SVG plot of
 * accuracy against the KV budget or retention (hand-written SVG: no plotting
 * dependency). */
#include <stdio.h>
#include <string.h>

#include "eval_tasks.h"
#include "safe_output.h"

static double accuracy(const kr_task_row *r) { return r->n ? (double)r->correct / r->n : 0.0; }

static bool ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

typedef struct report {
    const kr_task_row *rows;
    int n;
    bool csv;
} report;

static const char *row_kind(const kr_task_row *r) { return r->error[0] ? "error" : "ok"; }

/* The error text as one CSV field (quoted, quotes doubled) or one JSON
 * string (quotes and backslashes escaped, control bytes as spaces). */
static void put_text(FILE *f, const char *s, bool csv) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputs(csv ? "\"\"" : "\\\"", f);
        else if (*s == '\\' && !csv)
            fputs("\\\\", f);
        else
            fputc((unsigned char)*s < 0x20 ? ' ' : *s, f);
    }
    fputc('"', f);
}

static void results_body(FILE *f, void *user) {
    const report *rep = user;
    const kr_task_row *rows = rep->rows;
    int n = rep->n;
    bool csv = rep->csv;
    if (csv)
        fprintf(f,
                "method,row,share,accuracy,peak_share,cap_share,status,error,kv_method,evict,seq_tokens,"
                "budget_tokens,n,correct,capped,failed,mean_think_tokens,mean_cached_slots,peak_slots,peak_bytes,"
                "cap_bytes,peak_cache_bytes,reserved_bytes,tok_s,events,slots_evicted,label,axis,x\n");
    else
        fprintf(f, "[\n");
    for (int i = 0; i < n; i++) {
        const kr_task_row *r = &rows[i];
        const char *evict = r->evict == KARA_KV_EVICT_ON_DEMAND ? "on_demand" : "per_window";
        if (csv) {
            fprintf(f, "%s,%s,%.3f,%.4f,%.4f,%.4f,%s,", r->label, r->axis, r->x, accuracy(r), r->peak_share,
                    r->cap_share, row_kind(r));
            put_text(f, r->error, true);
            fprintf(f, ",%s,%s,%d,%d,%d,%d,%d,%d,%.1f,%.1f,%d,%llu,%llu,%llu,%llu,%.1f,%llu,%llu,%s,%s,%.3f\n",
                    kara_kv_method_name(r->method), evict, r->seq_tokens, r->budget_tokens, r->n, r->correct, r->capped,
                    r->failed, r->think_tokens, r->cached_slots, r->peak_slots, (unsigned long long)r->kv_peak,
                    (unsigned long long)r->cap_bytes, (unsigned long long)r->cache_peak,
                    (unsigned long long)r->reserved, r->tok_s, (unsigned long long)r->events,
                    (unsigned long long)r->evicted, r->label, r->axis, r->x);
        } else {
            fprintf(f,
                    "  {\"method\": \"%s\", \"row\": \"%s\", \"share\": %.3f, \"accuracy\": %.4f, "
                    "\"peak_share\": %.4f, \"cap_share\": %.4f, \"status\": \"%s\", \"error\": ",
                    r->label, r->axis, r->x, accuracy(r), r->peak_share, r->cap_share, row_kind(r));
            put_text(f, r->error, false);
            fprintf(f,
                    ", \"kv_method\": \"%s\", \"evict\": \"%s\", \"seq_tokens\": %d, \"budget_tokens\": %d, "
                    "\"n\": %d, \"correct\": %d, \"capped\": %d, \"failed\": %d, \"mean_think_tokens\": %.1f, "
                    "\"mean_cached_slots\": %.1f, \"peak_slots\": %d, \"peak_bytes\": %llu, \"cap_bytes\": %llu, "
                    "\"peak_cache_bytes\": %llu, \"reserved_bytes\": %llu, \"tok_s\": %.1f, \"events\": %llu, "
                    "\"slots_evicted\": %llu}%s\n",
                    kara_kv_method_name(r->method), evict, r->seq_tokens, r->budget_tokens, r->n, r->correct, r->capped,
                    r->failed, r->think_tokens, r->cached_slots, r->peak_slots, (unsigned long long)r->kv_peak,
                    (unsigned long long)r->cap_bytes, (unsigned long long)r->cache_peak,
                    (unsigned long long)r->reserved, r->tok_s, (unsigned long long)r->events,
                    (unsigned long long)r->evicted, i + 1 < n ? "," : "");
        }
    }
    if (!csv) fprintf(f, "]\n");
}

int kr_eval_write_results(const char *path, const kr_task_row *rows, int n) {
    report rep = {rows, n, ends_with(path, ".csv")};
    return kr_out_write_file("eval", path, results_body, &rep);
}

/* Where a row sits on the plot's axis: a budget row at its cap, a
 * retention row at the peak share it reached (so both read as bytes). */
static double at(const kr_task_row *r) { return !strcmp(r->axis, "budget") ? r->x : r->peak_share; }
static bool plotted(const kr_task_row *r, const char *label, const char *axis) {
    return !r->error[0] && !strcmp(r->label, label) && !strcmp(r->axis, axis);
}

static void svg_body(FILE *f, void *user) {
    const report *rep = user;
    const kr_task_row *rows = rep->rows;
    int n = rep->n;
    /* the axis of the sweep: the first row that has one */
    const char *axis = "budget";
    for (int i = 0; i < n; i++)
        if (strcmp(rows[i].axis, "-")) {
            axis = rows[i].axis;
            break;
        }
    bool budget = !strcmp(axis, "budget");
    /* a retention row can reach more than full's bytes: the axis then runs past 1 */
    double xmax = 1.0;
    for (int i = 0; i < n; i++)
        if (plotted(&rows[i], rows[i].label, axis) && at(&rows[i]) > xmax) xmax = at(&rows[i]);
    static const char *colors[] = {"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
    const int W = 680, H = 420, L = 60, R = 190, T = 30, B = 50;
    const double pw = W - L - R, ph = H - T - B;
#define X(r) (L + (r) / xmax * pw)
#define Y(a) (T + (1.0 - (a)) * ph)
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
            "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            W, H);
    fprintf(f, "<text x=\"%d\" y=\"18\" font-size=\"14\">Accuracy against %s</text>\n", L,
            budget ? "the cap on peak KV bytes (share of full's)" : "peak KV bytes reached (share of full's)");
    for (int i = 0; i <= 10; i += 2) {
        double v = i / 10.0;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", X(0), Y(v), X(xmax),
                Y(v));
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%d%%</text>\n", L - 6, Y(v) + 4, i * 10);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.2f</text>\n", X(v * xmax), H - B + 18, v * xmax);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", X(0.5 * xmax), H - 12,
            budget ? "KV byte cap / full's peak bytes" : "peak KV bytes / full's (per-window retention rows)");
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"black\"/>\n", L, T, pw,
            ph);
    /* one polyline per label, in the order labels first appear */
    int legend = 0;
    for (int i = 0; i < n; i++) {
        bool first = true;
        for (int j = 0; j < i; j++) first &= strcmp(rows[j].label, rows[i].label) != 0;
        bool level = rows[i].method == KARA_KV_METHOD_FULL;
        if (!first || (!level && strcmp(rows[i].axis, axis))) continue;
        const char *col = colors[legend % 10];
        if (level) {
            fprintf(f,
                    "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-dasharray=\"6 4\"/>\n",
                    X(0), Y(accuracy(&rows[i])), X(xmax), Y(accuracy(&rows[i])), col);
        } else {
            fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
            for (int j = i; j < n; j++)
                if (plotted(&rows[j], rows[i].label, axis))
                    fprintf(f, "%.1f,%.1f ", X(at(&rows[j])), Y(accuracy(&rows[j])));
            fprintf(f, "\"/>\n");
            for (int j = i; j < n; j++)
                if (plotted(&rows[j], rows[i].label, axis))
                    fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", X(at(&rows[j])),
                            Y(accuracy(&rows[j])), col);
        }
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"/>\n", W - R + 10,
                T + 10 + 18 * legend, W - R + 30, T + 10 + 18 * legend, col);
        fprintf(f, "<text x=\"%d\" y=\"%d\">%s</text>\n", W - R + 36, T + 14 + 18 * legend, rows[i].label);
        legend++;
    }
#undef X
#undef Y
    fprintf(f, "</svg>\n");
}

int kr_eval_write_svg(const char *path, const kr_task_row *rows, int n) {
    report rep = {rows, n, false};
    return kr_out_write_file("eval", path, svg_body, &rep);
}
