/* model_prior.c - the optional retention prior of a GGUF file
 * (docs/KARA_METHOD.md section 14; written by tools/train/retention_prior.py):
 * four F32 tensors kara_prior.{w1,b1,w2,b2} and the keys kara.prior.layer and
 * kara.prior.features. A file with none of them has no prior; one with some
 * must have all, of the right type and shape, or it is refused. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "model.h"
#include "status.h"

enum { GGUF_TYPE_F32 = 0 };

static const char *const tensor_names[] = {"kara_prior.w1", "kara_prior.b1", "kara_prior.w2", "kara_prior.b2"};
static const char *const key_names[] = {"kara.prior.layer", "kara.prior.features"};

/* Does the file carry any part of a prior? */
static bool any_part(const kara_gguf *g) {
    for (size_t i = 0; i < sizeof tensor_names / sizeof tensor_names[0]; i++)
        if (kara_gguf_find_tensor(g, tensor_names[i])) return true;
    for (size_t i = 0; i < sizeof key_names / sizeof key_names[0]; i++)
        if (kara_gguf_find(g, key_names[i])) return true;
    return false;
}

/* Tensor `name`: F32, shape exactly [ne0, ne1] (ne1 = 0 for a vector), every
 * value finite. */
static kara_status prior_tensor(const kara_model *m, const char *path, const char *name, int64_t ne0, int64_t ne1,
                                const float **out) {
    const kara_gguf_tensor *t = kara_gguf_find_tensor(m->gguf, name);
    if (!t)
        return kr_set_error(KARA_ERR_FORMAT,
                            "%s: the retention prior is incomplete: tensor '%s' is missing (a prior needs "
                            "kara_prior.w1, b1, w2, b2 and the keys kara.prior.layer and kara.prior.features)",
                            path, name);
    if (t->type != GGUF_TYPE_F32)
        return kr_set_error(KARA_ERR_FORMAT, "%s: tensor '%s' of the retention prior has type %s, expected F32", path,
                            name, kara_gguf_type_name(t->type));
    uint32_t dims = ne1 ? 2 : 1;
    bool ok = t->ne[0] == ne0 && t->ne[1] == (ne1 ? ne1 : 1) && t->ne[2] == 1 && t->ne[3] == 1 && t->n_dims <= dims;
    if (!ok)
        return kr_set_error(KARA_ERR_FORMAT,
                            "%s: tensor '%s' of the retention prior has shape [%lld, %lld, %lld, %lld], expected "
                            "[%lld, %lld]",
                            path, name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                            (long long)t->ne[3], (long long)ne0, (long long)(ne1 ? ne1 : 1));
    const float *v = t->data;
    for (int64_t i = 0; i < ne0 * (ne1 ? ne1 : 1); i++)
        if (!isfinite(v[i]))
            return kr_set_error(KARA_ERR_FORMAT,
                                "%s: tensor '%s' of the retention prior has a value that is not finite", path, name);
    *out = v;
    return KARA_OK;
}

kara_status kr_model_load_prior(kara_model *m, const char *path) {
    memset(&m->prior, 0, sizeof m->prior);
    if (!any_part(m->gguf)) return KARA_OK;
    const kr_hparams *hp = &m->hp;
    kr_prior p;
    memset(&p, 0, sizeof p);

    uint64_t layer;
    if (!kara_gguf_find(m->gguf, "kara.prior.layer"))
        return kr_set_error(KARA_ERR_FORMAT, "%s: the retention prior is incomplete: key 'kara.prior.layer' is missing",
                            path);
    if (!kara_gguf_get_u64(m->gguf, "kara.prior.layer", &layer) || layer >= (uint64_t)hp->n_layer)
        return kr_set_error(KARA_ERR_FORMAT, "%s: key 'kara.prior.layer' must be a layer in [0, %d)", path,
                            hp->n_layer);
    p.layer = (int32_t)layer;
    kara_gguf_str feat;
    if (!kara_gguf_get_str(m->gguf, "kara.prior.features", &feat))
        return kr_set_error(KARA_ERR_FORMAT,
                            "%s: the retention prior needs the string key 'kara.prior.features' (\"v\" or \"v+kpair\")",
                            path);
    if (kara_gguf_str_eq(feat, "v+kpair"))
        p.key_pairs = true;
    else if (!kara_gguf_str_eq(feat, "v"))
        return kr_set_error(KARA_ERR_FORMAT, "%s: key 'kara.prior.features' is '%.*s', expected \"v\" or \"v+kpair\"",
                            path, (int)(feat.len > 32 ? 32 : feat.len), feat.ptr);

    p.n_in = hp->n_head_kv * hp->head_dim + (p.key_pairs ? hp->n_head_kv * (hp->rope_dim / 2) : 0);
    const kara_gguf_tensor *w1 = kara_gguf_find_tensor(m->gguf, "kara_prior.w1");
    p.n_hidden = w1 && w1->ne[1] >= 1 && w1->ne[1] <= 65536 ? (int32_t)w1->ne[1] : 1;
    kara_status st;
    if ((st = prior_tensor(m, path, "kara_prior.w1", p.n_in, p.n_hidden, &p.w1))) {
        if (w1 && w1->type == GGUF_TYPE_F32 && w1->ne[0] != p.n_in)
            kr_set_error(KARA_ERR_FORMAT,
                         "%s: tensor 'kara_prior.w1' of the retention prior has %lld inputs, but layer %d's cache "
                         "rows give %d (%s: %d KV heads x %d%s)",
                         path, (long long)w1->ne[0], p.layer, p.n_in, p.key_pairs ? "v+kpair" : "v", hp->n_head_kv,
                         hp->head_dim, p.key_pairs ? " values and as many x rope_dim / 2 key-pair norms" : " values");
        return st;
    }
    if ((st = prior_tensor(m, path, "kara_prior.b1", p.n_hidden, 0, &p.b1))) return st;
    if ((st = prior_tensor(m, path, "kara_prior.w2", p.n_hidden, 0, &p.w2))) return st;
    if ((st = prior_tensor(m, path, "kara_prior.b2", 1, 0, &p.b2))) return st;
    p.present = true;
    m->prior = p;
    return KARA_OK;
}
