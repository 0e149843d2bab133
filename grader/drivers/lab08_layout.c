/* lab08_layout.c - where each parameter of a rank sits: its coordinates in the grid, its
 * stage's layers, and the offsets and kinds of its flat buffer (threed.h, td_stage). Pure
 * functions of the configuration: the referee lays out inputs and expectations with
 * them, the player points the stage's views with them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lab08.h"

const char *l8_group_name(int group) {
    static const char *const names[L8_NGROUPS] = {"tensor", "pipeline", "data", "embedding", "world", "other"};
    return group >= 0 && group < L8_NGROUPS ? names[group] : "?";
}

void l8_coords(int rank, int t, int d, int *tp, int *dp, int *pp) {
    *tp = rank % t;
    *dp = (rank / t) % d;
    *pp = rank / (t * d);
}

int l8_rank_of(int tp, int dp, int pp, int t, int d) { return tp + t * (dp + d * pp); }

int l8_stage_layers(int L, int p, int s, int *first) {
    int base = L / p, extra = L % p;
    *first = s * base + (s < extra ? s : extra);
    return base + (s < extra ? 1 : 0);
}

static void add_seg(l8_layout *lay, size_t offset, size_t count, td_seg_kind kind) {
    if (lay->nseg > 0) { /* neighbours of one kind merge into one segment */
        td_segment *last = &lay->seg[lay->nseg - 1];
        if (last->kind == kind && last->offset + last->count == offset) {
            last->count += count;
            return;
        }
    }
    lay->seg[lay->nseg++] = (td_segment){offset, count, kind};
}

void l8_layout_make(l8_layout *lay, const td_config *c, int world, int rank) {
    memset(lay, 0, sizeof *lay);
    lay->t = c->t, lay->p = c->p, lay->d = world / (c->t * c->p);
    l8_coords(rank, lay->t, lay->d, &lay->tp, &lay->dp, &lay->pp);
    lay->nlayers = l8_stage_layers(c->layers, c->p, lay->pp, &lay->first_layer);
    lay->first = lay->pp == 0;
    lay->last = lay->pp == c->p - 1;
    lay->block = (gpt_config){.seq = c->seq, .batch = c->batch, .hidden = c->hidden, .heads = c->heads, .ffn = c->ffn};
    size_t C = (size_t)c->hidden, Vt = (size_t)c->vocab / (size_t)c->t, off = 0;
    lay->block_count = gpt_tp_block_count(&lay->block, c->t);
    lay->seg = calloc((size_t)lay->nlayers * GPT_BLOCK_NTENSORS + 8, sizeof *lay->seg);
    PL_CHECK(lay->seg != NULL, "out of host memory");
    if (lay->first) {
        lay->off_wte = off, add_seg(lay, off, Vt * C, TD_SHARDED), off += Vt * C;
        lay->off_wpe = off, add_seg(lay, off, (size_t)c->seq * C, TD_REPLICATED), off += (size_t)c->seq * C;
    }
    lay->off_blocks = off;
    for (int l = 0; l < lay->nlayers; l++)
        for (int i = 0; i < GPT_BLOCK_NTENSORS; i++) {
            gpt_tp_shard sh = gpt_tp_block_shard(&lay->block, i, c->t, lay->tp);
            add_seg(lay, off + sh.offset, (size_t)(sh.rows * sh.cols), sh.replicated ? TD_REPLICATED : TD_SHARDED);
            if (i == GPT_BLOCK_NTENSORS - 1) off += lay->block_count;
        }
    if (lay->last) {
        lay->off_lnf = off, add_seg(lay, off, 2 * C, TD_REPLICATED), off += 2 * C;
        if (c->p > 1) lay->off_wte_copy = off, add_seg(lay, off, Vt * C, TD_TIED_COPY), off += Vt * C;
    }
    lay->used = off;
    lay->count = (off + (size_t)lay->d - 1) / (size_t)lay->d * (size_t)lay->d;
}

void l8_layout_free(l8_layout *lay) {
    free(lay->seg);
    lay->seg = NULL;
    lay->nseg = 0;
}
