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

static void results_body(FILE *f, void *user) {
    const report *rep = user;
    const kr_task_row *rows = rep->rows;
    int n = rep->n;
    bool csv = rep->csv;
    if (csv)
        fprintf(f,
                "label,method,evict,axis,x,seq_tokens,budget_tokens,n,correct,accuracy,capped,failed,"
                "mean_think_tokens,mean_cached_slots,peak_slots,peak_cache_bytes,reserved_bytes,tok_s,events,"
                "slots_evicted\n");
    else
        fprintf(f, "[\n");
    for (int i = 0; i < n; i++) {
        const kr_task_row *r = &rows[i];
        const char *evict = r->evict == KARA_KV_EVICT_ON_DEMAND ? "on_demand" : "per_window";
        if (csv)
            fprintf(f, "%s,%s,%s,%s,%.3f,%d,%d,%d,%d,%.4f,%d,%d,%.1f,%.1f,%d,%llu,%llu,%.1f,%llu,%llu\n", r->label,
                    kara_kv_method_name(r->method), evict, r->axis, r->x, r->seq_tokens, r->budget_tokens, r->n,
                    r->correct, accuracy(r), r->capped, r->failed, r->think_tokens, r->cached_slots, r->peak_slots,
                    (unsigned long long)r->cache_peak, (unsigned long long)r->reserved, r->tok_s,
                    (unsigned long long)r->events, (unsigned long long)r->evicted);
        else
            fprintf(f,
                    "  {\"label\": \"%s\", \"method\": \"%s\", \"evict\": \"%s\", \"axis\": \"%s\", \"x\": %.3f, "
                    "\"seq_tokens\": %d, \"budget_tokens\": %d, \"n\": %d, \"correct\": %d, \"accuracy\": %.4f, "
                    "\"capped\": %d, \"failed\": %d, \"mean_think_tokens\": %.1f, \"mean_cached_slots\": %.1f, "
                    "\"peak_slots\": %d, \"peak_cache_bytes\": %llu, \"reserved_bytes\": %llu, \"tok_s\": %.1f, "
                    "\"events\": %llu, \"slots_evicted\": %llu}%s\n",
                    r->label, kara_kv_method_name(r->method), evict, r->axis, r->x, r->seq_tokens, r->budget_tokens,
                    r->n, r->correct, accuracy(r), r->capped, r->failed, r->think_tokens, r->cached_slots,
                    r->peak_slots, (unsigned long long)r->cache_peak, (unsigned long long)r->reserved, r->tok_s,
                    (unsigned long long)r->events, (unsigned long long)r->evicted, i + 1 < n ? "," : "");
    }
    if (!csv) fprintf(f, "]\n");
}

int kr_eval_write_results(const char *path, const kr_task_row *rows, int n) {
    report rep = {rows, n, ends_with(path, ".csv")};
    return kr_out_write_file("eval", path, results_body, &rep);
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
    static const char *colors[] = {"#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
    const int W = 680, H = 420, L = 60, R = 190, T = 30, B = 50;
    const double pw = W - L - R, ph = H - T - B;
#define X(r) (L + (r)*pw)
#define Y(a) (T + (1.0 - (a)) * ph)
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
            "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            W, H);
    fprintf(f, "<text x=\"%d\" y=\"18\" font-size=\"14\">Accuracy against %s</text>\n", L,
            budget ? "the KV cache allowed (share of full's peak)" : "per-window retention");
    for (int i = 0; i <= 10; i += 2) {
        double v = i / 10.0;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", X(0), Y(v), X(1), Y(v));
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%d%%</text>\n", L - 6, Y(v) + 4, i * 10);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.1f</text>\n", X(v), H - B + 18, v);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>\n", X(0.5), H - 12,
            budget ? "KV cache / full's peak" : "retention");
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
                    X(0), Y(accuracy(&rows[i])), X(1), Y(accuracy(&rows[i])), col);
        } else {
            fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", col);
            for (int j = i; j < n; j++)
                if (!strcmp(rows[j].label, rows[i].label) && !strcmp(rows[j].axis, axis))
                    fprintf(f, "%.1f,%.1f ", X(rows[j].x), Y(accuracy(&rows[j])));
            fprintf(f, "\"/>\n");
            for (int j = i; j < n; j++)
                if (!strcmp(rows[j].label, rows[i].label) && !strcmp(rows[j].axis, axis))
                    fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", X(rows[j].x),
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
