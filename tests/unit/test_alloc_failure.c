/*
 * test_alloc_failure.c - allocation-failure injection (issue 19): every
 * allocation the library makes on the load path, at context creation, at
 * the engine's and the generator's start and in a config or GGUF open is
 * failed once, one run per allocation. Each failed run must return
 * KARA_ERR_NOMEM (KARA_ERR_IO for a failed file mapping) with a message,
 * NULL in *out, nothing on stdout, no leak (the sanitizer build's leak
 * check) and objects that still work; decoding across compression events
 * must allocate nothing.
 *
 * The hook: this one program is linked with GNU ld's --wrap for every
 * allocating libc call libkara.a makes (tests/CMakeLists.txt), so that
 * library code calling malloc reaches __wrap_malloc here, which counts the
 * call and, when armed, fails the Nth one; otherwise it calls the real
 * function (libc's, or the sanitizer's in the ASan build). libyaml is a
 * shared library whose own mallocs are out of reach: its three allocating
 * entry points are wrapped instead and fail as libyaml does when out of
 * memory (YAML_MEMORY_ERROR).
 */
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "kara.h"
#include "synth_model.h"
#include "test_models.h"
#include "test_util.h"
#include "kv_tuning.h"

#ifdef KR_NO_LD_WRAP
int main(void) {
    printf("SKIPPED test_alloc_failure: %s; it needs GNU ld's --wrap in a dynamically linked program\n", KR_NO_LD_WRAP);
    return 77;
}
#else

/* ---- The hook ---------------------------------------------------------------------------------------------------- */

/* What a wrapped call is, for the counts per operation. */
enum { K_HEAP, K_MAP, K_FILE, K_YAML, K_KINDS };
static const char *const kind_names[K_KINDS] = {"heap", "map", "file", "yaml"};

enum { MAX_SITES = 16 };
static atomic_bool g_armed;
static atomic_long g_calls; /* wrapped calls since arm() */
static atomic_long g_kind[K_KINDS];
static atomic_long g_injected;   /* calls failed on purpose since arm() */
static long g_fail_at;           /* fail the g_fail_at-th call (1-based); 0: count only */
static void *g_sites[MAX_SITES]; /* return addresses of the first calls, for a diagnosis */
static void *g_fail_site;        /* and of the call failed */

/* Count one wrapped call of kind k from site; true when it must fail. */
static bool inject(int k, void *site) {
    if (!atomic_load(&g_armed)) return false;
    long n = atomic_fetch_add(&g_calls, 1) + 1;
    atomic_fetch_add(&g_kind[k], 1);
    if (n <= MAX_SITES) g_sites[n - 1] = site;
    if (n != g_fail_at) return false;
    atomic_fetch_add(&g_injected, 1);
    g_fail_site = site;
    return true;
}

static void arm(void) {
    atomic_store(&g_calls, 0);
    atomic_store(&g_injected, 0);
    for (int k = 0; k < K_KINDS; k++) atomic_store(&g_kind[k], 0);
    atomic_store(&g_armed, true);
}

static void disarm(void) { atomic_store(&g_armed, false); }

/* The counts of an operation, kept across a nested count (the checks that
 * later steps allocate nothing). */
typedef struct counters {
    long calls, injected, kind[K_KINDS], fail_at;
} counters;

static counters counters_save(void) {
    counters c = {atomic_load(&g_calls), atomic_load(&g_injected), {0}, g_fail_at};
    for (int k = 0; k < K_KINDS; k++) c.kind[k] = atomic_load(&g_kind[k]);
    return c;
}

static void counters_restore(const counters *c) {
    atomic_store(&g_calls, c->calls);
    atomic_store(&g_injected, c->injected);
    for (int k = 0; k < K_KINDS; k++) atomic_store(&g_kind[k], c->kind[k]);
    g_fail_at = c->fail_at;
}

#define SITE __builtin_return_address(0)

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __real_mprotect(void *addr, size_t len, int prot);
FILE *__real_fopen(const char *path, const char *mode);
FILE *__real_fdopen(int fd, const char *mode);
int __real_yaml_parser_initialize(yaml_parser_t *p);
int __real_yaml_parser_parse(yaml_parser_t *p, yaml_event_t *e);
int __real_yaml_parser_load(yaml_parser_t *p, yaml_document_t *d);

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
int __wrap_posix_memalign(void **p, size_t align, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __wrap_mprotect(void *addr, size_t len, int prot);
FILE *__wrap_fopen(const char *path, const char *mode);
FILE *__wrap_fdopen(int fd, const char *mode);
int __wrap_yaml_parser_initialize(yaml_parser_t *p);
int __wrap_yaml_parser_parse(yaml_parser_t *p, yaml_event_t *e);
int __wrap_yaml_parser_load(yaml_parser_t *p, yaml_document_t *d);

void *__wrap_malloc(size_t n) {
    if (inject(K_HEAP, SITE)) return errno = ENOMEM, NULL;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t size) {
    if (inject(K_HEAP, SITE)) return errno = ENOMEM, NULL;
    return __real_calloc(n, size);
}
void *__wrap_realloc(void *p, size_t n) { /* a failed realloc leaves p as it was */
    if (inject(K_HEAP, SITE)) return errno = ENOMEM, NULL;
    return __real_realloc(p, n);
}
void *__wrap_aligned_alloc(size_t align, size_t n) {
    if (inject(K_HEAP, SITE)) return errno = ENOMEM, NULL;
    return __real_aligned_alloc(align, n);
}
int __wrap_posix_memalign(void **p, size_t align, size_t n) {
    if (inject(K_HEAP, SITE)) return ENOMEM;
    return __real_posix_memalign(p, align, n);
}
char *__wrap_strdup(const char *s) {
    if (inject(K_HEAP, SITE)) return errno = ENOMEM, NULL;
    return __real_strdup(s);
}
char *__wrap_strndup(const char *s, size_t n) {
    if (inject(K_HEAP, SITE)) return errno = ENOMEM, NULL;
    return __real_strndup(s, n);
}
/* A mapping (the model file, its huge-page copy) or a change of protection
 * (sealing that copy read-only) fails as the kernel does without memory. */
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    if (inject(K_MAP, SITE)) return errno = ENOMEM, MAP_FAILED;
    return __real_mmap(addr, len, prot, flags, fd, off);
}
int __wrap_mprotect(void *addr, size_t len, int prot) {
    if (inject(K_MAP, SITE)) return errno = ENOMEM, -1;
    return __real_mprotect(addr, len, prot);
}
/* A stream needs a FILE from the heap. */
FILE *__wrap_fopen(const char *path, const char *mode) {
    if (inject(K_FILE, SITE)) return errno = ENOMEM, NULL;
    return __real_fopen(path, mode);
}
FILE *__wrap_fdopen(int fd, const char *mode) {
    if (inject(K_FILE, SITE)) return errno = ENOMEM, NULL;
    return __real_fdopen(fd, mode);
}
/* libyaml out of memory: initialize returns 0 with nothing to delete;
 * parse and load return 0 with error YAML_MEMORY_ERROR and no event or
 * document to delete, the parser still to be deleted. */
int __wrap_yaml_parser_initialize(yaml_parser_t *p) {
    if (inject(K_YAML, SITE)) {
        memset(p, 0, sizeof *p);
        p->error = YAML_MEMORY_ERROR;
        return 0;
    }
    return __real_yaml_parser_initialize(p);
}
int __wrap_yaml_parser_parse(yaml_parser_t *p, yaml_event_t *e) {
    if (inject(K_YAML, SITE)) {
        memset(e, 0, sizeof *e);
        p->error = YAML_MEMORY_ERROR;
        return 0;
    }
    return __real_yaml_parser_parse(p, e);
}
int __wrap_yaml_parser_load(yaml_parser_t *p, yaml_document_t *d) {
    if (inject(K_YAML, SITE)) {
        memset(d, 0, sizeof *d);
        p->error = YAML_MEMORY_ERROR;
        return 0;
    }
    return __real_yaml_parser_load(p, d);
}

/* Where the calls counted since arm() came from (the first MAX_SITES): as
 * "program(+offset)", for addr2line -e program offset. */
static void print_sites(const char *what) {
    long n = atomic_load(&g_calls);
    fprintf(stderr, "%s: %ld wrapped call(s); callers of the first %d:\n", what, n, n < MAX_SITES ? (int)n : MAX_SITES);
    backtrace_symbols_fd(g_sites, n < MAX_SITES ? (int)n : MAX_SITES, 2);
}

/* ---- The sweep --------------------------------------------------------------------------------------------------- */

/* An operation under test: it sets itself up (unarmed), calls arm() just
 * before the library call(s) under test and disarm() right after, checks
 * what the API promises on failure (*out NULL, state unchanged), and on
 * success checks the result works and frees it. Returns the status of the
 * armed call(s). */
typedef kara_status (*op_fn)(void *arg);

typedef struct sweep_result {
    long points; /* wrapped calls of a run that failed none */
    long kinds[K_KINDS];
    long absorbed; /* runs that failed one and still returned KARA_OK */
} sweep_result;

/* Run op with its 1st, 2nd, ... wrapped call failed until a run reaches no
 * failure; after each failed run, run it again with nothing failed: what
 * the failure left behind (a model, a context) must still work. */
static sweep_result sweep(const char *name, op_fn op, void *arg) {
    sweep_result r = {0};
    for (long n = 1;; n++) {
        g_fail_at = n;
        kr_test_clear_error();
        kara_status st = op(arg);
        if (atomic_load(&g_injected) == 0) {
            CHECK_MSG(st == KARA_OK, "%s: status %d with nothing failed: %s", name, st, kara_last_error());
            r.points = atomic_load(&g_calls);
            for (int k = 0; k < K_KINDS; k++) r.kinds[k] = atomic_load(&g_kind[k]);
            break;
        }
        if (getenv("KR_ALLOC_TRACE")) { /* where each failed call came from: addr2line -f -e PROGRAM OFFSET */
            fprintf(stderr, "%s: call %ld failed, status %d, at ", name, n, st);
            backtrace_symbols_fd(&g_fail_site, 1, 2);
        }
        if (st == KARA_OK) {
            r.absorbed++; /* a fallback; op checked that the result works */
            continue;
        }
        CHECK_MSG(st == KARA_ERR_NOMEM || st == KARA_ERR_IO, "%s: call %ld failed: status %d (%s), want NOMEM or IO",
                  name, n, st, kara_last_error());
        CHECK_MSG(kara_last_error()[0] != '\0', "%s: call %ld failed: status %d without a message", name, n, st);
        g_fail_at = 0;
        st = op(arg);
        CHECK_MSG(st == KARA_OK, "%s: after call %ld failed, the retry returned %d: %s", name, n, st,
                  kara_last_error());
        if (n > 100000) {
            CHECK_MSG(false, "%s: no end to the sweep", name);
            break;
        }
    }
    fprintf(stderr, "alloc sweep: %-52s %4ld wrapped calls (", name, r.points);
    for (int k = 0; k < K_KINDS; k++) fprintf(stderr, "%s%ld %s", k ? ", " : "", r.kinds[k], kind_names[k]);
    fprintf(stderr, "), each failed once; %ld absorbed\n", r.absorbed);
    return r;
}

/* ---- Fixtures ---------------------------------------------------------------------------------------------------- */

static char g_model_path[512];
static uint8_t *g_model_bytes;
static size_t g_model_size;
static kara_model *g_model; /* loaded unarmed, for the context-side operations */
static int32_t g_n_vocab;
static float *g_ref_logits;                  /* model_works's logits from g_model */
static int32_t g_ref_toks[16], g_ref_n_toks; /* "hello world" tokenized by g_model */

static int32_t tok_at(int32_t i) { return (int32_t)((i * 7919u + 13u) % (uint32_t)(g_n_vocab - 4)) + 3; }

enum { CTX_FULL, CTX_KARA_PER_WINDOW, CTX_KARA_ON_DEMAND };

/* Small contexts whose KV pool is sized for n_ctx (budget 0); Kara's modes
 * with a window every 8 tokens and, on demand, a 64-slot share, so that
 * scoring, rings and eviction are all on. */
static void ctx_params(kara_context_params *cp, int mode, int32_t n_seq) {
    kara_context_params_init(cp);
    cp->n_ctx = 256;
    cp->n_batch = 64;
    cp->n_seq_max = n_seq;
    cp->n_threads = 1;
    cp->kv.budget = 0;
    cp->kv.method = mode == CTX_FULL ? KARA_KV_METHOD_FULL : KARA_KV_METHOD_KARA;
    cp->kv.interval = 8;
    kr_kv_tune(&cp->kv)->buffer = 8;
    kr_kv_tune(&cp->kv)->min_compressible = 8;
    if (mode == CTX_KARA_PER_WINDOW) {
        kr_kv_tune(&cp->kv)->evict = KARA_KV_EVICT_PER_WINDOW;
        cp->kv.retention = 0.5f;
    } else if (mode == CTX_KARA_ON_DEMAND) {
        kr_kv_tune(&cp->kv)->evict = KARA_KV_EVICT_ON_DEMAND;
        cp->kv.seq_tokens = 64;
        kr_kv_tune(&cp->kv)->reads_weight = 1.0f;
    }
}

/* A model works: a context on it decodes a few tokens to g_model's logits
 * (out, when given, receives them). The file's layouts (no_repack, mmap,
 * or a repack that fell back) sum in another order: equal within 1e-3,
 * for logits of order 1. */
static bool model_works(kara_model *m, float *out) {
    kara_context_params cp;
    ctx_params(&cp, CTX_FULL, 1);
    kara_context *c = NULL;
    if (!CHECK_MSG(kara_context_create(m, &cp, &c) == KARA_OK, "context: %s", kara_last_error())) return false;
    int32_t toks[6];
    for (int i = 0; i < 6; i++) toks[i] = tok_at(i);
    kara_batch b = kara_batch_one_sequence(toks, 6, 0, 0);
    bool ok = CHECK(kara_decode(c, &b) == KARA_OK);
    const float *lg = kara_get_logits(c, -1);
    ok = ok && CHECK(lg != NULL);
    if (ok && out) memcpy(out, lg, sizeof(float) * (size_t)g_n_vocab);
    float worst = 0;
    for (int32_t i = 0; ok && g_ref_logits && i < g_n_vocab; i++) {
        float d = lg[i] - g_ref_logits[i];
        if (!(d * d <= worst * worst)) worst = d; /* NaN included */
    }
    ok = ok && CHECK_MSG(worst * worst <= 1e-6f, "logits differ from the reference by %g", worst);
    kara_context_free(c);
    return ok;
}

/* ---- Operations -------------------------------------------------------------------------------------------------- */

enum { SRC_PATH, SRC_FD, SRC_BUFFER };
typedef struct load_op {
    int src;
    bool use_mmap, vocab_only, no_repack;
} load_op;

static kara_status op_load(void *arg) {
    const load_op *o = arg;
    kara_model_params mp;
    kara_model_params_init(&mp);
    mp.use_mmap = o->use_mmap;
    mp.vocab_only = o->vocab_only;
    mp.no_repack = o->no_repack;
    kara_model *m = (kara_model *)&mp; /* not NULL: the call must set it */
    int fd = o->src == SRC_FD ? open(g_model_path, O_RDONLY | O_CLOEXEC) : -1;
    kara_status st;
    arm();
    if (o->src == SRC_PATH)
        st = kara_model_load(g_model_path, &mp, &m);
    else if (o->src == SRC_FD)
        st = kara_model_load_from_fd(fd, &mp, &m);
    else
        st = kara_model_load_from_buffer(g_model_bytes, g_model_size, &mp, &m);
    disarm();
    if (fd >= 0) close(fd);
    if (st != KARA_OK) {
        CHECK_MSG(m == NULL, "model load failed (%d) and left *out set", st);
        return st;
    }
    if (CHECK(m != NULL)) {
        CHECK_EQ_INT(kara_model_n_vocab(m), g_n_vocab);
        if (o->vocab_only) {
            int32_t toks[16], n = 0;
            CHECK(kara_tokenize(m, "hello world", -1, toks, 16, false, false, &n) == KARA_OK);
            CHECK(n == g_ref_n_toks && memcmp(toks, g_ref_toks, sizeof(int32_t) * (size_t)n) == 0);
        } else {
            model_works(m, NULL);
        }
        kara_model_free(m);
    }
    return st;
}

static kara_status op_context(void *arg) {
    const int mode = *(const int *)arg;
    kara_context_params cp;
    ctx_params(&cp, mode, 2);
    kara_context *c = (kara_context *)&cp;
    arm();
    kara_status st = kara_context_create(g_model, &cp, &c);
    disarm();
    if (st != KARA_OK) {
        CHECK_MSG(c == NULL, "kara_context_create failed (%d) and left *out set", st);
        return st;
    }
    /* it works, and past a few windows */
    for (int32_t p = 0; p < 40; p += 10) {
        int32_t toks[10];
        for (int i = 0; i < 10; i++) toks[i] = tok_at(p + i);
        kara_batch b = kara_batch_one_sequence(toks, 10, p, 0);
        CHECK_MSG(kara_decode(c, &b) == KARA_OK, "decode: %s", kara_last_error());
    }
    kara_context_free(c);
    return st;
}

/* Wrapped calls of the first of an operation's calls (kara_engine_create,
 * kara_generator_create): the rest come from the calls after it. */
static long g_calls_first;

/* A context shared by the engine and generator operations: whatever a
 * failed create or start leaves in it must not stop the next run. */
static kara_context *g_ctx;

static void engine_request(kara_engine_request *r, const int32_t *prompt, int32_t n) {
    kara_engine_request_init(r);
    r->id = 7;
    r->prompt = prompt;
    r->n_prompt = n;
    r->max_tokens = 24;
    r->ignore_eog = true;
    r->sampling.temperature = 0;
    r->n_stop = 1;
    r->stop[0] = "never-in-output";
}

/* Steps eng until it is done: every request ends with KARA_DONE; the
 * steps allocate nothing (counted, nothing failed). */
static void engine_finish(kara_engine *eng, const char *what) {
    kara_status st;
    int done = 0;
    const counters outer = counters_save();
    g_fail_at = 0;
    arm();
    while ((st = kara_engine_step(eng)) == KARA_OK) {
        kara_engine_event ev;
        while (kara_engine_next_event(eng, &ev))
            if (ev.kind == KARA_ENGINE_DONE) {
                CHECK_MSG(ev.status == KARA_DONE, "%s: request ended with %d: %s", what, ev.status,
                          ev.error ? ev.error : "");
                done++;
            }
    }
    disarm();
    CHECK_EQ_INT(st, KARA_DONE);
    CHECK_EQ_INT(done, 1);
    if (!CHECK_MSG(atomic_load(&g_calls) == 0, "%s: kara_engine_step allocated", what)) print_sites(what);
    counters_restore(&outer);
}

static kara_status op_engine(void *arg) {
    (void)arg;
    int32_t prompt[20];
    for (int i = 0; i < 20; i++) prompt[i] = tok_at(i);
    kara_engine_params ep;
    kara_engine_params_init(&ep);
    ep.prefill_chunk = 8; /* the prompt over several steps */
    kara_engine *eng = (kara_engine *)&ep;
    kara_engine_request r;
    engine_request(&r, prompt, 20);
    arm();
    kara_status st = kara_engine_create(g_ctx, &ep, &eng);
    g_calls_first = atomic_load(&g_calls);
    bool created = st == KARA_OK, submitted = false;
    if (created) submitted = (st = kara_engine_submit(eng, &r)) == KARA_OK;
    if (submitted) st = kara_engine_step(eng);
    disarm();
    if (!created) {
        CHECK_MSG(eng == NULL, "kara_engine_create failed (%d) and left *out set", st);
        return st;
    }
    if (!submitted) /* the engine outlives a failed submit */
        CHECK_MSG(kara_engine_submit(eng, &r) == KARA_OK, "submit after a failure: %s", kara_last_error());
    engine_finish(eng, "engine steps");
    kara_engine_free(eng);
    return st;
}

/* Generates until done; kara_generator_next allocates nothing. */
static void generator_finish(kara_generator *g) {
    kara_piece p;
    kara_status st;
    int pieces = 0;
    const counters outer = counters_save();
    g_fail_at = 0;
    arm();
    while ((st = kara_generator_next(g, &p)) == KARA_OK) pieces++;
    disarm();
    CHECK_EQ_INT(st, KARA_DONE);
    CHECK(pieces > 0);
    if (!CHECK_MSG(atomic_load(&g_calls) == 0, "kara_generator_next allocated")) print_sites("generator_next");
    counters_restore(&outer);
}

static kara_status op_generator(void *arg) {
    (void)arg;
    int32_t prompt[20];
    for (int i = 0; i < 20; i++) prompt[i] = tok_at(100 + i);
    kara_generator_params gp;
    kara_generator_params_init(&gp);
    gp.sampling.temperature = 0;
    gp.max_tokens = 24;
    gp.ignore_eog = true;
    gp.n_stop = 1;
    gp.stop[0] = "never-in-output";
    kara_generator *g = (kara_generator *)&gp;
    arm();
    kara_status st = kara_generator_create(g_ctx, &gp, &g);
    g_calls_first = atomic_load(&g_calls);
    bool created = st == KARA_OK;
    if (created) st = kara_generator_start(g, 0, prompt, 20);
    disarm();
    if (!created) {
        CHECK_MSG(g == NULL, "kara_generator_create failed (%d) and left *out set", st);
        return st;
    }
    kara_status armed = st;
    if (st != KARA_OK) /* the generator outlives a failed start */
        CHECK_MSG(kara_generator_start(g, 0, prompt, 20) == KARA_OK, "start after a failure: %s", kara_last_error());
    generator_finish(g);
    kara_generator_free(g);
    return armed;
}

/* Decoding single tokens across compression events after a prompt: no
 * wrapped call at all (a sweep of it ends at its first run). */
static kara_status op_compress(void *arg) {
    const int mode = *(const int *)arg;
    kara_context_params cp;
    ctx_params(&cp, mode, 1);
    kara_context *c = NULL;
    if (!CHECK_MSG(kara_context_create(g_model, &cp, &c) == KARA_OK, "context: %s", kara_last_error()))
        return KARA_ERR_INTERNAL;
    int32_t toks[16];
    for (int i = 0; i < 16; i++) toks[i] = tok_at(i);
    kara_batch b = kara_batch_one_sequence(toks, 16, 0, 0);
    CHECK(kara_decode(c, &b) == KARA_OK);
    kara_kv_stats before, after;
    kara_context_kv_stats(c, &before);
    CHECK(before.scoring);
    kara_status st = KARA_OK;
    arm();
    for (int32_t p = 16; p < 200 && st == KARA_OK; p++) {
        int32_t t = tok_at(p);
        kara_batch one = kara_batch_one_sequence(&t, 1, p, 0);
        st = kara_decode(c, &one);
    }
    disarm();
    kara_context_kv_stats(c, &after);
    CHECK_MSG(after.events >= before.events + 10, "only %llu compression events",
              (unsigned long long)(after.events - before.events));
    CHECK(after.slots_evicted > before.slots_evicted);
    if (atomic_load(&g_calls) != 0) print_sites("decode across compression events");
    kara_context_free(c);
    return st;
}

static const char *g_config_path;
static char *g_config_text;
static kara_config g_config_want; /* the defaults with configs/default.yaml applied, loaded unarmed */

static kara_status op_config(void *arg) {
    const bool from_file = *(const bool *)arg;
    kara_config *c = malloc(sizeof *c), *before = malloc(sizeof *before);
    if (!c || !before) abort();
    kara_config_init(c);
    *before = *c;
    arm();
    kara_status st =
        from_file ? kara_config_load(c, g_config_path) : kara_config_load_text(c, g_config_text, -1, g_config_path);
    disarm();
    if (st != KARA_OK)
        CHECK_MSG(memcmp(c, before, sizeof *c) == 0, "a config load that failed (%d) changed the config", st);
    else
        CHECK_MSG(memcmp(c, &g_config_want, sizeof *c) == 0, "a config load gave other values");
    free(c);
    free(before);
    return st;
}

static kara_status op_gguf(void *arg) {
    (void)arg;
    kara_gguf *g = (kara_gguf *)&arg;
    arm();
    kara_status st = kara_gguf_open(g_model_path, &g);
    disarm();
    if (st != KARA_OK) {
        CHECK_MSG(g == NULL, "kara_gguf_open failed (%d) and left *out set", st);
        return st;
    }
    CHECK(kara_gguf_n_tensors(g) > 0 && kara_gguf_find(g, "general.architecture") != NULL);
    kara_gguf_close(g);
    return st;
}

/* ---- Driver ------------------------------------------------------------------------------------------------------ */

/* The library writes nothing to stdout: fd 1 goes to a file for the
 * sweeps, which must stay empty. Returns the saved fd 1. */
static int stdout_to_file(const char *path) {
    fflush(stdout);
    int saved = dup(1);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (saved < 0 || fd < 0 || dup2(fd, 1) < 0) abort();
    close(fd);
    return saved;
}

static void stdout_restore(int saved, const char *path) {
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    struct stat st;
    CHECK_MSG(stat(path, &st) == 0 && st.st_size == 0, "the library wrote %lld bytes to stdout", (long long)st.st_size);
}

static bool setup(void) {
    kr_synth_params sp;
    kr_synth_params_init(&sp);
    kr_synth_preset(&sp, "tiny");
    sp.n_ctx = 512;
    snprintf(g_model_path, sizeof g_model_path, "%s/tiny.gguf", kr_test_tmpdir());
    char err[256];
    if (!CHECK_MSG(kr_synth_write(&sp, g_model_path, NULL, NULL, err, sizeof err) == KARA_OK, "synth: %s", err))
        return false;
    g_model_bytes = (uint8_t *)kr_test_read_file(g_model_path, &g_model_size);
    if (!CHECK(kara_model_load(g_model_path, NULL, &g_model) == KARA_OK)) return false;
    g_n_vocab = kara_model_n_vocab(g_model);
    g_ref_logits = malloc(sizeof(float) * (size_t)g_n_vocab);
    if (!g_ref_logits || !model_works(g_model, g_ref_logits)) return false;
    if (!CHECK(kara_tokenize(g_model, "hello world", -1, g_ref_toks, 16, false, false, &g_ref_n_toks) == KARA_OK))
        return false;
    kara_context_params cp;
    ctx_params(&cp, CTX_KARA_ON_DEMAND, 2);
    if (!CHECK_MSG(kara_context_create(g_model, &cp, &g_ctx) == KARA_OK, "context: %s", kara_last_error()))
        return false;
    static char cfg[1024];
    snprintf(cfg, sizeof cfg, "%s/configs/default.yaml", KARA_SOURCE_DIR);
    g_config_path = cfg;
    size_t n;
    g_config_text = kr_test_read_file(cfg, &n);
    kara_config_init(&g_config_want);
    return CHECK(g_config_text != NULL) &&
        CHECK_MSG(kara_config_load(&g_config_want, cfg) == KARA_OK, "config: %s", kara_last_error());
}

int main(void) {
    if (!setup()) return kr_test_finish();
    char out_path[512];
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", kr_test_tmpdir());
    int saved = stdout_to_file(out_path);

    load_op loads[] = {
        {SRC_PATH, false, false, false},                                    /* read into huge pages, repacked */
        {SRC_PATH, false, false, true},                                     /* read, file layouts */
        {SRC_PATH, true, false, false},                                     /* mapped */
        {SRC_PATH, true, true, false},                                      /* vocab only */
        {SRC_FD, false, false, false},   {SRC_BUFFER, false, false, false}, /* copied */
    };
    const char *load_names[] = {"kara_model_load (read, repacked)", "kara_model_load (read, no_repack)",
                                "kara_model_load (use_mmap)",       "kara_model_load (vocab_only)",
                                "kara_model_load_from_fd (read)",   "kara_model_load_from_buffer (copy)"};
    for (size_t i = 0; i < sizeof loads / sizeof loads[0]; i++) {
        sweep_result r = sweep(load_names[i], op_load, &loads[i]);
        CHECK(r.points > 0);
        /* the one fallback: repacking a matrix (or making the image writable for it) fails and the matrix keeps
         * the file's layout; model_works checked the logits */
        if (loads[i].no_repack || loads[i].use_mmap)
            CHECK_MSG(r.absorbed == 0, "%s: %ld failures absorbed", load_names[i], r.absorbed);
    }

    int modes[] = {CTX_FULL, CTX_KARA_PER_WINDOW, CTX_KARA_ON_DEMAND};
    const char *ctx_names[] = {"kara_context_create (full)", "kara_context_create (kara per_window)",
                               "kara_context_create (kara on_demand)"};
    for (int i = 0; i < 3; i++) {
        sweep_result r = sweep(ctx_names[i], op_context, &modes[i]);
        CHECK(r.points > 0 && r.absorbed == 0);
    }

    sweep_result r = sweep("kara_engine_create + submit + step", op_engine, NULL);
    CHECK(r.points > 0 && r.absorbed == 0);
    fprintf(stderr, "alloc sweep:   of which kara_engine_create %ld, submit + first step %ld\n", g_calls_first,
            r.points - g_calls_first);
    r = sweep("kara_generator_create + start", op_generator, NULL);
    CHECK(r.points > 0 && r.absorbed == 0);
    fprintf(stderr, "alloc sweep:   of which kara_generator_create %ld, kara_generator_start %ld\n", g_calls_first,
            r.points - g_calls_first);

    for (int i = 1; i < 3; i++) {
        const char *name = i == 1 ? "kara_decode across compression events (per_window)"
                                  : "kara_decode across compression events (on_demand)";
        CHECK_MSG(sweep(name, op_compress, &modes[i]).points == 0, "%s allocated", name);
    }

    bool from_file[] = {false, true};
    r = sweep("kara_config_load_text (configs/default.yaml)", op_config, &from_file[0]);
    CHECK(r.points > 0 && r.absorbed == 0);
    r = sweep("kara_config_load (configs/default.yaml)", op_config, &from_file[1]);
    CHECK(r.points > 0 && r.absorbed == 0);
    r = sweep("kara_gguf_open", op_gguf, NULL);
    CHECK(r.points > 0 && r.absorbed == 0);

    stdout_restore(saved, out_path);
    kara_context_free(g_ctx);
    kara_model_free(g_model);
    free(g_model_bytes);
    free(g_config_text);
    free(g_ref_logits);
    return kr_test_finish();
}

#endif /* KR_NO_LD_WRAP */
