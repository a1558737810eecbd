/*
 * gat.h — the GAT of Veličković et al. (2018) on Cora, on the tiga tape: the graph half's end-to-end
 * proof. Mirrors PyG's examples/gat.py (bench/gat_torch.py runs it with the same protocol).
 *
 * Model (N = 2708 nodes, F = 1433 features, 7 classes; heads-major columns, h * C + c):
 *   x     row-normalised bag of words: x[i, f] = 1 / deg_i on node i's active features. Never dense:
 *         the bipartite relation bow (nodes x features) holds the active pairs, and x W is the mean
 *         of W's rows over i's features, i.e. an attention over bow with equal scores:
 *         x W = gat_attention(bow, 0, 0, W)  (softmax of equal scores = 1 / deg_i, LeakyReLU(0) = 0);
 *         input dropout (p 0.6) is that attention's dropout of pairs (m / keep, the denominator
 *         counting every pair), which is PyG's dropout of the dense x restricted to its nonzeros
 *         (zeros stay zero). One node, nothing of size E_bow x 64 in either direction.
 *   layer 1  z = x W1 [N, 8, 8]; e_src = sum_c z a_src1, e_dst = sum_c z a_dst1 [N, 8];
 *            o = gat_attention(graph, e_dst, e_src, z) (LeakyReLU 0.2, attention dropout 0.6);
 *            h = ELU(o [N, 64] + b1); dropout 0.6
 *   layer 2  the same with W2 [64, 7], one head, + b2 -> logits [N, 7]
 *   loss     cross-entropy over the 140 training nodes (the others carry ignore_index)
 * graph: Cora's 5278 undirected edges in both directions plus a self loop per node (GATConv's
 * add_self_loops), as a CSR relation. Adam lr 0.005, weight decay 5e-4 (coupled L2, every
 * parameter). Initialisation: PyG's glorot for W and a, zeros for b.
 *
 * Functions that can fail return 0, else -1 with a message in err (GAT_ERR bytes).
 */
#ifndef GAT_H
#define GAT_H

#include <stddef.h>
#include <stdint.h>

#include "tiga.h"

#define GAT_ERR 1024

/* ------------------------------------------------------------ data */
enum { GAT_TRAIN = 0, GAT_VAL = 1, GAT_TEST = 2, GAT_UNUSED = 3 };

typedef struct gat_data {
  int64_t n, n_feat, n_class;
  int32_t *label; /* [n] */
  uint8_t *split; /* [n]: GAT_TRAIN / GAT_VAL / GAT_TEST / GAT_UNUSED */
  int64_t count[4];
  /* bag of words, destination-major CSR (node -> its active features, ascending) */
  int64_t *feat_ptr; /* [n + 1] */
  int32_t *feat_idx; /* [feat_ptr[n]] */
  /* the graph with self loops, destination-major CSR (node i -> its sources j, ascending) */
  int64_t *adj_ptr; /* [n + 1] */
  int32_t *adj_idx; /* [adj_ptr[n]] */
} gat_data;

/* Reads <dir>/cora.nodes and <dir>/cora.edges (format: examples/data/cora/README.md). */
int gat_data_load(gat_data *d, const char *dir, char *err);
void gat_data_free(gat_data *d);

/* ------------------------------------------------------------ model */
typedef struct gat_config {
  int heads1, hidden1;      /* 8 heads x 8 features */
  double in_drop, hid_drop; /* dropout probabilities of the input pairs and of the hidden layer */
  double attn_drop;         /* attention dropout probability */
  double slope;             /* LeakyReLU slope of the scores (0.2) */
  double lr, weight_decay;  /* Adam */
  tg_provider attention;    /* provider of the two tg_gat_attention nodes (AUTO: the runtime's) */
  tg_dtype dtype;           /* f32 (f64 on a host runtime for exactness tests) */
  uint64_t seed;            /* initial weights and dropout masks */
  int profile;              /* nonzero: gat_train_step drains the device between phases and adds
                             their times to gat_model.phase_s (forward, backward, Adam) */
} gat_config;
/* The paper's / PyG's configuration. */
void gat_config_default(gat_config *c);

typedef struct gat_model {
  gat_config cfg;
  const gat_data *data;
  tg_runtime *rt; /* the runtime of the tape (which holds the reference) */
  tg_tape *tape;
  tg_relation *graph, *bow;
  tg_id w1, a_src1, a_dst1, b1, w2, a_src2, a_dst2, b2; /* parameters, in this order */
  void *zeros;                                          /* [max(n, n_feat)] zeros in cfg.dtype */
  int32_t *target[3];                                   /* [n]: the label on the split's nodes, -1 elsewhere */
  uint64_t steps;                                       /* training steps taken */
  double phase_s[3];                                    /* cfg.profile: seconds in forward, backward, Adam */
  double host_s[3];    /* cfg.profile: of those, seconds until the phase's calls returned (host side) */
  size_t nodes;        /* cfg.profile: nodes recorded by the last training step */
  uint64_t prof_steps; /* cfg.profile: steps in phase_s / host_s (those after GAT_PROFILE_WARMUP) */
} gat_model;

/* A model on runtime rt (its tape holds a reference to rt); weights initialised from cfg->seed. */
int gat_model_init(gat_model *m, tg_runtime *rt, const gat_config *cfg, const gat_data *d, char *err);
void gat_model_free(gat_model *m);
/* The 8 parameter ids in the order above (w1 .. b2). */
void gat_model_params(const gat_model *m, tg_id ids[8]);

/* Records the forward on m->tape (reset first by the caller) and returns the logits [n, 7];
 * train: dropout on (masks from the tape's seed). */
tg_id gat_logits(gat_model *m, int train);
/* Steps left out of the profile: the first ones load kernels, pick cuBLASLt algorithms and grow
 * the arenas (milliseconds), which would dominate a mean over a few hundred steps. */
#define GAT_PROFILE_WARMUP 10

/* One training step: reset, forward with dropout, cross-entropy on the train nodes, backward, Adam.
 * *loss (may be NULL) receives the training loss. */
int gat_train_step(gat_model *m, double *loss, char *err);
/* Forward without dropout or grad; loss and accuracy of each split (arrays of 3, may be NULL). */
int gat_evaluate(gat_model *m, double loss[3], double acc[3], char *err);
#endif
