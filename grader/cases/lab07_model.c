/* lab07_model.c - Lab 7's model in units and tensors, for both halves: the referee describes
 * it to make inputs and check layouts, the player to hand the student a zero_model and to
 * run the kit's compute; the initial weights come from gpt.h's counter RNG (the referee's
 * inputs, and the modes' own). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab07.h"

gpt_config l7_gpt(const l7_flags *f, int batch) {
    return (gpt_config){.seq = f->seq, .batch = batch, .hidden = f->hidden, .heads = f->heads, .ffn = f->ffn,
                        .vocab = f->vocab, .max_pos = f->seq};
}

/* Unit u of a model with `layers` blocks: which gpt part and layer it is. */
static gpt_part part_of(int u, int layers, int *layer) {
    *layer = u >= 1 && u <= layers ? u - 1 : 0;
    return u == 0 ? GPT_PART_EMBED : u == layers + 1 ? GPT_PART_HEAD : GPT_PART_BLOCK;
}

void l7_describe(l7_model *m, const gpt_config *mc, int layers) {
    memset(m, 0, sizeof *m);
    m->nunits = layers + 2;
    PL_CHECK(m->nunits <= L7_MAX_UNITS, "too many layers for ZERO_MAX_UNITS");
    for (int u = 0; u < m->nunits; u++) {
        int layer;
        gpt_part part = part_of(u, layers, &layer);
        l7_unit *un = &m->unit[u];
        un->first = m->ntensors;
        un->count = gpt_part_ntensors(part);
        for (int i = 0; i < un->count; i++) {
            gpt_tensor_info ti = gpt_tensor(mc, part, i, layer);
            l7_tensor *t = &m->tensor[m->ntensors++];
            if (part == GPT_PART_BLOCK) snprintf(t->name, sizeof t->name, "h%d.%s", layer, ti.name);
            else snprintf(t->name, sizeof t->name, "%s", ti.name);
            t->unit = u;
            /* a vector (1 x n in gpt.h) is split on its n elements, as torch.chunk splits a [n] */
            t->dim0 = ti.rows == 1 ? (size_t)ti.cols : (size_t)ti.rows;
            t->row = ti.rows == 1 ? 1 : (size_t)ti.cols;
            t->numel = t->dim0 * t->row;
            t->offset = ti.offset;
        }
        un->numel = gpt_part_count(mc, part);
        m->numel += un->numel;
    }
}

l7_cfg l7_config(const l7_flags *f, l7_variant v) {
    const l7_variant_info *vi = &L7_VARIANTS[v];
    return (l7_cfg){.stage = vi->stage, .reshard = vi->reshard, .param = vi->param, .reduce = vi->reduce,
                    .cap = (size_t)f->cap, .lr = (float)f->lr, .beta1 = L7_BETA1, .beta2 = L7_BETA2,
                    .eps = (float)f->eps, .wd = (float)f->wd, .max_norm = (float)f->max_norm};
}

float *l7_init_unit(const l7_model *m, const gpt_config *mc, uint64_t seed, int u) {
    int layers = m->nunits - 2, layer;
    gpt_part part = part_of(u, layers, &layer);
    float *h = malloc((m->unit[u].numel + 1) * sizeof *h);
    PL_CHECK(h != NULL, "out of host memory");
    for (int i = 0; i < gpt_part_ntensors(part); i++) {
        gpt_tensor_info ti = gpt_tensor(mc, part, i, layer);
        pl_rng_fill_host(h + ti.offset, ti.rows, ti.cols, ti.cols, 0, 0, seed, ti.rng_id, ti.dist, ti.lo, ti.hi);
    }
    return h;
}

size_t l7_unit_at(const l7_model *m, int u) {
    size_t at = 0;
    for (int k = 0; k < u && k < m->nunits; k++) at += m->unit[k].numel;
    return at;
}
