/*
 * kara.h - the one public header of Kara, a CPU-first inference runtime for GGUF language models (Llama, Qwen2,
 * Qwen3, DeepSeek-R1-Distill). This header is the contract of every declaration; docs/API.md is the guide.
 *
 * Conventions: every function that can fail returns a kara_status; objects come back through out-parameters; every
 * *_free(NULL) is a no-op; params structs are filled with defaults by their *_init function; a NULL params pointer
 * means defaults. The library never writes to stdout and never exits. The params structs passed to a *_create or
 * *_load function begin with `size`, which *_init sets to the struct's sizeof: a struct that was not initialised
 * (size 0) or comes from a different kara.h is refused with KARA_ERR_ARG instead of being misread. New fields are only
 * ever appended, so a later library can take an older caller's shorter struct (defaults for the rest).
 */
#ifndef KARA_H
#define KARA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KARA_VERSION_MAJOR 0
#define KARA_VERSION_MINOR 1
#define KARA_VERSION_PATCH 0
#define KARA_VERSION_NUMBER (KARA_VERSION_MAJOR * 1000000 + KARA_VERSION_MINOR * 1000 + KARA_VERSION_PATCH)

#if defined(__GNUC__)
#define KARA_DEPRECATED(func, hint) func __attribute__((deprecated(hint)))
#else
#define KARA_DEPRECATED(func, hint) func
#endif

/* ---- Status codes (guide: docs/API.md, section "Conventions and errors") ---------------------------------------- */
/* 0 is success; positive values are non-error outcomes; negative values are errors grouped by range: argument
 * (-1..-9), input/format (-10..-19), resources (-20..-29), configuration (-30..-39), internal (-40..). */
typedef enum kara_status {
    KARA_OK = 0,
    KARA_DONE = 1,               /* generation ended (end-of-generation token, limit) */
    KARA_STOPPED = 2,            /* stopped by a stop string or the abort callback */
    KARA_ERR_ARG = -1,           /* invalid argument */
    KARA_ERR_ABORTED = -2,       /* cancelled by a progress/abort callback */
    KARA_ERR_IO = -10,           /* file cannot be opened, read or written */
    KARA_ERR_FORMAT = -11,       /* malformed input (GGUF, JSON, text) */
    KARA_ERR_UNSUPPORTED = -12,  /* valid input that this build does not support */
    KARA_ERR_TOKEN = -13,        /* token id out of range */
    KARA_ERR_NOMEM = -20,        /* allocation failed */
    KARA_ERR_KV_BUDGET = -21,    /* the KV budget cannot hold the request */
    KARA_ERR_CONTEXT_FULL = -22, /* position beyond the context size */
    KARA_ERR_CONFIG = -30,       /* bad configuration value */
    KARA_ERR_INTERNAL = -40,     /* a bug: an internal invariant failed */
    KARA_ERR_DEVICE = -50,       /* the GPU failed (a CUDA error); the context must be freed */
    KARA_ERR_BUFFER = -23        /* an output buffer is too small; the call says how large it must be */
} kara_status;

/* A short constant name for a status ("ok", "malformed input", "KV budget exceeded", ...). */
const char *kara_status_str(kara_status status);
/* The message of the last error raised on this thread, naming what failed and where (file, byte offset, key). Valid
 * until the next failing call on the same thread. Never NULL. */
const char *kara_last_error(void);

/* ---- Version, system, logging ------------------------------------------------------------------------------------ */
int kara_version_number(void); /* KARA_VERSION_NUMBER of the library */
const char *kara_version_string(void);
/* One line describing the build and the CPU kernels chosen ("isa=avx512 ..."). */
const char *kara_system_info(void);

typedef enum kara_log_level {
    KARA_LOG_ERROR = 0,
    KARA_LOG_WARN = 1,
    KARA_LOG_INFO = 2,
    KARA_LOG_DEBUG = 3
} kara_log_level;
typedef void (*kara_log_fn)(kara_log_level level, const char *msg, void *user);
/* Route log messages to fn, which gets every level; NULL restores the default: stderr, up to kara_log_set_level's
 * max_level (default WARN). Not thread-safe against concurrent logging. */
void kara_log_set(kara_log_fn fn, void *user);
void kara_log_set_level(kara_log_level max_level);

/* ---- Model (guide: docs/API.md, section "Loading a model") ------------------------------------------------------- */
typedef struct kara_model kara_model;     /* immutable after load; share across threads */
typedef struct kara_context kara_context; /* KV cache and scratch; one thread at a time */

/* Called on the loading thread (once, with 1.0, when the file is read and checked); false: KARA_ERR_ABORTED. */
typedef bool (*kara_progress_fn)(float progress, void *user);
typedef struct kara_model_params {
    uint32_t size;             /* sizeof (kara_model_params_init) */
    bool vocab_only;           /* metadata and tokenizer only, no weights (default false) */
    bool use_mmap;             /* map the file (instant load); default false: read it into memory on huge pages */
    bool no_repack;            /* keep the file's weight layouts; default false: repack them for the CPU kernels */
    kara_progress_fn progress; /* optional */
    void *progress_user;
} kara_model_params;
void kara_model_params_init(kara_model_params *p);

/* Read (with use_mmap or vocab_only: map, and no repacking) and validate a GGUF file; the model holds its bytes until
 * kara_model_free. On failure *out is NULL and kara_last_error() names the problem and its byte offset: KARA_ERR_IO,
 * KARA_ERR_FORMAT, KARA_ERR_UNSUPPORTED (architecture, tensor type), KARA_ERR_ABORTED, KARA_ERR_NOMEM, KARA_ERR_ARG. */
kara_status kara_model_load(const char *path, const kara_model_params *p, kara_model **out);
/* The same from an open regular file (read from offset 0; fd stays open, its offset unmoved) or from a GGUF image in
 * memory: copied by default (data may be freed on return); with p->use_mmap read in place, so data must outlive the
 * model and be aligned to the file's general.alignment (else KARA_ERR_ARG). Errors as kara_model_load (docs/API.md). */
kara_status kara_model_load_from_fd(int fd, const kara_model_params *p, kara_model **out);
kara_status kara_model_load_from_buffer(const void *data, size_t size, const kara_model_params *p, kara_model **out);
void kara_model_free(kara_model *model);

const char *kara_model_arch(const kara_model *model); /* "llama", "qwen2", "qwen3" */
const char *kara_model_desc(const kara_model *model); /* e.g. "qwen3 28L 1024d Q4_K_M"; lives with the model */
int32_t kara_model_n_vocab(const kara_model *model);
int32_t kara_model_n_ctx_train(const kara_model *model);
int32_t kara_model_n_embd(const kara_model *model);
int32_t kara_model_n_layer(const kara_model *model);
int32_t kara_model_n_head(const kara_model *model);
int32_t kara_model_n_head_kv(const kara_model *model);
int32_t kara_model_head_dim(const kara_model *model);
uint64_t kara_model_n_params(const kara_model *model);
uint64_t kara_model_size_bytes(const kara_model *model);     /* bytes of weight data */
uint64_t kara_model_repacked_bytes(const kara_model *model); /* of which rewritten at load (no_repack); 0 if none */
/* Weight bytes one single-token decode step reads: every matrix in full (the output projection too), one row of the
 * token embeddings (all of it when tied to the output) and the norm and bias vectors, in the file's layouts. A step's
 * time divides it into an effective memory bandwidth (kara bench). */
uint64_t kara_model_decode_bytes(const kara_model *model);
/* A metadata value as text (numbers formatted, arrays summarised) in buf, cut to size bytes with a NUL like
 * snprintf; *len (may be NULL) gets the whole text's length. False when the key is absent (buf "", *len 0). */
bool kara_model_meta_str(const kara_model *model, const char *key, char *buf, size_t size, size_t *len);

/* ---- Tokenizer (guide: docs/API.md, section "Tokens") ------------------------------------------------------------ */
int32_t kara_token_bos(const kara_model *model); /* -1 when the vocab has none */
int32_t kara_token_eos(const kara_model *model);
bool kara_token_is_eog(const kara_model *model, int32_t token); /* end of generation */
bool kara_vocab_add_bos(const kara_model *model);
/* false when the file has no tokenizer (tokenizer.ggml.model absent, "none" or "no_vocab"): the model then takes
 * token ids only, kara_tokenize fails with KARA_ERR_UNSUPPORTED, and a vocab-only load has no tokens. */
bool kara_model_has_tokenizer(const kara_model *model);

/* Tokenize text (len < 0: NUL-terminated; malformed UTF-8 reads as U+FFFD, as in llama.cpp). add_special adds
 * BOS/EOS as the vocabulary's rules say; parse_special matches special tokens such as "<|im_start|>" as single tokens
 * (never otherwise). *n_tokens: the number of ids the text needs. KARA_OK: they are in tokens. KARA_ERR_ARG: a NULL
 * argument. KARA_ERR_BUFFER: max_tokens < *n_tokens (the first max_tokens are written; call again with room for
 * *n_tokens).
 * KARA_ERR_UNSUPPORTED: the model has no tokenizer. KARA_ERR_NOMEM. */
kara_status kara_tokenize(const kara_model *model, const char *text, int32_t len, int32_t *tokens, int32_t max_tokens,
                          bool add_special, bool parse_special, int32_t *n_tokens);
/* The same with named flags instead of two booleans that are easy to swap: KARA_TOKENIZE_ADD_SPECIAL |
 * KARA_TOKENIZE_PARSE_SPECIAL, or 0. Other bits are KARA_ERR_ARG. */
enum { KARA_TOKENIZE_ADD_SPECIAL = 1u << 0, KARA_TOKENIZE_PARSE_SPECIAL = 1u << 1 };
kara_status kara_tokenize_ex(const kara_model *model, const char *text, int32_t len, int32_t *tokens,
                             int32_t max_tokens, uint32_t flags, int32_t *n_tokens);

/* The bytes of one token (SPM "\u2581" becomes a space, byte tokens become their byte), never NUL-terminated: *len
 * says how many (a piece may split a UTF-8 character, so concatenate pieces before printing them). Special/control
 * tokens are rendered only when special is true (else *len is 0). KARA_OK; KARA_ERR_TOKEN for an id outside the
 * vocabulary; KARA_ERR_ARG for a NULL argument; KARA_ERR_BUFFER for a size smaller than the piece (*len: the size it needs). */
kara_status kara_token_to_piece(const kara_model *model, int32_t token, char *buf, int32_t size, bool special,
                                int32_t *len);

/* ---- GGUF files (guide and a complete example: docs/API.md, section "GGUF files") -------------------------------- */
/* A read-only view of a GGUF file (versions 2 and 3), to show, check or convert models without loading them.
 * kara_gguf_open checks the whole file: nothing reached through this API points outside it. The structs are
 * zero-copy views: strings, arrays and tensor data point into the mapped file, valid until kara_gguf_close; strings
 * are not NUL-terminated ("%.*s"). A kara_gguf never changes after open: any number of threads may read it. */
typedef struct kara_gguf kara_gguf;
/* The type of a metadata value, numbered as in the file. */
typedef enum kara_gguf_vtype {
    KARA_GGUF_UINT8 = 0,
    KARA_GGUF_INT8 = 1,
    KARA_GGUF_UINT16 = 2,
    KARA_GGUF_INT16 = 3,
    KARA_GGUF_UINT32 = 4,
    KARA_GGUF_INT32 = 5,
    KARA_GGUF_FLOAT32 = 6,
    KARA_GGUF_BOOL = 7,
    KARA_GGUF_STRING = 8,
    KARA_GGUF_ARRAY = 9,
    KARA_GGUF_UINT64 = 10,
    KARA_GGUF_INT64 = 11,
    KARA_GGUF_FLOAT64 = 12,
    KARA_GGUF_VTYPE_COUNT = 13
} kara_gguf_vtype;

/* len bytes at ptr, inside the file; not NUL-terminated. */
typedef struct kara_gguf_str {
    const char *ptr;
    uint64_t len;
} kara_gguf_str;
typedef struct kara_gguf_value kara_gguf_value;
/* An array value: n elements of one type. Numbers and bools lie at data, little-endian as stored (read them with
 * kara_gguf_arr_int/_float); strings are strs[0..n); nested arrays items[0..n). The other two pointers are NULL. */
typedef struct kara_gguf_array {
    kara_gguf_vtype type; /* of the elements */
    uint64_t n;
    const uint8_t *data;          /* numbers and bools */
    const kara_gguf_str *strs;    /* type == KARA_GGUF_STRING */
    const kara_gguf_value *items; /* type == KARA_GGUF_ARRAY */
} kara_gguf_array;
/* A metadata value, decoded: the member of v that type selects. */
struct kara_gguf_value {
    kara_gguf_vtype type;
    union {
        uint64_t u64;        /* UINT8, UINT16, UINT32, UINT64; BOOL as 0 or 1 */
        int64_t i64;         /* INT8, INT16, INT32, INT64 */
        double f64;          /* FLOAT32, FLOAT64 */
        kara_gguf_str str;   /* STRING */
        kara_gguf_array arr; /* ARRAY */
    } v;
};
/* One metadata pair. Keys are unique and never empty. */
typedef struct kara_gguf_kv {
    kara_gguf_str key;
    kara_gguf_value value;
    uint64_t offset; /* byte offset of the key in the file */
} kara_gguf_kv;
/* One entry of the tensor table. Names are unique and never empty. */
typedef struct kara_gguf_tensor {
    kara_gguf_str name;
    uint32_t n_dims;      /* 1..4 */
    int64_t ne[4];        /* elements per dimension, ne[0] the row length (innermost); 1 beyond n_dims */
    uint32_t type;        /* GGML type id (0 F32, 1 F16, 8 Q8_0, 12 Q4_K, ...) this build knows (kara_gguf_type_name) */
    uint64_t offset;      /* of the data, from the data section (kara_gguf_data_offset) */
    const void *data;     /* the tensor's nbytes bytes, inside the file */
    uint64_t nbytes;      /* bytes of data */
    uint64_t info_offset; /* byte offset of this entry in the file */
} kara_gguf_tensor;
/* Map a GGUF file and check it whole. KARA_OK: *out is the file, to close with kara_gguf_close. Otherwise *out is
 * NULL (when out is not) and kara_last_error() says why: KARA_ERR_IO ("cannot open 'PATH': reason"), KARA_ERR_FORMAT
 * ("PATH: problem at byte offset N": not GGUF, a version other than 2 or 3, truncation, a length, count, type, rank,
 * alignment or offset the file cannot hold, a duplicate key or tensor name), KARA_ERR_NOMEM, KARA_ERR_ARG. */
kara_status kara_gguf_open(const char *path, kara_gguf **out);
void kara_gguf_close(kara_gguf *g);                 /* unmap the file: every view into it becomes invalid */
uint32_t kara_gguf_version(const kara_gguf *g);     /* 2 or 3 */
uint64_t kara_gguf_size(const kara_gguf *g);        /* bytes of the file */
uint64_t kara_gguf_alignment(const kara_gguf *g);   /* general.alignment; 32 when absent */
uint64_t kara_gguf_data_offset(const kara_gguf *g); /* byte offset of the tensor data section */

/* Metadata pairs and tensors in file order: the i-th, or NULL when i >= kara_gguf_n_kv (kara_gguf_n_tensors). */
uint64_t kara_gguf_n_kv(const kara_gguf *g);
const kara_gguf_kv *kara_gguf_kv_at(const kara_gguf *g, uint64_t i);
uint64_t kara_gguf_n_tensors(const kara_gguf *g);
const kara_gguf_tensor *kara_gguf_tensor_at(const kara_gguf *g, uint64_t i);
/* The pair with this key, the tensor with this name (exact bytes); NULL when there is none. */
const kara_gguf_kv *kara_gguf_find(const kara_gguf *g, const char *key);
const kara_gguf_tensor *kara_gguf_find_tensor(const kara_gguf *g, const char *name);
/* Typed getters: true, with the value in *out, when the key exists with a type that holds it: any integer type or
 * BOOL for u64 (not a negative value) and i64 (not a value above INT64_MAX), any number or BOOL for f64, BOOL for
 * bool, STRING for str (a view). false, *out unchanged, when the key is absent or its value does not fit. */
bool kara_gguf_get_u64(const kara_gguf *g, const char *key, uint64_t *out);
bool kara_gguf_get_i64(const kara_gguf *g, const char *key, int64_t *out);
bool kara_gguf_get_f64(const kara_gguf *g, const char *key, double *out);
bool kara_gguf_get_bool(const kara_gguf *g, const char *key, bool *out);
bool kara_gguf_get_str(const kara_gguf *g, const char *key, kara_gguf_str *out);
/* The array value of a key; NULL when the key is absent or not an array. */
const kara_gguf_array *kara_gguf_get_arr(const kara_gguf *g, const char *key);
/* Element i of an array: _int of integers or BOOLs (UINT64 above INT64_MAX wraps), _float of any numbers or BOOLs.
 * 0 when i >= arr->n or the array holds other elements (floats for arr_int, strings, arrays). */
int64_t kara_gguf_arr_int(const kara_gguf_array *arr, uint64_t i);
double kara_gguf_arr_float(const kara_gguf_array *arr, uint64_t i);
/* true when s holds exactly the bytes of the NUL-terminated c. */
bool kara_gguf_str_eq(kara_gguf_str s, const char *c);
/* "uint8", "int8", ..., "float64" (the names above, lower case); "unknown" for a value out of range. */
const char *kara_gguf_vtype_name(kara_gguf_vtype t);
/* "F32", "F16", "BF16", "Q8_0", "Q4_K", ...; "?" for an id that is not a GGUF type this build knows. */
const char *kara_gguf_type_name(uint32_t type);

/* ---- KV cache policy (guide: docs/API.md, section "The KV cache under a budget") --------------------------------- */
/* The method: docs/KARA_METHOD.md (section 12 lists every parameter); YAML keys, ranges, value names:
 * configs/README.md. The enum values below are the names listed there. */
typedef enum kara_kv_dtype { KARA_KV_F16 = 0, KARA_KV_F32 = 1, KARA_KV_Q8_0 = 2, KARA_KV_Q4_0 = 3 } kara_kv_dtype;
typedef enum kara_kv_method {
    KARA_KV_METHOD_FULL = 0,
    KARA_KV_METHOD_STREAMING,
    KARA_KV_METHOD_SNAPKV,
    KARA_KV_METHOD_H2O,
    KARA_KV_METHOD_CHUNKKV,
    KARA_KV_METHOD_RANDOM,
    KARA_KV_METHOD_RECENT,
    KARA_KV_METHOD_KARA,
    KARA_KV_METHOD_RKV,         /* R-KV: observed attention less key redundancy (docs/KARA_METHOD.md section 11) */
    KARA_KV_METHOD_LAZY,        /* LazyEviction: lagged eviction by observed recurrence intervals (ibid.) */
    KARA_KV_METHOD_PRIOR_RECENT /* Kara's windows kept by the model's retention prior alone, no attention scoring */
} kara_kv_method;
/* What a step does when the pool cannot hold it: docs/KARA_METHOD.md section 9. */
typedef enum kara_pool_fallback {
    KARA_POOL_PREEMPT = 0,
    KARA_POOL_RECOMPRESS_HISTORY,
    KARA_POOL_FAIL
} kara_pool_fallback;
/* When Kara compresses: PERIODIC, at window events (docs/KARA_METHOD.md section 4); THRESHOLD, once a sequence's
 * cache reaches its token budget, over the whole generated cache (ablation A8, docs/KV_COMPRESSION.md). */
typedef enum kara_kv_trigger { KARA_KV_TRIGGER_PERIODIC = 0, KARA_KV_TRIGGER_THRESHOLD } kara_kv_trigger;
/* How the window methods (kara, chunkkv, recent, random) evict (docs/KARA_METHOD.md section 7). ON_DEMAND: windows
 * are scored as they close, slots dropped only when a sequence reaches its share (seq_tokens), so a budget that holds
 * every sequence whole never evicts. PER_WINDOW: each window keeps `retention` of its slots at its event (the
 * paper's setting, for ablations); the share still caps a sequence. */
typedef enum kara_kv_evict { KARA_KV_EVICT_ON_DEMAND = 0, KARA_KV_EVICT_PER_WINDOW } kara_kv_evict;
#define KARA_MAX_PROTECT_TOKENS 16
/* Bytes inside kara_kv_params for the research settings (below). */
#define KARA_KV_TUNING_BYTES 1024
/* The KV cache and its compression: the stable settings as fields (each comment gives the default of
 * kara_kv_params_init and the YAML key), everything else by name. Filled by kara_kv_params_init, the YAML loader and
 * the CLI. */
typedef struct kara_kv_params {
    int32_t block_size;  /* kv_cache.block_size: 16 slots per block */
    kara_kv_dtype dtype; /* kv_cache.dtype: f16; q8_0/q4_0: blocks of 32 along each slot's row */
    uint64_t budget; /* kv_cache.budget: bytes for pool, rings and scratch (1 GiB); 0 = sized for n_ctx x n_seq_max */
    kara_kv_method method; /* kv_cache.method: kara */
    int32_t seq_tokens;    /* kv_cache.seq_tokens: a sequence's share in slots; 0 = auto (the pool / n_seq_max) */
    int32_t interval;      /* kara.interval: 128 slots between compression events */
    float retention;       /* kara.retention: 0.2; the share of a window kept at its event (per_window eviction) */
    /* The research settings: how Kara scores and selects, its eviction details and every baseline's knobs (50 keys,
     * listed in configs/README.md), which may change between releases. Set and read them by their YAML key
     * with kara_kv_params_set / kara_kv_params_get ("kara.score.mode", "two_sided"); the bytes are private. */
    union {
        uint64_t align_;
        unsigned char bytes[KARA_KV_TUNING_BYTES];
    } tuning;
} kara_kv_params;
void kara_kv_params_init(kara_kv_params *p); /* every field to its default */
/* Set one setting by its YAML key ("kara.score.mode", "two_sided"), checked like the YAML value: KARA_ERR_CONFIG for
 * an unknown key, a key outside the struct or a bad value (*p unchanged). The context's: context.*, runtime.threads,
 * batch.max_concurrency and every KV key. */
kara_status kara_kv_params_set(kara_kv_params *p, const char *key, const char *value);
/* A setting's value as text, as YAML would give it ("two_sided", "0.2", "16 KiB"): KARA_ERR_CONFIG for an unknown key
 * or one outside the struct, KARA_ERR_BUFFER when it does not fit in size bytes with its NUL. */
kara_status kara_kv_params_get(const kara_kv_params *p, const char *key, char *buf, size_t size);
/* A numeric setting's value: integers, sizes in bytes, floats, booleans (0/1) and enums (a kara.h enum's value; for
 * a research enum, the position of its name among the names configs/README.md lists). KARA_ERR_CONFIG for an unknown key, one outside the struct or one that is not a number (protect_token_ids). */
kara_status kara_kv_params_get_number(const kara_kv_params *p, const char *key, double *out);

/* Enum values' names as in YAML and on the command line ("kara", "f16"); "?" out of range. Parse
 * takes exactly these names; anything else is KARA_ERR_ARG (message listing them), *out untouched. */
const char *kara_kv_method_name(kara_kv_method m);
kara_status kara_kv_method_parse(const char *name, kara_kv_method *out);
/* What a method is, for tools that treat methods alike without naming them (kara eval, eval-kv): whether it compresses
 * at all, whether (with its default settings) it runs one event over the whole cache once a sequence passes
 * baselines.budget_tokens (else: events over windows, kara.evict applies), and the keys of the slots its cache grows
 * past that budget before an event (slack) and of the newest slots it always keeps (tail); NULL where it has none.
 * KARA_ERR_ARG for an id no method is registered under (the ids run from 0 without gaps). */
typedef struct kara_kv_method_info {
    const char *name;
    bool compresses;
    bool at_budget;
    const char *slack_key;
    const char *tail_key;
    bool needs_prior; /* refused on a model without a retention prior (prior_recent) */
} kara_kv_method_info;
kara_status kara_kv_method_info_get(kara_kv_method m, kara_kv_method_info *out);
const char *kara_kv_dtype_name(kara_kv_dtype t);
kara_status kara_kv_dtype_parse(const char *name, kara_kv_dtype *out);

/* ---- Context and the forward pass (guide and a complete example: docs/API.md, "A context and kara_decode") ------- */
/* Where a context runs its forward pass. KARA_DEVICE_CUDA needs a library built with the CUDA backend
 * (-DKARA_CUDA=ON) and an NVIDIA GPU; kara_context_create says which is missing (KARA_ERR_UNSUPPORTED). docs/CUDA.md. */
typedef enum kara_device { KARA_DEVICE_CPU = 0, KARA_DEVICE_CUDA = 1 } kara_device;
/* True when this library holds the backend for device (the CPU always; CUDA in a build made with -DKARA_CUDA=ON).
 * Says nothing about whether a GPU is present: kara_context_create finds that out. */
bool kara_device_built(kara_device device);
/* True when device can run a context here: built, and for CUDA at least one device answers (this starts the CUDA
 * driver, which takes a moment the first time). */
bool kara_device_available(kara_device device);
/* What a benchmark compares a device's speed with. name: the GPU's (or "cpu"); mem_bandwidth: peak memory bytes per
 * second from the memory clock and bus width (0 when unknown, always on the CPU); mem_bytes: its memory; n_sm: its
 * multiprocessors (0 on the CPU). */
typedef struct kara_device_props {
    char name[128];
    double mem_bandwidth;
    uint64_t mem_bytes;
    int32_t n_sm;
} kara_device_props;
/* The properties of the device a context of that kind uses (CUDA: device 0). KARA_ERR_UNSUPPORTED, naming the
 * reason, when the backend is not built or no device answers; *out zeroed then. */
kara_status kara_device_props_get(kara_device device, kara_device_props *out);

typedef struct kara_context_params {
    uint32_t size;      /* sizeof (kara_context_params_init) */
    int32_t n_ctx;      /* max positions per sequence; 0 (default) = the model's training context */
    int32_t n_batch;    /* max entries per kara_decode call (default 512) */
    int32_t n_seq_max;  /* max concurrent sequences (default 1) */
    int32_t n_threads;  /* 0 (default) or less = number of cores */
    kara_kv_params kv;  /* KV cache and compression (kara_kv_params_init) */
    kara_device device; /* KARA_DEVICE_CPU (default) or KARA_DEVICE_CUDA ("runtime.device") */
    /* The most entries per sequence of a generated batch (a speculative verify step) under the KV methods that sum
     * every step's attention (h2o, lazy, kara.score.reads_weight > 0), 1..KARA_MAX_DRAFT + 1 (default 1: no drafts
     * there). Each entry's attention is kept apart until the entries taken back are known: n_seq_max x n_head x
     * (max slots) floats of scratch per entry, reserved at creation outside the KV budget, like the batch's
     * activations. The tools set it to draft_max + 1 when they speculate. */
    int32_t verify_max;
} kara_context_params;
/* As kara_kv_params_set (KARA_ERR_CONFIG, *p unchanged), for the context's keys too. */
kara_status kara_context_params_set(kara_context_params *p, const char *key, const char *value);
void kara_context_params_init(kara_context_params *p);

/* Reserve everything the context will ever use (KV memory, scratch); the model must outlive it. KARA_ERR_ARG (bad
 * params, a vocab-only model), KARA_ERR_CONFIG or KARA_ERR_UNSUPPORTED (KV settings), KARA_ERR_KV_BUDGET (kv.budget
 * below the method's reservation plus one block), KARA_ERR_NOMEM. */
kara_status kara_context_create(kara_model *model, const kara_context_params *p, kara_context **out);
void kara_context_free(kara_context *ctx);
const kara_model *kara_context_model(const kara_context *ctx);
int32_t kara_context_n_ctx(const kara_context *ctx);
int32_t kara_context_n_batch(const kara_context *ctx); /* most entries per kara_decode */
/* Whether KV compression can act in this context: a method other than full whose budget cannot hold every sequence
 * whole (eviction on demand). Then the policy scores generated tokens as they come, and kara_seq_truncate past a
 * prompt is refused, except for the entries of a generated batch (kara_seq_verify_room says where speculative
 * decoding can take drafted tokens back). */
bool kara_context_kv_compressing(const kara_context *ctx);
/* The most entries a generated batch (kara_batch.generated) of seq may have now: where KV compression can act, short
 * of the next window's scoring, of the threshold methods' event over the whole cache and of an eviction, so that
 * nothing happens inside it that the entries taken back would leave behind; 1 where only a single token may go now
 * (also on a device under compression), 0 where the KV method cannot take entries back (h2o, lazy and read tracking
 * with verify_max 1). At most n_batch, and at most verify_max under h2o, lazy and read tracking, whose batches also
 * stay short of read tracking's next window start. */
int32_t kara_seq_verify_room(const kara_context *ctx, int32_t seq);

/* A batch of entries, possibly from several sequences: entry i feeds token tokens[i] at position pos[i] of sequence
 * seq_id[i]; logits[i] != 0 asks for its logits. Positions of one sequence must continue where it left off. */
typedef struct kara_batch {
    int32_t n_tokens;
    const int32_t *tokens;
    const int32_t *pos;    /* NULL = each entry at its sequence's next position */
    const int32_t *seq_id; /* NULL = every entry in sequence 0 */
    const int8_t *logits;  /* NULL = logits for the last entry only */
    int32_t seq_all;       /* with seq_id NULL: the sequence of every entry (default 0) */
    int32_t pos_first;     /* with pos NULL and pos_first > 0: entry i at position pos_first + i (0 = as for NULL) */
    /* The entries continue each sequence's generation (a speculative verify step: a chosen token and drafts after
     * it): the KV policy counts them as generated tokens, not the next turn of a chat, and kara_seq_truncate may take
     * them back under compression until the sequence's next decode. At most kara_seq_verify_room entries per
     * sequence (KARA_ERR_ARG otherwise). */
    bool generated;
    /* Per entry instead (NULL: generated applies to every entry): the entries of one sequence must agree. A batch
     * engine's step mixes one request's verify entries with other requests' prompt chunks. */
    const int8_t *generated_entries;
} kara_batch;
/* A batch of n tokens of one sequence at positions pos0.. with logits for the last one only. It holds no arrays of
 * its own (seq_all and pos_first describe the entries), so it is thread-safe and has no size limit; it points at
 * tokens, which must stay valid until kara_decode returns. */
kara_batch kara_batch_one_sequence(const int32_t *tokens, int32_t n, int32_t pos0, int32_t seq_id);

/* Run the forward pass over a batch, then the KV events that are due. KARA_OK; KARA_ERR_ARG (a NULL or empty batch,
 * more than n_batch entries, a bad sequence id, a position before the sequence's next); KARA_ERR_TOKEN (an id
 * outside the vocabulary); KARA_ERR_CONTEXT_FULL (a position at or past n_ctx); KARA_ERR_KV_BUDGET (a sequence
 * cannot stay within its share, or the pool cannot hold the batch); KARA_ERR_INTERNAL. Every check runs first: on a
 * failure nothing is appended to any sequence and, with `full` or eviction on demand (the default), the context is
 * as before the call. Exceptions: under kv.on_pool_exhausted = recompress_history, per_window and threshold methods
 * may first take slots from other sequences (which stay valid); KARA_ERR_INTERNAL from a KV event after the forward
 * pass (a bug) leaves the batch appended. KARA_ERR_ABORTED (kara_context_set_abort): the batch is taken back out
 * (its blocks return to the pool) but what made room for it stays (on-demand evictions in a batch sequence's share, a
 * chat turn's window kept whole, the stopped pass's queries in a scoring ring); the same batch again gives exactly
 * what one uninterrupted call gives. */
kara_status kara_decode(kara_context *ctx, const kara_batch *batch);

/* Return true to stop a decode or a generation; called on the calling thread: keep it cheap (a flag, a deadline).
 * Asked between the layers of every kara_decode, which then stops within one layer with KARA_ERR_ABORTED as above (a
 * kara_engine step so stopped returns it, every request as it was). fn NULL removes it. */
typedef bool (*kara_abort_fn)(void *user);
void kara_context_set_abort(kara_context *ctx, kara_abort_fn fn, void *user);

/* Logits (n_vocab floats) of the i-th entry that asked for logits in the last kara_decode; i = -1 is the last such
 * entry. NULL if none. Owned by the context; valid until the next kara_decode. */
const float *kara_get_logits(kara_context *ctx, int32_t i);
kara_status kara_seq_clear(kara_context *ctx, int32_t seq_id); /* forget a sequence (-1: all); KARA_ERR_ARG: bad id */
/* Keep positions [0, n_keep): KARA_ERR_UNSUPPORTED (nothing changed) when KV compression touched what would stay. */
kara_status kara_seq_truncate(kara_context *ctx, int32_t seq_id, int32_t n_keep);
int32_t kara_seq_n_past(const kara_context *ctx, int32_t seq_id); /* its next position (fed so far); 0: bad id */
/* Prompt caching: a whole sequence (nothing compressed; with scoring on, saved right after its prompt) as bytes, with
 * the tokens it holds (n_tokens = kara_seq_n_past), and back into any sequence of a context of the same model and KV
 * type. save: KARA_ERR_UNSUPPORTED when not whole, KARA_ERR_BUFFER when size < kara_seq_state_size. load: KARA_ERR_FORMAT
 * (damaged, another model), KARA_ERR_KV_BUDGET, KARA_ERR_CONTEXT_FULL; on failure the sequence is unchanged. */
size_t kara_seq_state_size(const kara_context *ctx, int32_t seq_id);
kara_status kara_seq_state_save(const kara_context *ctx, int32_t seq_id, const int32_t *tokens, int32_t n_tokens,
                                void *buf, size_t size, size_t *written);
kara_status kara_seq_state_load(kara_context *ctx, int32_t seq_id, const void *buf, size_t size, int32_t *tokens,
                                int32_t max_tokens, int32_t *n_tokens);
/* A whole sequence copied into dst (cleared first). The whole blocks of src's prompt (all of src while it has not
 * generated) are shared, reference counted, under the methods that never evict a prompt slot (full, kara, chunkkv,
 * random, recent; snapkv, rkv and lazy with their prompt protected); the rest is copied. A sequence about to write
 * into a shared block takes its own copy first. Errors as save (src not whole: KARA_ERR_UNSUPPORTED) and load
 * (KARA_ERR_KV_BUDGET: the blocks copied do not fit); KARA_ERR_ARG for a bad id. */
kara_status kara_seq_copy(kara_context *ctx, int32_t src_seq, int32_t dst_seq);

typedef struct kara_kv_stats {  /* counters of the KV policy since the context was created */
    uint64_t events;            /* compression events, all methods */
    uint64_t forced_events;     /* events forced by pool pressure (on_pool_exhausted: recompress_history) */
    uint64_t recompress_events; /* history recompressions (on_pool_exhausted) */
    uint64_t slots_evicted;     /* slots dropped by all events */
    double event_seconds;       /* wall time spent in events */
    uint64_t pool_bytes;        /* the block pool */
    uint64_t reserved_bytes;    /* query rings and scoring scratch (0 when the policy never needs to score) */
    uint64_t cache_bytes, cache_bytes_peak; /* blocks in use: the cache alone, now and at its peak */
    int32_t blocks_total, blocks_free;
    int32_t seq_tokens; /* a sequence's share in slots (kv_cache.seq_tokens, resolved) */
    bool scoring;       /* the policy scores windows (false: it can never need to evict) */
} kara_kv_stats;
void kara_context_kv_stats(const kara_context *ctx, kara_kv_stats *out);

/* Admission control: can the KV budget hold a request of n_prompt tokens and n_predict new ones (-1: up to the
 * context size) on sequence seq, given what other sequences hold now? KARA_OK, or KARA_ERR_KV_BUDGET with a message
 * saying how many bytes it would need; KARA_ERR_CONTEXT_FULL (n_prompt > n_ctx); KARA_ERR_ARG. Reserves nothing. */
kara_status kara_seq_admit(kara_context *ctx, int32_t seq, int32_t n_prompt, int32_t n_predict);
int32_t kara_seq_n_cached(const kara_context *ctx, int32_t seq); /* slots held now (after compression, <= n_past) */
/* The original positions of the slots a sequence holds, in slot order (strictly increasing). Writes at most max and
 * returns the count held. With kara.selection_scope: per_layer each layer holds its own slots (as many in each):
 * kara_seq_positions gives layer 0's, kara_seq_layer_positions any layer's (0 for a bad layer or sequence). */
int32_t kara_seq_positions(const kara_context *ctx, int32_t seq, int32_t *out, int32_t max);
int32_t kara_seq_layer_positions(const kara_context *ctx, int32_t seq, int32_t layer, int32_t *out, int32_t max);

/* Bytes the context holds for KV: blocks in use plus the policy's query rings and scoring scratch (current and peak
 * since creation). Never more than the configured kv.budget. */
uint64_t kara_context_kv_bytes(const kara_context *ctx);
uint64_t kara_context_kv_bytes_peak(const kara_context *ctx);
uint64_t kara_context_mem_bytes(const kara_context *ctx); /* reserved at creation for everything (KV, scratch) */

/* ---- Sampling (guide: docs/API.md, section "Sampling") ----------------------------------------------------------- */
typedef struct kara_sampler kara_sampler; /* one thread at a time */
typedef struct kara_sampler_params {
    float temperature;     /* <= 0: greedy (argmax, ties to the lowest id) */
    int32_t top_k;         /* <= 0: off */
    float top_p;           /* >= 1: off */
    float min_p;           /* <= 0: off */
    float repeat_penalty;  /* 1: off */
    int32_t repeat_last_n; /* tokens the penalty looks back over */
    uint64_t seed;         /* fixed seed for reproducible sampling */
} kara_sampler_params;
/* Defaults as llama.cpp: temp 0.8, top-k 40, top-p 0.95, min-p 0.05, repeat penalty 1 (off) over 64, seed 0x4b415241 */
void kara_sampler_params_init(kara_sampler_params *p);
/* A sampler over n_vocab tokens (kara_model_n_vocab); everything it needs is allocated here. KARA_ERR_ARG for
 * repeat_last_n < 0, repeat_penalty <= 0, top_p <= 0, min_p > 1, a NaN temperature or n_vocab < 1; KARA_ERR_NOMEM. */
kara_status kara_sampler_create(const kara_sampler_params *p, int32_t n_vocab, kara_sampler **out);
void kara_sampler_free(kara_sampler *s);
/* Pick a token from n_vocab logits (not modified) into *token and record it in the history for the repetition
 * penalty. Allocates nothing. KARA_ERR_ARG for a NULL argument; KARA_ERR_FORMAT when a logit is NaN or infinite (a
 * damaged model: the token is not picked). */
kara_status kara_sampler_sample(kara_sampler *s, const float *logits, int32_t *token);
void kara_sampler_accept(kara_sampler *s, int32_t token); /* record a token unsampled (e.g. a prompt's) */
void kara_sampler_reset(kara_sampler *s);                 /* empty the history, restart draws from the seed */

/* ---- Configuration (guide and a complete example: docs/API.md, section "Configuration") -------------------------- */
/* Everything one job needs, as read from YAML (every key, its type and range: configs/README.md), set by
 * command-line flags, or filled by hand. Every setting has a dotted key ("sampling.temperature"); the YAML loader,
 * kara_config_set and kara_config_format check and render values by one table of keys, types and ranges. Sizes take
 * units B, KB, KiB, MB, MiB, GB, GiB (case-insensitive; KB = 1000 bytes, KiB = 1024); a bare number is bytes. */
#define KARA_CONFIG_PATH_MAX 1024  /* bytes of a path, NUL included */
#define KARA_CONFIG_NAME_MAX 64    /* bytes of a preset/template name */
#define KARA_CONFIG_MAX_KEYS 96    /* room for every key of the schema */
#define KARA_CONFIG_ORIGIN_MAX 160 /* bytes of one origin text */
/* Speculative decoding: drafted tokens are checked by the model in one batched step; the text is what plain decoding
 * gives (greedy: the same tokens; sampled: the same draws from the same seed), only faster when drafts are right.
 * Under KV compression only where drafted tokens can be taken back (kara_seq_verify_room). */
typedef enum kara_spec_mode {
    KARA_SPEC_NONE = 0,
    KARA_SPEC_NGRAM = 1, /* the tokens after the latest earlier occurrence of the sequence's last 2-4 tokens */
    KARA_SPEC_DRAFT = 2  /* a smaller model with the same vocabulary, greedy, in a context of its own */
} kara_spec_mode;
/* A verify step of up to 15 entries stays below every weight type's panel-GEMM size (16 rows for Q8_0), where the
 * kernels give each row the bits of a one-row product. */
#define KARA_MAX_DRAFT 14
typedef enum kara_think_mode {
    KARA_THINK_AUTO = 0, /* what the chat template does by default */
    KARA_THINK_ON = 1,
    KARA_THINK_OFF = 2
} kara_think_mode;
typedef struct kara_config {
    /* model: */
    char model_path[KARA_CONFIG_PATH_MAX]; /* model.path: GGUF file ("" = none given) */
    char preset[KARA_CONFIG_NAME_MAX];     /* model.preset: name of a preset ("" = none) */
    bool use_mmap;                         /* model.mmap: map the file (kara_model_params.use_mmap) */
    /* runtime.threads -> context.n_threads; context.size -> n_ctx; context.batch -> n_batch; batch.max_concurrency
     * -> n_seq_max; kv_cache, kara and baselines -> context.kv */
    kara_context_params context;
    kara_sampler_params sampling; /* sampling.* except max_tokens */
    int32_t max_tokens;           /* sampling.max_tokens: -1 = until end of generation */
    /* chat: */
    char chat_template[KARA_CONFIG_NAME_MAX]; /* chat.template: "auto" = from the GGUF metadata */
    kara_think_mode think;                    /* chat.think: auto | on | off */
    int32_t reasoning_budget;                 /* chat.reasoning_budget: thinking tokens; -1 unlimited, 0 none */
    kara_spec_mode spec;                      /* speculative.mode: none | ngram | draft */
    int32_t draft_max;                        /* speculative.draft_max: 1..KARA_MAX_DRAFT */
    char draft_model[KARA_CONFIG_PATH_MAX];   /* speculative.draft_model: GGUF of the draft model (mode draft) */
    float draft_p_min;                        /* speculative.draft_p_min: drafting stops below this probability */
    char batch_input[KARA_CONFIG_PATH_MAX];   /* batch.input: requests (JSONL) */
    char batch_output[KARA_CONFIG_PATH_MAX];  /* batch.output: results (JSONL) */
    bool batch_resume;                        /* batch.resume: skip custom_ids already in output */
    bool batch_ordered;                       /* batch.ordered: results in input order */
    int32_t batch_on_changed;                 /* batch.on_changed: 0 rerun, 1 refuse, 2 keep (--on-changed) */
    int32_t shard_index;                      /* batch.shard "K/N": shard_index = K-1 (0-based) */
    int32_t shard_count;                      /*   = N; takes input line L (from 1) if (L-1) % N == K-1 */
    /* where each value came from, indexed like kara_config_key(i): "default", "FILE:LINE:COL" or a set origin */
    char origin[KARA_CONFIG_MAX_KEYS][KARA_CONFIG_ORIGIN_MAX];
} kara_config;

/* Defaults of every key (as the *_params_init functions set them); every origin becomes "default". */
void kara_config_init(kara_config *c);
/* Apply a YAML file on top of *c (keys it names override; a later file wins). All or nothing: on failure *c is
 * unchanged. KARA_ERR_IO when the file cannot be read; KARA_ERR_CONFIG for invalid YAML, unknown or duplicate keys,
 * wrong types, bad units, unknown names and out-of-range values, with kara_last_error() = "FILE:LINE:COL: key:
 * problem" (line and column 1-based); KARA_ERR_ARG for NULL arguments; KARA_ERR_NOMEM. */
kara_status kara_config_load(kara_config *c, const char *path);
/* The same from text in memory (the same codes, KARA_ERR_IO aside); name stands for the file in messages and origins.
 * len < 0: NUL-terminated. */
kara_status kara_config_load_text(kara_config *c, const char *text, long len, const char *name);

/* Set one key from text, checked like the YAML value (lists as "1,2,3" or "[1, 2, 3]"). origin is recorded (e.g.
 * "--temp"; NULL = "api") and starts the error message: "--temp: sampling.temperature: expected a number, got
 * 'hot'". KARA_ERR_CONFIG for an unknown key or a bad value (*c unchanged), KARA_ERR_ARG for NULL arguments. */
kara_status kara_config_set(kara_config *c, const char *key, const char *value, const char *origin);
/* A key's value as text kara_config_set accepts (unquoted). KARA_ERR_CONFIG: unknown key; KARA_ERR_BUFFER: small buf */
kara_status kara_config_get(const kara_config *c, const char *key, char *buf, size_t size);
/* Where a key's value came from (see kara_config.origin); NULL for an unknown key. Points into *c. */
const char *kara_config_origin(const kara_config *c, const char *key);
const char *kara_config_key(int i); /* the i-th key of the schema ("model.path", ...), NULL past the last */
/* How the i-th key is listed (kara config keys): its type, the values it takes and a one-line help (the details are in
 * configs/README.md); its default is kara_config_get of a kara_config_init'ed config. KARA_ERR_ARG past the last. */
typedef struct kara_config_key_info {
    const char *key;
    const char *type; /* integer, number, size, bool, name, string, list, layers, shard, u64 */
    const char *help;
    char bounds[256]; /* "1..4096", "0..1048576 or auto", "mean | max", "up to 1023 bytes" */
} kara_config_key_info;
kara_status kara_config_key_info_get(int i, kara_config_key_info *out);
/* The resolved configuration as YAML, a key per line with a "# origin" comment (it loads back to the same values);
 * snprintf-like: at most size bytes with the NUL, returns the whole length (>= size: cut). */
size_t kara_config_format(const kara_config *c, char *buf, size_t size);

/* ---- Chat templates (guide and a complete example: docs/API.md, section "Chat templates and thinking") ----------- */
/* role "system", "user", "assistant" ("tool" where known). An assistant message may hold its thinking as written
 * ("<think>...</think>answer"); templates that drop earlier thinking from the history (qwen3, deepseek-r1) do so. */
typedef struct kara_chat_message {
    const char *role;
    const char *content;
} kara_chat_message;
/* The template families implemented in C (no Jinja engine). */
typedef enum kara_chat_family {
    KARA_CHAT_CHATML = 0,  /* "<|im_start|>role\n...<|im_end|>\n", nothing else */
    KARA_CHAT_QWEN3,       /* ChatML + Qwen3's thinking rules (enable_thinking) */
    KARA_CHAT_DEEPSEEK_R1, /* DeepSeek-R1-Distill: "<｜User｜>...<｜Assistant｜>", pre-fills "<think>\n" */
    KARA_CHAT_LLAMA3,      /* Llama 3: header blocks ending in <|eot_id|>, contents trimmed */
    KARA_CHAT_LLAMA31      /* Llama 3.1/3.2: Llama 3 plus the "Cutting Knowledge Date" system block */
} kara_chat_family;
typedef struct kara_chat_template {
    kara_chat_family family;
    bool prefill_think;       /* the generation prompt opens "<think>\n": deepseek-r1; qwen3 when its template does */
    char date[32];            /* llama3.1 "Today Date:": "26 Jul 2024", or today if the template calls strftime_now */
    char default_system[256]; /* chatml: the system message it inserts when there is none (Qwen2/2.5); "" none */
} kara_chat_template;
/* "chatml", "qwen3", "deepseek-r1", "llama3", "llama3.1"; "?" out of range. */
const char *kara_chat_family_name(kara_chat_family family);
/* The template of a family by name (names above); KARA_ERR_ARG, with a message listing the names, for others. */
kara_status kara_chat_template_by_name(const char *name, kara_chat_template *out);
/* Recognise a Jinja chat template (GGUF tokenizer.chat_template) by its markers: "<｜Assistant｜>" or "<｜User｜>" ->
 * deepseek-r1; "<|start_header_id|>" -> llama3 (llama3.1 with "Cutting Knowledge Date"); "<|im_start|>" -> qwen3
 * when it mentions <think> or enable_thinking, else chatml (with the default system message it inserts, if any).
 * Returns false (and chatml in *out) when nothing matches. Never logs. */
bool kara_chat_template_detect(const char *jinja, kara_chat_template *out);
/* The template to use with a model: name NULL, "" or "auto" means detect from the model's tokenizer.chat_template;
 * a template that is absent or not recognised falls back to chatml with a warning through the library log (never
 * stdout). Any other name as kara_chat_template_by_name (KARA_ERR_ARG); KARA_ERR_NOMEM. */
kara_status kara_chat_template_from_model(const kara_model *model, const char *name, kara_chat_template *out);

/* Render messages as the family's official template does, followed by the assistant generation prompt when
 * add_generation_prompt. enable_thinking false gives qwen3 its empty "<think>\n\n</think>\n\n" block; for templates
 * that pre-fill "<think>\n" it closes that block the same way (they have no such switch); chatml and llama3 ignore
 * it. Writes at most size bytes (NUL included) and sets *len to the length of the whole text, like snprintf: *len >=
 * size means buf was too small. KARA_ERR_ARG for NULL messages, roles or contents. Thread-safe. The text carries its
 * special tokens (BOS where the template has one): tokenize it with add_special false and parse_special true. */
kara_status kara_chat_apply(const kara_chat_template *tmpl, const kara_chat_message *msgs, size_t n_msgs,
                            bool add_generation_prompt, bool enable_thinking, char *buf, size_t size, size_t *len);
/* The same with named flags: KARA_CHAT_ADD_GENERATION_PROMPT | KARA_CHAT_ENABLE_THINKING, or 0. Other bits are
 * KARA_ERR_ARG. */
enum { KARA_CHAT_ADD_GENERATION_PROMPT = 1u << 0, KARA_CHAT_ENABLE_THINKING = 1u << 1 };
kara_status kara_chat_apply_ex(const kara_chat_template *tmpl, const kara_chat_message *msgs, size_t n_msgs,
                               uint32_t flags, char *buf, size_t size, size_t *len);

/* ---- Generation (guide and a complete example: docs/API.md, section "Generation") -------------------------------- */
/* Where a byte of generated text belongs. */
typedef enum kara_channel { KARA_CHANNEL_ANSWER = 0, KARA_CHANNEL_THINK = 1 } kara_channel;
/* A run of output of one channel: text is not NUL-terminated, valid until the next kara_generator_next/start/free */
typedef struct kara_piece {
    const char *text;
    int32_t len; /* > 0 */
    kara_channel channel;
    int32_t token; /* the latest token sampled when the run was released; -1 at the final flush */
} kara_piece;
#define KARA_MAX_STOP_STRINGS 8
/* Where a piece of output starts. */
typedef enum kara_think_start {
    KARA_THINK_START_AUTO = 0, /* inside thinking when the prompt ends with "<think>" + white space */
    KARA_THINK_START_ANSWER,
    KARA_THINK_START_THINK
} kara_think_start;

typedef struct kara_generator_params {
    uint32_t size;                           /* sizeof (kara_generator_params_init) */
    kara_sampler_params sampling;            /* kara_sampler_params_init defaults */
    int32_t max_tokens;                      /* tokens per start; -1 = until end of generation or a full context */
    int32_t reasoning_budget;                /* thinking tokens before "</think>" is forced; -1 = unlimited */
    bool split_thinking;                     /* true: think tags removed, their content KARA_CHANNEL_THINK */
    kara_think_start think_start;            /* AUTO */
    bool ignore_eog;                         /* keep going past end-of-generation tokens (tests, benchmarks) */
    int32_t n_stop;                          /* stop strings, matched on the output text (tags removed) */
    const char *stop[KARA_MAX_STOP_STRINGS]; /* copied at create; each 1..255 bytes */
    kara_abort_fn abort;                     /* optional */
    void *abort_user;
    kara_spec_mode spec; /* speculative decoding (docs/SPECULATIVE.md): NONE, NGRAM (drafts from its own text), or
                          * DRAFT (drafts from the model of draft_ctx) */
    int32_t draft_max;   /* most tokens drafted per step, 1..KARA_MAX_DRAFT */
    /* spec DRAFT: a context over a model with the same vocabulary (every token's text equal), full KV (not
     * compressing), given to this generator alone: it uses its sequence 0 and clears it at create. Not owned. */
    kara_context *draft_ctx;
    float draft_p_min; /* spec DRAFT: a draft stops at a token the draft model gives less than this probability */
} kara_generator_params;

typedef struct kara_generator kara_generator; /* it and its context: one thread at a time */
/* Why the last kara_generator_next returned KARA_DONE or KARA_STOPPED. */
typedef enum kara_stop_reason {
    KARA_STOP_NONE = 0,     /* still generating */
    KARA_STOP_EOG,          /* an end-of-generation token (not part of the output) */
    KARA_STOP_MAX_TOKENS,   /* max_tokens reached */
    KARA_STOP_CONTEXT_FULL, /* the sequence filled the context */
    KARA_STOP_STRING,       /* a stop string (not part of the output) */
    KARA_STOP_ABORT         /* the abort callback returned true */
} kara_stop_reason;
/* Defaults: sampler defaults, max_tokens -1, reasoning_budget -1, split_thinking true (false: raw text, all
 * KARA_CHANNEL_ANSWER), think_start AUTO, ignore_eog false, no stop strings, no abort, spec NONE, draft_max 8,
 * draft_ctx NULL, draft_p_min 0.75. */
void kara_generator_params_init(kara_generator_params *p);

/* A generator over one context (which it does not own; free the generator first). Allocates everything it will use:
 * the sampler, output buffers sized for the vocabulary's longest token and the stop strings, and the token history
 * (n_ctx entries). KARA_ERR_ARG for bad params (spec DRAFT: no draft_ctx, the generator's own context, a compressing
 * one, or a different vocabulary, the first differing token named), KARA_ERR_NOMEM. */
kara_status kara_generator_create(kara_context *ctx, const kara_generator_params *p, kara_generator **out);
void kara_generator_free(kara_generator *gen);
/* Change the abort callback, the reasoning budget or max_tokens (-1: no limit) between turns. */
void kara_generator_set_abort(kara_generator *gen, kara_abort_fn fn, void *user);
void kara_generator_set_reasoning_budget(kara_generator *gen, int32_t budget);
void kara_generator_set_max_tokens(kara_generator *gen, int32_t max_tokens);
/* Feed a prompt to sequence seq_id in chunks of n_batch and get ready to generate. If the tokens this generator last
 * left in that sequence are a prefix of the prompt, only the rest is decoded; otherwise the sequence is cleared
 * first. The prompt joins the sampler's repetition history; its random state carries on (the same prompt again gets
 * a new draw). Before any work: KARA_ERR_CONTEXT_FULL (prompt longer than the context), KARA_ERR_ARG (n < 1,
 * seq_id < 0), KARA_ERR_TOKEN. Later: KARA_ERR_ABORTED (abort callback) or a decode error, the sequence cleared. */
kara_status kara_generator_start(kara_generator *gen, int32_t seq_id, const int32_t *tokens, int32_t n);
/* The sequence holds these tokens (after kara_seq_state_load): a start whose prompt begins with them reuses them.
 * KARA_ERR_ARG: a bad id, or n other than the positions the sequence holds (kara_seq_n_past). */
kara_status kara_generator_adopt(kara_generator *gen, int32_t seq_id, const int32_t *tokens, int32_t n);

/* The next piece of output. KARA_OK: *out holds a piece. KARA_DONE: end of generation, max_tokens or a full context.
 * KARA_STOPPED: a stop string (its text withheld) or the abort callback. Text that could still become a tag or a stop
 * string is held back until it cannot, and released before DONE/STOPPED. Negative: a decode error, or KARA_ERR_ARG
 * before a successful start. After DONE/STOPPED each call returns the same until the next start. Allocates nothing. */
kara_status kara_generator_next(kara_generator *gen, kara_piece *out);
kara_stop_reason kara_generator_stop_reason(const kara_generator *gen);

/* Counters of the current (or last) start. */
typedef struct kara_generator_stats {
    int32_t n_prompt;         /* prompt tokens given */
    int32_t n_prompt_decoded; /* of which decoded (the rest were already in the sequence) */
    int32_t n_generated;      /* tokens sampled or forced */
    int32_t n_think;          /* of which sampled inside thinking (what the budget counts) */
    int32_t n_forced;         /* tokens forced to close thinking at the budget */
    double t_prompt_s;        /* seconds decoding the prompt */
    double t_generate_s;      /* seconds in kara_generator_next */
    bool spec_on;             /* speculative decoding ran (asked for, and the context allows it) */
    int32_t n_verify;         /* decode steps that carried drafted tokens */
    int32_t n_drafted;        /* tokens drafted */
    int32_t n_accepted;       /* of which the model chose (the acceptance rate is n_accepted / n_drafted) */
    double t_draft_s;         /* of t_generate_s: seconds the draft model took (spec DRAFT) */
} kara_generator_stats;
void kara_generator_get_stats(const kara_generator *gen, kara_generator_stats *out);

/* ---- Batch engine (guide and a complete example: docs/API.md, section "The batch engine") ------------------------ */
/* Continuous batching over one context: requests join and leave between steps; one step is one kara_decode of the
 * next token of every running request plus at most prefill_chunk prompt tokens of new arrivals. A request's output
 * does not depend on the requests beside it, their order, or whether it was preempted (except with
 * kv.on_pool_exhausted = recompress_history). The engine owns the context while it lives (it clears every sequence
 * at create). kara_engine_create allocates everything; a step allocates nothing. One thread drives an engine. */
typedef struct kara_engine kara_engine;
typedef struct kara_engine_params {
    uint32_t size;             /* sizeof (kara_engine_params_init) */
    int32_t max_queue;         /* requests waiting for admission (64) */
    int32_t prefill_chunk;     /* prompt tokens fed per step, all arrivals together (256, >= 2) */
    int32_t max_repeat_last_n; /* largest sampling.repeat_last_n a request may use (256) */
    bool optimistic_admission; /* admit on free blocks alone, ignoring what running requests may grow (false) */
    /* speculative decoding of every decoding request (docs/SPECULATIVE.md): NONE, NGRAM (drafts from the request's
     * own text) or DRAFT (drafts from the model of draft_ctx). Under KV compression too, within kara_seq_verify_room
     * (off where the room is 0: h2o, lazy and read tracking with the context's verify_max 1; stats.spec_on false). */
    kara_spec_mode spec;
    int32_t draft_max; /* most tokens drafted per request and step, 1..KARA_MAX_DRAFT (8) */
    /* spec DRAFT: a context over a model with the same vocabulary (every token's text equal), full KV (not
     * compressing), n_seq_max at least ctx's: request slot i drafts in its sequence i. The engine clears all its
     * sequences at create and uses it alone while it lives. Not owned. */
    kara_context *draft_ctx;
    float
        draft_p_min; /* spec DRAFT: a draft stops at a token the draft model gives less than this probability (0.75) */
} kara_engine_params;
void kara_engine_params_init(kara_engine_params *p);

typedef struct kara_engine_request {
    uint64_t id;           /* returned in events; seeds the sampler with sampling.seed */
    void *user;            /* returned in events */
    const int32_t *prompt; /* caller's memory, valid until the request's DONE event */
    int32_t n_prompt;      /* 1 .. n_ctx - 1 */
    int32_t max_tokens;    /* -1: until end of generation or n_ctx positions */
    kara_sampler_params sampling;
    int32_t reasoning_budget;     /* thinking tokens before "</think>" is forced; -1 unlimited */
    bool split_thinking;          /* true: thinking comes as KARA_CHANNEL_THINK, tags removed */
    kara_think_start think_start; /* AUTO: inside thinking when the prompt ends with "<think>" */
    bool ignore_eog;              /* keep going past end-of-generation tokens (benchmarks) */
    int32_t n_stop;               /* stop strings, 1..255 bytes, caller's memory until DONE */
    const char *stop[KARA_MAX_STOP_STRINGS];
} kara_engine_request;
/* Defaults: id 0, no user, prompt or stop strings, sampler defaults, max_tokens -1, reasoning_budget -1 (split). */
void kara_engine_request_init(kara_engine_request *r);

typedef enum kara_engine_event_kind {
    KARA_ENGINE_TEXT = 0, /* a run of output text of one channel */
    KARA_ENGINE_DONE = 1  /* the request ended; it produces no more events */
} kara_engine_event_kind;
typedef struct kara_engine_event {
    kara_engine_event_kind kind;
    uint64_t id;
    void *user;
    /* TEXT: valid until the next kara_engine_step; not NUL-terminated */
    kara_channel channel;
    const char *text;
    int32_t len;
    /* DONE: */
    kara_status status;      /* KARA_DONE, KARA_STOPPED (stop string), or the error that ended it */
    kara_stop_reason reason; /* EOG, MAX_TOKENS, CONTEXT_FULL (n_ctx positions), STRING */
    const char *error;       /* status < 0: what went wrong; valid until the next step */
    int32_t n_prompt, n_generated, n_think;
    int32_t n_preempted; /* times the request was preempted and recomputed */
} kara_engine_event;
typedef struct kara_engine_stats {
    uint64_t steps;             /* decodes run */
    uint64_t tokens_generated;  /* output tokens (sampled or forced) */
    uint64_t tokens_prefilled;  /* prompt tokens decoded the first time */
    uint64_t tokens_recomputed; /* tokens decoded again after preemptions */
    uint64_t preemptions;
    uint64_t requests_done, requests_failed;
    int32_t running, preempted, queued; /* now */
    int32_t peak_running;
    uint64_t kv_events, kv_forced_events, kv_recompress_events; /* kara_context_kv_stats */
    uint64_t kv_bytes, kv_bytes_peak; /* kara_context_kv_bytes(_peak): cache plus reservation */
    uint64_t kv_cache_bytes_peak;     /* the cache alone at its peak (blocks in use) */
    uint64_t kv_reserved_bytes;       /* query rings and scoring scratch, reserved at creation */
    uint64_t kv_slots_evicted;        /* slots dropped by the KV policy */
    int32_t kv_seq_tokens;            /* a sequence's share in slots */
    uint64_t kv_budget;               /* kv.budget, or what the context sized itself to when 0 */
    int32_t kv_blocks_total, kv_blocks_free;
    double decode_seconds; /* inside kara_decode */
    double step_seconds;   /* inside kara_engine_step */
    bool spec_on;          /* speculative decoding runs (asked for, and the context allows it) */
    uint64_t n_verify;     /* request-steps that carried drafted tokens */
    uint64_t n_drafted;    /* tokens drafted */
    uint64_t n_accepted;   /* of which the model chose */
    double draft_seconds;  /* spec DRAFT: inside the draft context's kara_decode */
} kara_engine_stats;

/* An engine over ctx, whose n_seq_max is the most requests that run at once and whose n_batch must be at least
 * n_seq_max + 2. ctx must outlive the engine. KARA_ERR_ARG for bad params, KARA_ERR_NOMEM. */
kara_status kara_engine_create(kara_context *ctx, const kara_engine_params *p, kara_engine **out);
void kara_engine_free(kara_engine *eng);

/* Queue a request (copied; its prompt and stop strings are read until its DONE event). Fails at once, queueing
 * nothing, when it can never run: KARA_ERR_ARG (empty prompt, bad sampling or stop strings, queue full),
 * KARA_ERR_TOKEN, KARA_ERR_CONTEXT_FULL (prompt of n_ctx tokens or more), KARA_ERR_KV_BUDGET (its peak does not fit
 * the whole pool; the message says how many bytes it needs). */
kara_status kara_engine_submit(kara_engine *eng, const kara_engine_request *r);
int32_t kara_engine_queue_room(const kara_engine *eng); /* requests that can still be queued */

/* Admit what fits and run one decode. KARA_OK: work was done or events are ready; KARA_DONE: nothing is queued or
 * running and no event is left; KARA_ERR_ARG: eng is NULL. A decode that fails ends the requests it fed with that
 * error (their DONE events); the engine carries on. Events of the previous step that were not read are dropped. */
kara_status kara_engine_step(kara_engine *eng);
/* The last step's events, one per call, in slot order: a request's text runs, then its DONE; false when no more. */
bool kara_engine_next_event(kara_engine *eng, kara_engine_event *out);
void kara_engine_get_stats(const kara_engine *eng, kara_engine_stats *out);
uint64_t kara_engine_seed(uint64_t seed, uint64_t id); /* the seed request id's sampler starts from */

/* The most sequences (<= p->n_seq_max) a context with params p runs at once, each with n_prompt prompt tokens and
 * n_predict new ones (-1: up to n_ctx): the budget holds the per-sequence reservations (query rings) and peak
 * footprints of that many (more only shrinks the pool). 0 when not even one fits; p->n_seq_max when kv.budget is 0. */
int32_t kara_engine_fit_concurrency(const kara_model *model, const kara_context_params *p, int32_t n_prompt,
                                    int32_t n_predict);

#ifdef __cplusplus
}
#endif
#endif /* KARA_H */
