/* kv_policy_attn.c - the attention the methods that sum it collect each
 * step: H2O's accumulators, lazy's recurrence tracking and read tracking
 * (window methods with reads_weight), and how a speculative verify batch
 * keeps its entries' attention apart (docs/SPECULATIVE.md, "Under KV
 * compression").
 *
 * The forward pass sums, layer by layer, the probabilities each head's
 * query gives every slot into a row per head; after the pass the rows are
 * folded into the sequence's state. A verify batch brings several queries
 * of one sequence at once, each a step of plain decoding, and some of them
 * are taken back: each entry sums into a row of its own, the rows are
 * folded in their order (float sums depend on it), and the state before
 * the fold is saved, so that taking entries back restores it and folds the
 * kept rows again. */
#include <string.h>

#include "kv_policy.h"
#include "kv_method.h"
#include "kv_policy_impl.h"
#include "kv_select.h"

static bool keeps_rows(const kr_kv_policy *pol, const kr_kv_policy_seq *q) {
    return pol->verify_rows > 1 && q->generated;
}

int32_t kr_kv_policy_attn_rows(const kr_kv_policy *pol, int32_t seq, int32_t n_new) {
    if (n_new < 1) return 0;
    return keeps_rows(pol, &pol->seqs[seq]) ? n_new : 1;
}

static int32_t n_rows_max(const kr_kv_policy *pol) { return pol->verify_rows > 1 ? pol->verify_rows : 1; }

static float *row_at(const kr_kv_policy *pol, int32_t seq, int32_t row, int32_t head) {
    size_t at = ((size_t)seq * pol->n_head + (size_t)head) * pol->max_slots;
    if (row == 0) return pol->h2o_probs + at;
    return pol->verify_probs + (size_t)(row - 1) * pol->n_seq_max * pol->n_head * pol->max_slots + at;
}

float *kr_kv_policy_attn_row(kr_kv_policy *pol, int32_t seq, int32_t row, int32_t head) {
    if (!pol->h2o_probs || !pol->seqs[seq].prompt_marked || row < 0 || row >= n_rows_max(pol)) return NULL;
    return row_at(pol, seq, row, head);
}

/* For a method that observes the rows (its observe hook): the mean over
 * heads and layers of one step's attention, left in the row of head 0 (the
 * other heads' rows are zeroed). */
static float *mean_row(kr_kv_policy *pol, int32_t seq, int32_t row, int32_t n_slots) {
    float *mean = row_at(pol, seq, row, 0);
    for (int32_t h = 1; h < pol->n_head; h++) {
        float *r = row_at(pol, seq, row, h);
        kr_kv_h2o_accumulate(mean, r, n_slots);
        memset(r, 0, (size_t)n_slots * sizeof(float));
    }
    const float scale = 1.0f / ((float)pol->n_head * (float)pol->n_layer);
    for (int32_t j = 0; j < n_slots; j++) mean[j] *= scale;
    return mean;
}

/* One step's fold: the rows of `row` (for a method that observes them,
 * already their mean) into the sequence's state, the sequence then holding
 * n_slots slots. */
static void fold(kr_kv_policy *pol, int32_t seq, int32_t row, int32_t n_slots) {
    kr_kv_policy_seq *q = &pol->seqs[seq];
    if (q->slot_state) {
        pol->method->observe(&pol->p, q->slot_state, pol->max_slots, row_at(pol, seq, row, 0), n_slots, ++q->steps);
        return;
    }
    if (pol->h2o_max) {
        /* online_max: a slot keeps the largest probability a head gave it
         * from a query at least min_distance positions later; nearer reads
         * do not count (every slot is read by its neighbours) */
        const int32_t *pos = pol->kv->seqs[seq].pos;
        const int32_t last = pos[n_slots - 1] - kr_kv_tune(&pol->p)->min_distance;
        int32_t n = n_slots;
        while (n > 0 && pos[n - 1] > last) n--;
        for (int32_t h = 0; h < pol->n_head; h++) kr_kv_h2o_maximum(q->h2o_acc, row_at(pol, seq, row, h), n);
        return;
    }
    for (int32_t h = 0; h < pol->n_head; h++) kr_kv_h2o_accumulate(q->h2o_acc, row_at(pol, seq, row, h), n_slots);
}

static void zero_rows(kr_kv_policy *pol, int32_t seq, int32_t n_rows, int32_t n_slots) {
    for (int32_t r = 0; r < n_rows; r++)
        for (int32_t h = 0; h < pol->n_head; h++) memset(row_at(pol, seq, r, h), 0, (size_t)n_slots * sizeof(float));
}

/* What the folds of a batch change, as it is before them. */
static void save_state(kr_kv_policy *pol, kr_kv_policy_seq *q, int32_t n_slots) {
    if (q->slot_state) {
        for (int32_t a = 0; a < pol->n_slot_arrays; a++)
            memcpy((int32_t *)q->spec_save + (size_t)a * (size_t)pol->max_slots,
                   q->slot_state + (size_t)a * (size_t)pol->max_slots, (size_t)n_slots * sizeof(int32_t));
        q->spec_steps = q->steps;
    } else {
        memcpy(q->spec_save, q->h2o_acc, (size_t)n_slots * sizeof(float));
    }
}

static void restore_state(kr_kv_policy *pol, kr_kv_policy_seq *q, int32_t n_slots) {
    if (q->slot_state) {
        for (int32_t a = 0; a < pol->n_slot_arrays; a++)
            memcpy(q->slot_state + (size_t)a * (size_t)pol->max_slots,
                   (const int32_t *)q->spec_save + (size_t)a * (size_t)pol->max_slots,
                   (size_t)n_slots * sizeof(int32_t));
        q->steps = q->spec_steps;
    } else {
        memcpy(q->h2o_acc, q->spec_save, (size_t)n_slots * sizeof(float));
    }
}

void kr_kv_policy_after_pass(kr_kv_policy *pol, int32_t seq, int32_t n_rows, int32_t n_slots) {
    kr_kv_policy_seq *q = &pol->seqs[seq];
    if (!pol->h2o_probs || !q->prompt_marked || n_rows < 1) return;
    const bool keep = keeps_rows(pol, q);
    if (keep) {
        save_state(pol, q, n_slots);
        q->spec_rows = n_rows;
        q->spec_rows_end = n_slots;
    }
    for (int32_t r = 0; r < n_rows; r++) {
        int32_t n_r = n_slots - n_rows + 1 + r; /* the slots when this entry was the newest */
        if (q->slot_state) mean_row(pol, seq, r, n_r);
        fold(pol, seq, r, n_r);
    }
    if (!keep) zero_rows(pol, seq, n_rows, n_slots);
}

void kr_kv_policy_pass_discard(kr_kv_policy *pol, int32_t seq) {
    if (!pol->h2o_probs) return;
    zero_rows(pol, seq, n_rows_max(pol), pol->max_slots);
    pol->seqs[seq].spec_rows = 0;
}

/* Called by kr_kv_policy_spec_mark before a decode's appends: the rows the
 * last batch kept go back to zero for this one. */
void kr_kvp_attn_release(kr_kv_policy *pol, int32_t seq) {
    kr_kv_policy_seq *q = &pol->seqs[seq];
    if (q->spec_rows > 0) zero_rows(pol, seq, q->spec_rows, q->spec_rows_end);
    q->spec_rows = 0;
}

bool kr_kvp_attn_can_take_back(const kr_kv_policy *pol, int32_t seq) {
    return !pol->h2o_probs || pol->seqs[seq].spec_rows > 0;
}

/* Take back a verify batch's entries past its first n_kept: the state as
 * before the batch's folds, then the kept entries' rows folded again. */
void kr_kvp_attn_take_back(kr_kv_policy *pol, int32_t seq, int32_t n_kept) {
    kr_kv_policy_seq *q = &pol->seqs[seq];
    if (!pol->h2o_probs || q->spec_rows < 1) return;
    const int32_t first = q->spec_rows_end - q->spec_rows; /* slots before the batch */
    restore_state(pol, q, q->spec_rows_end);
    for (int32_t r = 0; r < n_kept && r < q->spec_rows; r++) fold(pol, seq, r, first + r + 1);
}
