/* run_threads.c - one thread or all for each kara_decode call (run_threads.h). */
#include "run_threads.h"

#include "context.h"
#include "monotonic_clock.h"

void kr_run_threads_init(kara_context *c) {
    const kara_model *m = c->model;
    kr_run_threads_state *s = &c->rt;
    double w = (double)m->output.n_rows * (double)m->output.n_cols;
    for (int il = 0; il < m->hp.n_layer; il++) {
        const kr_layer *L = &m->layers[il];
        const kr_weight *lw[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < sizeof lw / sizeof lw[0]; i++) w += (double)lw[i]->n_rows * (double)lw[i]->n_cols;
    }
    s->flops_per_token = 2.0 * w;
    s->flops_per_context = 4.0 * (double)m->hp.n_layer * (double)m->hp.n_head * (double)m->hp.head_dim;
    s->sec_per_flop[0] = s->sec_per_flop[1] = 0;
    s->since_probe = 0;
    s->probe_every = KR_RUN_THREADS_PROBE_EVERY;
    s->probing = false;
    s->best = 1;
    s->mode = -1;
    c->run_threads = c->n_threads;
}

double kr_run_threads_choose(kara_context *c, int32_t n_tokens) {
    kr_run_threads_state *s = &c->rt;
    double work = 0;
    for (int32_t i = 0; i < n_tokens; i++)
        work += s->flops_per_token + s->flops_per_context * (double)(c->entry_pos[i] + 1);
    s->work = work;
    if (c->n_threads <= 1 || work < KR_PARALLEL_MIN_FLOPS) {
        s->mode = -1;
        c->run_threads = 1;
        return 0;
    }
    if (work > KR_PROBE_MAX_FLOPS) {
        s->mode = -1;
        c->run_threads = c->n_threads;
        return 0;
    }
    /* until both are measured: one thread first for calls below
     * KR_START_PARALLEL_FLOPS (a short prompt is often the only call that
     * large), all threads first above it; then the cheaper, with a probe of
     * the other after probe_every calls (run_threads.h: it backs off) */
    double *spf = s->sec_per_flop;
    int mode;
    if (spf[0] == 0 && spf[1] == 0)
        mode = work < KR_START_PARALLEL_FLOPS ? 0 : 1;
    else if (spf[0] == 0 || spf[1] == 0)
        mode = spf[0] == 0 ? 0 : 1;
    else {
        int best = spf[0] < spf[1] ? 0 : 1;
        if (best != s->best) { /* conditions changed: watch them closely again */
            s->best = best;
            s->probe_every = KR_RUN_THREADS_PROBE_EVERY;
            s->since_probe = 0;
        }
        mode = best;
        if (++s->since_probe >= s->probe_every) {
            mode = 1 - best;
            s->since_probe = 0;
            s->probing = true;
        }
    }
    s->mode = mode;
    c->run_threads = mode ? c->n_threads : 1;
    return kr_monotonic_seconds();
}

void kr_run_threads_record(kara_context *c, double t0) {
    kr_run_threads_state *s = &c->rt;
    if (s->mode < 0 || s->work <= 0) return;
    double spf = (kr_monotonic_seconds() - t0) / s->work;
    double *avg = &s->sec_per_flop[s->mode];
    if (!s->probing) {
        *avg = *avg > 0 ? 0.75 * *avg + 0.25 * spf : spf;
        return;
    }
    /* a probe replaces its mode's stale average; one that lost again waits
     * twice as long for the next */
    *avg = spf;
    s->probing = false;
    if (*avg < s->sec_per_flop[1 - s->mode])
        s->probe_every = KR_RUN_THREADS_PROBE_EVERY;
    else if (s->probe_every < KR_RUN_THREADS_PROBE_MAX)
        s->probe_every *= 2;
}
