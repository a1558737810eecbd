/* Data-parallel training for train_charlm (charlm_dp.h). */
#define _POSIX_C_SOURCE 200809L
#include "charlm_dp.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

uint64_t charlm_dp_seed(uint64_t seed, int rank) {
  if (rank == 0) return seed;
  uint64_t z = seed + 0x9e3779b97f4a7c15ull * (uint64_t)rank; /* splitmix64 of a rank offset */
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return z ? z : 1;
}

static void id_path(char *buf, size_t cap, const char *out) { snprintf(buf, cap, "%s/comm_id", out); }

int charlm_dp_launch(int argc, char **argv, int gpus, const char *out) {
  char path[4096];
  snprintf(path, sizeof path, "%s", out);
  for (char *p = path + 1;; p++) /* mkdir -p */
    if (*p == '/' || !*p) {
      char ch = *p;
      *p = 0;
      if (mkdir(path, 0777) && errno != EEXIST) {
        fprintf(stderr, "train_charlm: error: cannot create '%s': %s\n", path, strerror(errno));
        return 1;
      }
      if (!ch) break;
      *p = ch;
    }
  id_path(path, sizeof path, out);
  remove(path); /* a stale id of an earlier run would send the ranks to a dead rendezvous */
  char **args = calloc((size_t)argc + 3, sizeof *args);
  pid_t *pids = calloc((size_t)gpus, sizeof *pids);
  if (!args || !pids) {
    free(args);
    free(pids);
    fprintf(stderr, "train_charlm: error: out of memory\n");
    return 1;
  }
  char rank_arg[16];
  for (int i = 0; i < argc; i++)
    args[i] = argv[i];
  args[argc] = "--rank";
  args[argc + 1] = rank_arg;
  args[argc + 2] = NULL;
  fflush(stdout);
  fflush(stderr);
  int started = 0, rc = 0;
  for (int r = 0; r < gpus; r++) {
    snprintf(rank_arg, sizeof rank_arg, "%d", r);
    pid_t pid = fork();
    if (pid < 0) {
      fprintf(stderr, "train_charlm: error: fork: %s\n", strerror(errno));
      rc = 1;
      break;
    }
    if (pid == 0) {
      if (r > 0) { /* other ranks are silent on the terminal: their stdout goes to a file */
        char lp[4096];
        snprintf(lp, sizeof lp, "%s/rank%d.log", out, r);
        int fd = open(lp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
          dup2(fd, STDOUT_FILENO);
          close(fd);
        }
      }
      execv("/proc/self/exe", args);
      fprintf(stderr, "train_charlm: error: exec /proc/self/exe: %s\n", strerror(errno));
      _exit(127);
    }
    pids[started++] = pid;
  }
  /* the first failure stops the others (they would wait for it until their NCCL deadline) */
  for (int left = started; left > 0; left--) {
    int status = 0;
    pid_t pid = wait(&status);
    if (pid < 0) break;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    int r = 0;
    while (r < started && pids[r] != pid)
      r++;
    if (r < started) pids[r] = 0;
    if (code && !rc) {
      rc = code;
      fprintf(stderr, "train_charlm: rank %d exited with %d; stopping the other ranks\n", r, code);
      for (int k = 0; k < started; k++)
        if (pids[k] > 0) kill(pids[k], SIGTERM);
    }
  }
  free(args);
  free(pids);
  return rc;
}

int charlm_dp_join(charlm_model *m, int gpus, int rank, const char *out, double timeout_s, char *err) {
  char path[4096];
  id_path(path, sizeof path, out);
  unsigned char id[TG_COMM_ID_BYTES];
  if (rank == 0) {
    if (tg_comm_id_create(id, sizeof id) || tg_comm_id_write(id, sizeof id, path)) {
      snprintf(err, CHARLM_ERR, "rank 0: %s", tg_last_error());
      return -1;
    }
  } else if (tg_comm_id_read(path, timeout_s, id, sizeof id)) {
    snprintf(err, CHARLM_ERR, "rank %d: %s", rank, tg_last_error());
    return -1;
  }
  tg_comm_options o;
  tg_comm_options_init(&o);
  o.timeout_s = timeout_s;
  tg_comm *c = NULL;
  if (tg_comm_create(m->rt, gpus, rank, id, sizeof id, &o, &c)) {
    snprintf(err, CHARLM_ERR, "rank %d: tg_comm_create: %s", rank, tg_last_error());
    return -1;
  }
  if (tg_comm_broadcast_parameters(c, m->tape) || tg_comm_attach(c, m->tape)) {
    snprintf(err, CHARLM_ERR, "rank %d: %s", rank, tg_comm_error(c));
    tg_comm_destroy(c);
    return -1;
  }
  m->comm = c;
  return 0;
}

void charlm_dp_leave(charlm_model *m) {
  tg_comm_destroy(m->comm);
  m->comm = NULL;
}
