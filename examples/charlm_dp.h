/*
 * charlm_dp — data-parallel training for train_charlm (`--gpus N`): one process per GPU.
 *
 * Launch: `train_charlm --gpus N ...` (no --rank) forks N copies of itself with `--rank r`
 * appended (device r), waits for them and exits with the first failure's code (stopping the other
 * ranks). Rank 0 prints as a single-GPU run does; rank r > 0 writes its stdout to <out>/rank<r>.log.
 * Rendezvous: rank 0 makes the NCCL id and writes <out>/comm_id (atomically); the other ranks wait
 * for that file (the launcher removes a stale one first).
 * Training: --batch is per GPU; the global batch is N x --batch. Every rank builds the same model
 * (same --seed), rank 0's parameters are broadcast, the gradients are averaged over the ranks
 * after each backward (tg_comm, buckets overlapping the backward), and every rank takes the same
 * AdamW step. Rank 0 alone evaluates, logs, checkpoints and samples.
 * Seed rules: rank 0 uses exactly the single-GPU streams (--seed for initialisation, data batches
 * and dropout), so `--gpus 1` is the single-GPU run; rank r > 0 draws its batches and dropout masks
 * from charlm_dp_seed(seed, r), a different stream per rank (initialisation is overwritten by rank
 * 0's broadcast). A resumed run: every rank loads the checkpoint; rank r > 0 derives its data
 * stream from the checkpoint's with charlm_dp_seed as well.
 */
#ifndef CHARLM_DP_H
#define CHARLM_DP_H

#include <stdint.h>

#include "charlm.h"

/* The seed of rank r's data and dropout streams (r = 0: seed itself). Never 0. */
uint64_t charlm_dp_seed(uint64_t seed, int rank);

/* The launcher: runs `gpus` copies of this program (/proc/self/exe) with argv plus "--rank r",
 * after creating `out` and removing <out>/comm_id; returns their exit code (0 when all succeed). */
int charlm_dp_launch(int argc, char **argv, int gpus, const char *out);

/* A rank's communicator on rt: rank 0 creates the id and writes <out>/comm_id, the others read it
 * (waiting up to timeout_s); then tg_comm_create, tg_comm_broadcast_parameters and tg_comm_attach
 * on the model's tape. Sets m->comm. 0, or -1 with err. */
int charlm_dp_join(charlm_model *m, int gpus, int rank, const char *out, double timeout_s, char *err);
/* Destroys m->comm (NULL: nothing). */
void charlm_dp_leave(charlm_model *m);

#endif
