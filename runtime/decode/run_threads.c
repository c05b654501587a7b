/* run_threads.c - one thread or all for each kara_decode call (run_threads.h). */
#include "run_threads.h"

#include "context.h"
#include "cpu_load.h"
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
    *s = (kr_run_threads_state){0};
    s->flops_per_token = 2.0 * w;
    s->flops_per_context = 4.0 * (double)m->hp.n_layer * (double)m->hp.n_head * (double)m->hp.head_dim;
    for (int k = 0; k < 2; k++)
        s->cls[k] = (kr_run_threads_class){.probe_every = KR_RUN_THREADS_PROBE_EVERY, .best = 1};
    s->mode = -1;
    s->ping = kr_parallel_ping;
    s->others_running = kr_cpu_others_running;
    s->cores = kr_cpu_usable_cores();
    c->run_threads = c->n_threads;
}

/* A probe of one mode ended (measured, or skipped on the ping's price):
 * one that won takes over and the next comes soon; one that lost waits
 * twice as long for the next. */
static void probe_done(kr_run_threads_class *L, int mode) {
    L->since_probe = 0;
    if (L->sec_per_flop[mode] < L->sec_per_flop[1 - mode])
        L->probe_every = KR_RUN_THREADS_PROBE_EVERY;
    else if (L->probe_every < KR_RUN_THREADS_PROBE_MAX)
        L->probe_every *= 2;
}

/* Other processes keep more cores busy than the threads would leave them:
 * the least of three reads (a task passing through is not a busy core;
 * beside a competitor pinned to a core the least read it 297 times in 300,
 * on an idle machine 0 in 298). False where the count cannot be read. */
static bool cores_busy(const kr_run_threads_state *s, int n_threads) {
    int others = s->others_running();
    for (int k = 0; k < 2 && others > 0; k++) {
        int o = s->others_running();
        if (o < others) others = o;
    }
    int want = n_threads < s->cores ? n_threads : s->cores;
    return others > 0 && others + want > s->cores;
}

/* Before a try of all threads: refuse it when other processes hold the
 * cores it needs (cores_busy); else when the ping says the call's parallel
 * regions alone would take longer than one thread is measured to need for
 * the whole call, record that bound as the try's result and run on one
 * thread. Returns the mode to run. */
static int price_parallel_try(kara_context *c, kr_run_threads_class *L, bool probing) {
    kr_run_threads_state *s = &c->rt;
    /* before one thread is measured, a fast core's speed stands in for it */
    bool nominal = L->sec_per_flop[0] <= 0;
    if (cores_busy(s, c->n_threads)) {
        s->skipped++;
        s->busy_skips++;
        L->pending = 0;
        if (nominal) return 0; /* one thread is measured first; the next try asks again */
        L->sec_per_flop[1] = KR_BUSY_TRY_COST * L->sec_per_flop[0];
        if (probing) probe_done(L, 1);
        return 0;
    }
    if (s->regions_per_call <= 0) return 1;
    double one_s = nominal ? s->work / KR_ONE_THREAD_FLOPS_FAST : L->sec_per_flop[0] * s->work;
    /* each region pinged with its share of the call's work on every thread,
     * so a quiet machine prices the call at about one_s / n_threads */
    double regions = (double)s->regions_per_call;
    double work_s = one_s / ((double)c->n_threads * regions);
    double floor_s = s->ping(c, one_s < KR_PING_MAX_SECONDS ? one_s : KR_PING_MAX_SECONDS, work_s) * regions;
    if (floor_s <= one_s) return 1;
    s->skipped++;
    if (nominal) return 0; /* nothing to compare yet: one thread is measured first */
    L->pending = 0;        /* a confirmation priced out is a try that lost */
    L->sec_per_flop[1] = floor_s / s->work;
    if (probing) probe_done(L, 1);
    return 0;
}

double kr_run_threads_choose(kara_context *c, int32_t n_tokens) {
    kr_run_threads_state *s = &c->rt;
    double work = 0;
    for (int32_t i = 0; i < n_tokens; i++)
        work += s->flops_per_token + s->flops_per_context * (double)(c->entry_pos[i] + 1);
    s->work = work;
    s->probing = false;
    if (c->n_threads <= 1 || work < KR_PARALLEL_MIN_FLOPS) {
        s->mode = -1;
        c->run_threads = 1;
        return 0;
    }
    s->cur = n_tokens >= KR_BATCH_CLASS_TOKENS;
    kr_run_threads_class *L = &s->cls[s->cur];
    /* until both are measured: one thread first for calls below
     * KR_START_PARALLEL_FLOPS (a short prompt is often the only call that
     * large), all threads first above it unless the cores are busy
     * (price_parallel_try); then the cheaper, with a probe of
     * the other after probe_every calls (run_threads.h: it backs off) */
    double *spf = L->sec_per_flop;
    int mode;
    if (L->pending > 0) { /* a try of all threads won once: it runs again before it is believed */
        mode = 1;
        s->probing = true;
    } else if (spf[0] == 0 && spf[1] == 0)
        mode = work < KR_START_PARALLEL_FLOPS ? 0 : 1;
    else if (spf[0] == 0 || spf[1] == 0)
        mode = spf[0] == 0 ? 0 : 1;
    else {
        int best = spf[0] < spf[1] ? 0 : 1;
        if (best != L->best) { /* conditions changed: watch them closely again */
            L->best = best;
            L->probe_every = KR_RUN_THREADS_PROBE_EVERY;
            L->since_probe = 0;
        }
        mode = best;
        if (++L->since_probe >= L->probe_every) {
            mode = 1 - best;
            L->since_probe = 0;
            s->probing = true;
        }
    }
    if (mode == 1 && (s->probing || spf[1] == 0)) {
        mode = price_parallel_try(c, L, s->probing);
        if (mode == 0) s->probing = false;
    }
    s->mode = mode;
    c->run_threads = mode ? c->n_threads : 1;
    s->regions_at_start = s->regions;
    return kr_monotonic_seconds();
}

void kr_run_threads_record(kara_context *c, double t0) {
    kr_run_threads_state *s = &c->rt;
    if (s->mode < 0 || s->work <= 0) return;
    s->regions_per_call = s->regions - s->regions_at_start;
    /* the context's first timed call pays for cold caches and first
     * touches (3x a warm one measured): not a measure of its mode */
    if (!s->warm) {
        s->warm = true;
        return;
    }
    kr_run_threads_class *L = &s->cls[s->cur];
    double spf = (kr_monotonic_seconds() - t0) / s->work;
    double *avg = &L->sec_per_flop[s->mode];
    /* Beside a busy core a call on all threads takes anywhere from less than
     * one thread's time to 30x more, so one fast try is not evidence: a try
     * that beats one thread is kept aside and all threads run again on the
     * next call, which counts with the slower of the two times. */
    bool trying = s->probing || *avg == 0;
    if (s->mode == 1 && trying && L->pending == 0 && L->sec_per_flop[0] > 0 && spf < L->sec_per_flop[0]) {
        L->pending = spf;
        s->probing = false;
        return;
    }
    if (L->pending > 0) {
        if (spf < L->pending) spf = L->pending;
        L->pending = 0;
    }
    if (s->mode == 0 && *avg == 0 && L->sec_per_flop[1] > 0 && L->sec_per_flop[1] < spf) {
        /* all threads ran first (a large call, the cores looked quiet) and
         * beat this first call of one thread: that time has not been
         * confirmed either, so all threads run again on the next call */
        L->pending = L->sec_per_flop[1];
        L->sec_per_flop[1] = 0;
    }
    if (!s->probing) {
        *avg = *avg > 0 ? 0.75 * *avg + 0.25 * spf : spf;
        return;
    }
    /* a probe replaces its mode's stale average */
    *avg = spf;
    s->probing = false;
    probe_done(L, s->mode);
}
