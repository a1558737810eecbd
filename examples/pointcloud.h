/*
 * pointcloud.h — a point-cloud regression with two edge-MLP attention layers (seed 000's GAT with a
 * learned edge score, tg_edge_attention) on a radius graph; bench/pointcloud_torch.py is the same
 * model in PyTorch.
 *
 * Data (all from the seed; tg_init_fill's Philox streams, so every runtime sees the same numbers):
 *   p   [N, 3]  points uniform in the unit cube [0, 1)^3 (f32)
 *   r          cutoff with N (4/3) pi r^3 = degree (expected neighbours, borders ignored; the mean
 *               degree is a little lower: about 5.8 at N 512 for degree 7)
 *   graph       tg_relation_radius(p, r): i <- j for j != i with |p_j - p_i|^2 <= r^2, no self loops
 *   x   [N, f_in] features, standard normal, independent of p (f_in 8)
 *   target [N, 3]: a Gaussian-kernel average of the first three features over the neighbours,
 *         t_i = sum_{j -> i} w_ij x_j[0:3],  w_ij = softmax_j(-kappa |p_j - p_i|^2 / r^2), kappa 4
 *       (computed in double on the host; 0 for a point without neighbours). It depends on the
 *       neighbourhood geometry only through the weights, so a model must learn the score from the
 *       displacement to fit it; it is an exact function of the inputs, so the loss floor is 0.
 * Two models (cfg.model); in both the score networks have hidden width cfg.hidden (64): W1 [3 + 2 d_l,
 * hidden], b1, W2 [hidden, H], b2.
 *
 * PC_MODEL_WIDE (the default, `--model wide`; the benchmarked model since session 11; H = 4, lr 5e-3):
 * node features widened to d = 64 by value and skip projections, ELU between layers:
 *   q = p / r                                               geometry in units of the cutoff
 *   layer l = 1, 2 on h (h_0 = x, width d_0 = f_in, d_1 = d):
 *     v    = h Wv_l                                          [N, H, F]
 *     a    = tg_edge_attention(graph, q, q, h, h, -, v, W1_l [3 + 2 d_l, d], b1_l, W2_l [d, H], b2_l)
 *     h'   = ELU(a [N, d] + h Ws_l + bs_l)                   (the skip carries the node's own h)
 *   y = h_2 Wo + bo  [N, 3];  loss = mean((y - target)^2)
 *
 * PC_MODEL_SEED (`--model seed`; seed 000's layer: the score MLP's softmax averages the source's own
 * features, out_i = sum_{j -> i} softmax_j(s) x_j; H = 1 by default, the seed's scalar score; lr 2e-2):
 *   q = p / r
 *   h_1 = tg_edge_attention(graph, q, q, x, x, -, x viewed [N, H, f_in / H], W1_1, b1_1, W2_1, b2_1)
 *   h_2 = tg_edge_attention(graph, q, q, h_1, h_1, -, h_1 viewed likewise, W1_2, b1_2, W2_2, b2_2)
 *   y = [h_1 | h_2] Wo + bo  [N, 3] (Wo [2 f_in, 3]);  loss = mean((y - target)^2)
 *   The node features stay f_in wide ([N, 8]): the per-edge score network is the whole cost. A first
 *   layer whose score is -kappa |dq|^2 + const and Wo picking h_1's first three columns fit the
 *   target exactly.
 *
 * Gradients reach p (input with requires-grad), x (likewise) and every weight; Adam (PyTorch's).
 * freeze_score: W1, b1, W2, b2 of both layers stay at their initial values (recorded as inputs
 * without gradient each step, so Adam never sees them); the rest trains.
 * The data stay resident: parameters the model never reads hold positions, features and target (no
 * gradient reaches them, so Adam leaves them alone), exported once (tg_tape_export_dlpack, on the
 * device on a CUDA runtime) and handed to each step as borrowed inputs — no per-step upload.
 * dtype bf16 (CUDA): the weights and Adam stay f32; the attention op runs on bf16 copies of its
 * inputs (positions f32) and its output is cast back to f32; everything else is f32.
 *
 * Functions that can fail return 0, else -1 with a message in err (PC_ERR bytes).
 */
#ifndef POINTCLOUD_H
#define POINTCLOUD_H

#include <stddef.h>
#include <stdint.h>

#include "tiga.h"

#define PC_ERR 1024

enum { PC_MODEL_SEED, PC_MODEL_WIDE };
typedef struct pc_config {
  int model;               /* PC_MODEL_WIDE (default) or PC_MODEL_SEED */
  int64_t n;               /* points */
  double degree;           /* expected neighbours, sets the cutoff (7) */
  int f_in, hidden, heads; /* heads: divides f_in (seed) or hidden (wide) */
  double kappa;            /* kernel sharpness of the target (4) */
  double lr;               /* Adam (5e-3; train_pointcloud uses 2e-2 for the seed model) */
  int freeze_score;        /* keep W1, b1, W2, b2 at init */
  int recompute;           /* the attention layers' opts.recompute_products (CUDA_FUSED: less memory) */
  tg_provider attention;   /* provider of the tg_edge_attention nodes (AUTO: the tape's) */
  tg_dtype dtype;          /* F32, or BF16 (the attention op only; CUDA) */
  uint64_t seed;           /* data and weights */
  int profile;             /* nonzero: drain the device between phases, add times to phase_s */
} pc_config;
void pc_config_default(pc_config *c);

typedef struct pc_data {
  int64_t n, f_in, edges;
  double cutoff;
  float *pos;    /* [n, 3] */
  float *x;      /* [n, f_in] */
  float *target; /* [n, 3] */
  tg_relation *graph;
} pc_data;

/* Points, graph (on rt), features and target of cfg. */
int pc_data_init(pc_data *d, tg_runtime *rt, const pc_config *cfg, char *err);
void pc_data_free(pc_data *d);

/* PC_WV, PC_WS, PC_BS: the wide model's only (TG_NO_ID and shape 0 in the seed model) */
enum { PC_W1, PC_B1, PC_W2, PC_B2, PC_WV, PC_WS, PC_BS, PC_PER_LAYER };
#define PC_PARAMS (2 * PC_PER_LAYER + 2) /* two layers, then Wo, bo */

typedef struct pc_model {
  pc_config cfg;
  const pc_data *data;
  tg_runtime *rt;
  tg_tape *tape;
  tg_id param[PC_PARAMS];   /* parameter ids; TG_NO_ID for a frozen score weight */
  float *frozen[PC_PARAMS]; /* host values of the frozen score weights (NULL otherwise) */
  int64_t shape[PC_PARAMS][2];
  tg_id pos, x; /* this step's position and feature inputs (after pc_train_step) */
  /* positions, features, target kept resident where the runtime computes (see pc_model_init) */
  struct DLManagedTensor *store[3];
  const void *store_ptr[3];
  tg_memory store_mem;
  int store_dev;
  uint64_t steps;
  double phase_s[3]; /* cfg.profile: forward, backward, Adam */
} pc_model;

int pc_model_init(pc_model *m, tg_runtime *rt, const pc_config *cfg, const pc_data *d, char *err);
void pc_model_free(pc_model *m);
/* Records the forward on m->tape (reset by the caller) and returns the scalar loss. */
tg_id pc_loss(pc_model *m);
/* Reset, forward, backward, Adam; *loss (may be NULL) receives the loss before the update. */
int pc_train_step(pc_model *m, double *loss, char *err);
/* L2 norms of the last step's gradients of the positions and of the features (after a step). */
int pc_input_grad_norms(pc_model *m, double *pos_norm, double *x_norm, char *err);
#endif
