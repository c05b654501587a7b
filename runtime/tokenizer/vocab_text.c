/*
 * vocab_text.c - from text to ids and back: the tokenize entry point (special
 * tokens first, then the SPM or BPE tokenizer per fragment), token-to-piece,
 * detokenize, and the per-call scratch buffers.
 */
#include "vocab_impl.h"

#include <stdlib.h>
#include <string.h>

#include "unicode.h"

/* ------------------------------------------------------------------------ */
/* Queries                                                                   */
/* ------------------------------------------------------------------------ */

static bool valid_token(const kr_vocab *v, int32_t token) { return v->impl && token >= 0 && token < v->n_tokens; }

bool kr_vocab_is_eog(const kr_vocab *v, int32_t token) {
    return valid_token(v, token) && (v->impl->attrs[token] & KR_TOKEN_ATTR_EOG);
}

kr_token_type kr_vocab_token_type(const kr_vocab *v, int32_t token) {
    return valid_token(v, token) ? (kr_token_type)v->impl->types[token] : KR_TOKEN_UNDEFINED;
}

kara_gguf_str kr_vocab_token_text(const kr_vocab *v, int32_t token) {
    kara_gguf_str s = {"", 0};
    if (valid_token(v, token)) {
        s.ptr = v->impl->strs[token].ptr;
        s.len = v->impl->strs[token].len;
    }
    return s;
}

int32_t kr_vocab_find(const kr_vocab *v, const char *text, size_t len) {
    if (!v->impl) return -1;
    int32_t id = kr_vocab_sym_find(v->impl, text, len);
    return id < v->n_tokens ? id : -1;
}

/* ------------------------------------------------------------------------ */
/* Token to piece                                                            */
/* ------------------------------------------------------------------------ */

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* "<0xXX>" -> the byte, -1 if the text is not of that form. */
static int byte_of_token_text(kr_strref s) {
    if (s.len != 6 || memcmp(s.ptr, "<0x", 3) != 0 || s.ptr[5] != '>') return -1;
    int hi = hex_digit(s.ptr[3]), lo = hex_digit(s.ptr[4]);
    return (hi < 0 || lo < 0) ? -1 : hi * 16 + lo;
}

static int32_t copy_out(char *buf, int32_t size, const char *src, size_t n) {
    if (n > (size_t)INT32_MAX) return 0;
    if ((int32_t)n > size) return -(int32_t)n;
    if (n) memcpy(buf, src, n);
    return (int32_t)n;
}

/* SPM text with each U+2581 as a space. */
static int32_t spm_piece(kr_strref s, char *buf, int32_t size) {
    size_t n = 0;
    for (size_t i = 0; i < s.len; i++) {
        if (i + 2 < s.len && (uint8_t)s.ptr[i] == 0xE2 && (uint8_t)s.ptr[i + 1] == 0x96 &&
            (uint8_t)s.ptr[i + 2] == 0x81)
            i += 2;
        n++;
    }
    if (n > (size_t)size) return -(int32_t)n;
    size_t o = 0;
    for (size_t i = 0; i < s.len; i++) {
        if (i + 2 < s.len && (uint8_t)s.ptr[i] == 0xE2 && (uint8_t)s.ptr[i + 1] == 0x96 &&
            (uint8_t)s.ptr[i + 2] == 0x81) {
            buf[o++] = ' ';
            i += 2;
        } else {
            buf[o++] = s.ptr[i];
        }
    }
    return (int32_t)o;
}

/* Byte-level BPE text back to bytes. A character outside GPT-2's byte
 * alphabet is kept as its UTF-8 (llama.cpp prints an "[UNK_BYTE_..." marker
 * there). */
static int32_t bpe_piece(kr_strref s, char *buf, int32_t size) {
    const uint8_t *p = (const uint8_t *)s.ptr;
    size_t n = 0;
    for (size_t i = 0; i < s.len;) {
        size_t k;
        uint32_t c = kr_utf8_decode(p + i, s.len - i, &k);
        n += kr_bpe_cpt_to_byte(c) >= 0 ? 1 : k;
        i += k;
    }
    if (n > (size_t)size) return -(int32_t)n;
    size_t o = 0;
    for (size_t i = 0; i < s.len;) {
        size_t k;
        uint32_t c = kr_utf8_decode(p + i, s.len - i, &k);
        int b = kr_bpe_cpt_to_byte(c);
        if (b >= 0) {
            buf[o++] = (char)b;
        } else {
            memcpy(buf + o, p + i, k);
            o += k;
        }
        i += k;
    }
    return (int32_t)o;
}

int32_t kr_vocab_token_to_piece(const kr_vocab *v, int32_t token, char *buf, int32_t size, bool special) {
    if (!valid_token(v, token)) return 0;
    if (size < 0) size = 0;
    kr_strref s = v->impl->strs[token];
    switch ((kr_token_type)v->impl->types[token]) {
    case KR_TOKEN_CONTROL:
    case KR_TOKEN_UNKNOWN: return special ? copy_out(buf, size, s.ptr, s.len) : 0;
    case KR_TOKEN_USER_DEFINED: return copy_out(buf, size, s.ptr, s.len);
    case KR_TOKEN_NORMAL: return v->kind == KR_VOCAB_SPM ? spm_piece(s, buf, size) : bpe_piece(s, buf, size);
    case KR_TOKEN_BYTE: {
        int b = byte_of_token_text(s);
        if (b < 0) return 0;
        char c = (char)b;
        return copy_out(buf, size, &c, 1);
    }
    default: /* unused and undefined tokens print nothing, as in llama.cpp */ return 0;
    }
}

int32_t kr_vocab_detokenize(const kr_vocab *v, const int32_t *tokens, int32_t n_tokens, char *buf, int32_t size,
                            bool special) {
    if (size < 0) size = 0;
    int64_t total = 0;
    bool strip = v->add_space_prefix;
    for (int32_t i = 0; i < n_tokens; i++) {
        int32_t len = -kr_vocab_token_to_piece(v, tokens[i], buf, 0, special); /* size 0: just measure */
        if (len <= 0) continue;
        if (strip) { /* drop the space the SPM rules added in front of the text */
            strip = false;
            char small[256];
            char *piece = len <= (int32_t)sizeof small ? small : malloc((size_t)len);
            if (!piece) return INT32_MIN;
            kr_vocab_token_to_piece(v, tokens[i], piece, len, special);
            int32_t skip = piece[0] == ' ' ? 1 : 0;
            if (len > skip && total + len - skip <= size) memcpy(buf + total, piece + skip, (size_t)(len - skip));
            total += len - skip;
            if (piece != small) free(piece);
            continue;
        }
        if (total + len <= size) kr_vocab_token_to_piece(v, tokens[i], buf + total, len, special);
        total += len;
    }
    if (total > INT32_MAX) return INT32_MIN;
    return total > size ? -(int32_t)total : (int32_t)total;
}

/* ------------------------------------------------------------------------ */
/* Tokenize                                                                  */
/* ------------------------------------------------------------------------ */

bool kr_work_reserve(void **p, size_t *cap, size_t n, size_t elem) {
    if (n <= *cap) return true;
    size_t want = *cap ? *cap : 64;
    while (want < n) {
        if (want > SIZE_MAX / 2 / elem) return false;
        want *= 2;
    }
    void *q = realloc(*p, want * elem);
    if (!q) return false;
    *p = q;
    *cap = want;
    return true;
}

void kr_work_free(kr_tok_work *w) {
    free(w->frags);
    free(w->frags2);
    free(w->found);
    free(w->text);
    free(w->text2);
    free(w->cpts);
    free(w->ends);
    free(w->tmp);
    free(w->cls);
    free(w->syms);
    free(w->heap);
    memset(w, 0, sizeof *w);
}

/* SPM: the fragment with spaces escaped to U+2581, after a U+2581 prefix
 * when the vocabulary adds one (at the start and after special tokens). */
static kara_status spm_fragment(const kr_vocab *v, kr_tok_work *w, const char *text, size_t len, bool prefix,
                                kr_tok_out *out) {
    if (len > (SIZE_MAX - 3) / 3 || !kr_work_reserve((void **)&w->text, &w->cap_text, 3 * len + 3, 1))
        return KARA_ERR_NOMEM;
    size_t n = 0;
    if (prefix) {
        memcpy(w->text, "\xe2\x96\x81", 3);
        n = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(w->text + n, "\xe2\x96\x81", 3);
            n += 3;
        } else {
            w->text[n++] = text[i];
        }
    }
    return kr_spm_tokenize(v, w, w->text, n, out);
}

int32_t kr_vocab_tokenize(const kr_vocab *v, const char *text, size_t len, int32_t *tokens, int32_t max_tokens,
                          bool add_special, bool parse_special) {
    if (v->kind == KR_VOCAB_NONE || !v->impl || (len && !text)) return INT32_MIN;
    kr_tok_out out = {tokens, max_tokens > 0 && tokens ? max_tokens : 0, 0};
    kr_tok_work w;
    memset(&w, 0, sizeof w);
    size_t n_frags = 0;
    kara_status st = kr_vocab_partition(v, &w, text, len, parse_special, &n_frags);

    if (!st && add_special && v->add_bos) kr_tok_emit(&out, v->bos);
    bool prev_special = true; /* SPM: prefix a space at the start and after special tokens */
    for (size_t i = 0; !st && i < n_frags; i++) {
        const kr_fragment *f = &w.frags[i];
        if (f->token >= 0) {
            kr_tok_emit(&out, f->token);
            prev_special = true;
            continue;
        }
        if (v->kind == KR_VOCAB_SPM) {
            st = spm_fragment(v, &w, text + f->off, f->len, v->add_space_prefix && prev_special, &out);
        } else {
            st = kr_bpe_tokenize(v, &w, text + f->off, f->len, &out);
        }
        prev_special = false;
    }
    if (!st && add_special && v->add_eos) kr_tok_emit(&out, v->eos);
    kr_work_free(&w);

    if (st || out.n > INT32_MAX) return INT32_MIN;
    return out.n > out.max ? -(int32_t)out.n : (int32_t)out.n;
}
