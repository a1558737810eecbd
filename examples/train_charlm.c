/*
 * train_charlm — trains the GPT-style character model of charlm.h on tinyshakespeare and
 * samples from it. `train_charlm --help` lists the flags. Defaults: nanoGPT's shakespeare_char
 * config on a CUDA device, a small config that trains in minutes on a host without one.
 * Writes <out>/loss.csv, <out>/loss.svg and <out>/sample.txt; --save / --resume checkpoint.
 * Sample only: `train_charlm --sample --resume CKPT --prompt TEXT` loads CKPT (model flags from
 * CKPT.meta unless given) and prints TEXT and its continuation, without training.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "charlm.h"
#include "charlm_dp.h"

#ifndef CHARLM_DEFAULT_DATA
#define CHARLM_DEFAULT_DATA "examples/data/input.txt"
#endif

/* ------------------------------------------------------------ flags */
enum {
  F_DEVICE,
  F_ATTENTION,
  F_DTYPE,
  F_STEPS,
  F_LAYERS,
  F_HEADS,
  F_DMODEL,
  F_CONTEXT,
  F_BATCH,
  F_LR,
  F_MINLR,
  F_WARMUP,
  F_WD,
  F_DROPOUT,
  F_ATTNDROP,
  F_CLIP,
  F_EVALINT,
  F_EVALITERS,
  F_LOGINT,
  F_SEED,
  F_DATA,
  F_OUT,
  F_SAVE,
  F_RESUME,
  F_SAMPLE,
  F_TEMP,
  F_TOPK,
  F_SAMPLE_ONLY,
  F_PROMPT,
  F_CHECKFINITE,
  F_GPUS,
  F_RANK,
  F_COMMTIMEOUT,
  NFLAGS
};
typedef enum { T_INT, T_DBL, T_STR, T_CHOICE, T_BOOL } ftype;
typedef struct flag {
  const char *name;
  ftype type;
  double lo, hi; /* numbers: allowed range */
  int lo_open;   /* 1: value must be > lo (not >=) ; hi is always inclusive except dropout */
  const char *gpu_def, *host_def, *help;
} flag;

static const flag FLAGS[NFLAGS] = {
    [F_DEVICE] = {"device", T_CHOICE, 0, 0, 0, "cuda", "host",
                  "cuda|host: runtime kind; host runs every node on the HOST provider"},
    [F_ATTENTION] = {"attention", T_CHOICE, 0, 0, 0, "fused", "host",
                     "host|composed|fused: provider of every MHA attention node"},
    [F_DTYPE] = {"dtype", T_CHOICE, 0, 0, 0, "bf16", "f32",
                 "f32|bf16|f16: mixed precision (bf16 or f16 matmuls/attention, f32 master weights, LN, loss); "
                 "f16 adds dynamic loss scaling (skipped steps are counted in the log)"},
    [F_STEPS] = {"steps", T_INT, 0, 1e9, 0, "5000", "1000", "training steps (lr decays to --min-lr over them)"},
    [F_LAYERS] = {"layers", T_INT, 1, 256, 0, "6", "2", "transformer blocks"},
    [F_HEADS] = {"heads", T_INT, 1, 1024, 0, "6", "2", "attention heads (must divide --d-model)"},
    [F_DMODEL] = {"d-model", T_INT, 1, 65536, 0, "384", "64", "embedding width"},
    [F_CONTEXT] = {"context", T_INT, 1, 1 << 20, 0, "256", "64", "context length (tokens per sequence)"},
    [F_BATCH] = {"batch", T_INT, 1, 1 << 20, 0, "64", "16", "sequences per step"},
    [F_LR] = {"lr", T_DBL, 0, 10, 1, "1e-3", "3e-3", "peak learning rate (AdamW, beta1 0.9, beta2 0.99, eps 1e-8)"},
    [F_MINLR] = {"min-lr", T_DBL, 0, 10, 0, "1e-4", "3e-4", "final learning rate of the cosine decay (<= --lr)"},
    [F_WARMUP] = {"warmup", T_INT, 0, 1e9, 0, "100", "30", "linear warmup steps"},
    [F_WD] = {"weight-decay", T_DBL, 0, 10, 0, "0.1", "0.1", "AdamW weight decay on 2-D weights (not on LayerNorm)"},
    [F_DROPOUT] = {"dropout", T_DBL, 0, 1, 0, "0.2", "0.0",
                   "drop probability in [0, 1) (embeddings, attention out, MLP out)"},
    [F_ATTNDROP] = {"attn-dropout", T_DBL, 0, 1, 0, "0.2", "0.0",
                    "drop probability of the attention weights, in [0, 1) (nanoGPT: 0.2)"},
    [F_CLIP] = {"clip", T_DBL, 0, 1e6, 0, "1.0", "1.0", "clip gradients to this global L2 norm; 0 = off"},
    [F_EVALINT] = {"eval-interval", T_INT, 1, 1e9, 0, "250", "100",
                   "evaluate train/val loss every N steps (and at the end)"},
    [F_EVALITERS] = {"eval-iters", T_INT, 1, 1e6, 0, "200", "20", "batches per evaluation"},
    [F_LOGINT] = {"log-interval", T_INT, 1, 1e9, 0, "10", "10", "print the training loss every N steps"},
    [F_SEED] = {"seed", T_INT, 0, 9e18, 0, "1337", "1337", "seed of initialisation, batches, dropout and sampling"},
    [F_DATA] = {"data", T_STR, 0, 0, 0, CHARLM_DEFAULT_DATA, CHARLM_DEFAULT_DATA,
                "training text (any bytes; vocabulary = its distinct bytes)"},
    [F_OUT] = {"out", T_STR, 0, 0, 0, "out", "out", "directory for loss.csv, loss.svg, sample.txt"},
    [F_SAVE] = {"save", T_STR, 0, 0, 0, "", "",
                "checkpoint path (+ PATH.meta), written at every evaluation and at the end; PATH.best holds the "
                "evaluation with the lowest val loss"},
    [F_RESUME] = {"resume", T_STR, 0, 0, 0, "", "",
                  "checkpoint to continue from (same model flags; same step numbering, CSV continued)"},
    [F_SAMPLE] = {"sample-chars", T_INT, 0, 1e6, 0, "500", "300", "characters to generate at the end"},
    [F_TEMP] = {"temperature", T_DBL, 0, 100, 1, "0.8", "0.8", "sampling temperature (> 0)"},
    [F_TOPK] = {"top-k", T_INT, 0, 256, 0, "200", "200", "sample among the k most likely characters; 0 = all"},
    [F_SAMPLE_ONLY] = {"sample", T_BOOL, 0, 1, 0, "0", "0",
                       "switch (no value): sample from --resume CKPT without training (model flags from CKPT.meta)"},
    [F_PROMPT] = {"prompt", T_STR, 0, 0, 0, "", "", "text the sample continues (default: a newline)"},
    [F_CHECKFINITE] = {"check-finite", T_INT, 0, 1, 0, "0", "0",
                       "1: anomaly mode (tg_tape_set_check_finite): the first NaN / inf of a step stops the run "
                       "naming its node"},
    [F_GPUS] = {"gpus", T_INT, 1, 64, 0, "1", "1",
                "data parallel over N GPUs (one process each, NCCL; charlm_dp.h): --batch is per GPU, the global "
                "batch N x --batch; rank 0 logs, evaluates, checkpoints"},
    [F_RANK] = {"rank", T_INT, -1, 63, 0, "-1", "-1",
                "set by the --gpus launcher for each process (device = rank); -1: launch"},
    [F_COMMTIMEOUT] = {"comm-timeout", T_DBL, 0, 1e6, 1, "600", "600",
                       "--gpus: seconds a rank waits for the others (rendezvous, each step's all-reduce) before it "
                       "fails"},
};

typedef struct opts {
  const char *raw[NFLAGS]; /* explicit value, or NULL */
  long long i[NFLAGS];
  double d[NFLAGS];
  const char *s[NFLAGS];
} opts;

static void usage(FILE *f) {
  fprintf(f, "usage: train_charlm [--flag value | --flag=value]...\n\n"
             "Trains a GPT-style character model (nanoGPT shakespeare_char) with tiga.\n"
             "Defaults: GPU config (cuda) / small host config (no GPU or --device host).\n\n");
  for (int k = 0; k < NFLAGS; k++) {
    const flag *fl = &FLAGS[k];
    char def[96];
    if (k == F_DEVICE)
      snprintf(def, sizeof def, "cuda when a CUDA device works, else host");
    else if (!strcmp(fl->gpu_def, fl->host_def))
      snprintf(def, sizeof def, "%s", *fl->gpu_def ? fl->gpu_def : "none");
    else
      snprintf(def, sizeof def, "%s (GPU) / %s (host)", fl->gpu_def, fl->host_def);
    fprintf(f, "  --%-14s %s\n  %-16s default: %s\n", fl->name, fl->help, "", def);
  }
  fprintf(f, "  --%-14s this text\n", "help");
}

/* Parses and range-checks one value; 0 or -1 with a message. */
static int parse_value(opts *o, int k, const char *v, char *err) {
  const flag *fl = &FLAGS[k];
  char *end = NULL;
  errno = 0;
  switch (fl->type) {
  case T_STR: o->s[k] = v; return 0;
  case T_BOOL:
    if (strcmp(v, "0") && strcmp(v, "1")) {
      snprintf(err, CHARLM_ERR, "--%s: '%s' is not 0 or 1 (or give the switch alone)", fl->name, v);
      return -1;
    }
    o->i[k] = *v == '1';
    return 0;
  case T_CHOICE: {
    const char *ok = k == F_DEVICE ? "cuda host" : k == F_ATTENTION ? "host composed fused" : "f32 bf16 f16";
    size_t n = strlen(v);
    const char *p = ok; /* a whole word of ok ("f16" is inside "bf16" too) */
    while ((p = n ? strstr(p, v) : NULL) && ((p[n] != ' ' && p[n] != 0) || (p != ok && p[-1] != ' ')))
      p++;
    if (!p) {
      snprintf(err, CHARLM_ERR, "--%s: '%s' is not one of: %s", fl->name, v, ok);
      return -1;
    }
    o->s[k] = v;
    return 0;
  }
  case T_INT: {
    long long x = strtoll(v, &end, 10);
    if (errno == ERANGE) {
      snprintf(err, CHARLM_ERR, "--%s: %s is out of range; expected %.0f..%.0f", fl->name, v, fl->lo, fl->hi);
      return -1;
    }
    if (!*v || *end || errno) {
      snprintf(err, CHARLM_ERR, "--%s: '%s' is not an integer", fl->name, v);
      return -1;
    }
    if ((double)x < fl->lo || (double)x > fl->hi) {
      snprintf(err, CHARLM_ERR, "--%s: %lld is out of range; expected %.0f..%.0f", fl->name, x, fl->lo, fl->hi);
      return -1;
    }
    o->i[k] = x;
    return 0;
  }
  case T_DBL: {
    double x = strtod(v, &end);
    if (!*v || *end || errno || !isfinite(x)) {
      snprintf(err, CHARLM_ERR, "--%s: '%s' is not a finite number", fl->name, v);
      return -1;
    }
    int hi_open = k == F_DROPOUT || k == F_ATTNDROP;
    if (x < fl->lo || (fl->lo_open && x <= fl->lo) || x > fl->hi || (hi_open && x >= fl->hi)) {
      snprintf(err, CHARLM_ERR, "--%s: %g is out of range; expected %s%g, %g%s", fl->name, x, fl->lo_open ? "(" : "[",
               fl->lo, fl->hi, hi_open ? ")" : "]");
      return -1;
    }
    o->d[k] = x;
    return 0;
  }
  }
  return -1;
}

/* Pass 1: records explicit values (syntax and ranges checked). Returns 1 for --help. */
static int parse_args(opts *o, int argc, char **argv, char *err) {
  for (int a = 1; a < argc; a++) {
    const char *arg = argv[a];
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) return 1;
    if (strncmp(arg, "--", 2)) {
      snprintf(err, CHARLM_ERR, "unexpected argument '%s'; flags look like --name value (see --help)", arg);
      return -1;
    }
    const char *eq = strchr(arg, '=');
    size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
    int k = 0;
    while (k < NFLAGS && !(strlen(FLAGS[k].name) == len && !strncmp(FLAGS[k].name, arg + 2, len)))
      k++;
    if (k == NFLAGS) {
      snprintf(err, CHARLM_ERR, "unknown flag '%.*s' (see --help)", (int)(len + 2), arg);
      return -1;
    }
    const char *v = eq ? eq + 1 : FLAGS[k].type == T_BOOL ? "1" : NULL;
    if (!v) {
      if (a + 1 >= argc || !strncmp(argv[a + 1], "--", 2)) {
        snprintf(err, CHARLM_ERR, "--%s needs a value (see --help)", FLAGS[k].name);
        return -1;
      }
      v = argv[++a];
    }
    if (parse_value(o, k, v, err)) return -1;
    o->raw[k] = v;
  }
  return 0;
}

/* Pass 2: fills every flag not given with the default of the chosen config. */
static void apply_defaults(opts *o, int gpu) {
  char err[CHARLM_ERR];
  for (int k = 0; k < NFLAGS; k++)
    if (!o->raw[k]) parse_value(o, k, gpu ? FLAGS[k].gpu_def : FLAGS[k].host_def, err);
}

/* The model flags a checkpoint was trained with, from its sidecar (charlm_ckpt_save's CKPT.meta),
 * for the flags not given on the command line (sample-only runs). */
static int config_from_sidecar(opts *o, const char *ckpt, char *err) {
  static const struct {
    const char *key;
    int flag;
  } keys[] = {{"layers", F_LAYERS}, {"heads", F_HEADS}, {"d_model", F_DMODEL}, {"context", F_CONTEXT}};
  char path[4096], key[64];
  snprintf(path, sizeof path, "%s.meta", ckpt);
  FILE *f = fopen(path, "r");
  if (!f) {
    snprintf(err, CHARLM_ERR, "cannot open '%s': %s (was the checkpoint written by train_charlm?)", path,
             strerror(errno));
    return -1;
  }
  int found = 0;
  while (fscanf(f, "%63s", key) == 1) {
    long long v;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
      if (!strcmp(key, keys[i].key) && fscanf(f, "%lld", &v) == 1) {
        found++;
        if (!o->raw[keys[i].flag]) o->i[keys[i].flag] = v;
      }
  }
  fclose(f);
  if (found != 4) {
    snprintf(err, CHARLM_ERR, "'%s' lacks the model flags (layers, heads, d_model, context)", path);
    return -1;
  }
  return 0;
}

/* ------------------------------------------------------------ output files */
typedef struct row {
  long long step;
  int kind; /* 0 train batch, 1 eval train, 2 eval val */
  double loss, lr, tok_s, elapsed;
} row;
static const char *KIND[3] = {"train", "eval_train", "eval_val"};

typedef struct log_state {
  row *rows;
  size_t n, cap;
  FILE *csv;
  char csv_path[4096], svg_path[4096];
} log_state;

static int add_row(log_state *L, row r) {
  if (L->n == L->cap) {
    size_t nc = L->cap ? 2 * L->cap : 256;
    row *nr = realloc(L->rows, nc * sizeof *nr);
    if (!nr) return -1;
    L->rows = nr;
    L->cap = nc;
  }
  L->rows[L->n++] = r;
  if (L->csv) {
    fprintf(L->csv, "%lld,%s,%.6f,%.6g,%.6g,%.3f\n", r.step, KIND[r.kind], r.loss, r.lr, r.tok_s, r.elapsed);
    fflush(L->csv);
  }
  return 0;
}

static int mkdirs(const char *path, char *err) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1;; p++) {
    if (*p == '/' || !*p) {
      char c = *p;
      *p = 0;
      if (mkdir(buf, 0777) && errno != EEXIST) {
        snprintf(err, CHARLM_ERR, "cannot create output directory '%s': %s", buf, strerror(errno));
        return -1;
      }
      if (!c) break;
      *p = c;
    }
  }
  struct stat st;
  if (stat(path, &st) || !S_ISDIR(st.st_mode)) {
    snprintf(err, CHARLM_ERR, "--out '%s' is not a directory", path);
    return -1;
  }
  return 0;
}

/* Opens <out>/loss.csv. A resumed run keeps the rows of the earlier run up to the checkpoint
 * (eval rows at steps <= resume_step, train rows of steps < resume_step) and appends. */
static int log_open(log_state *L, const char *out, long long resume_step, char *err) {
  snprintf(L->csv_path, sizeof L->csv_path, "%s/loss.csv", out);
  snprintf(L->svg_path, sizeof L->svg_path, "%s/loss.svg", out);
  if (resume_step >= 0) {
    FILE *f = fopen(L->csv_path, "r");
    char line[512], kind[32];
    while (f && fgets(line, sizeof line, f)) {
      row r;
      if (sscanf(line, "%lld,%31[^,],%lf,%lf,%lf,%lf", &r.step, kind, &r.loss, &r.lr, &r.tok_s, &r.elapsed) != 6)
        continue; /* header */
      r.kind = !strcmp(kind, "eval_val") ? 2 : !strcmp(kind, "eval_train") ? 1 : 0;
      if (r.step < resume_step || (r.kind && r.step == resume_step)) add_row(L, r);
    }
    if (f) fclose(f);
  }
  L->csv = fopen(L->csv_path, "w");
  if (!L->csv) {
    snprintf(err, CHARLM_ERR, "cannot write '%s': %s", L->csv_path, strerror(errno));
    return -1;
  }
  fprintf(L->csv, "step,kind,loss,lr,tokens_per_s,elapsed_s\n");
  for (size_t i = 0; i < L->n; i++) {
    row *r = &L->rows[i];
    fprintf(L->csv, "%lld,%s,%.6f,%.6g,%.6g,%.3f\n", r->step, KIND[r->kind], r->loss, r->lr, r->tok_s, r->elapsed);
  }
  fflush(L->csv);
  return 0;
}

/* The loss curve as a standalone SVG: train-batch loss (thin), eval train / val (markers). */
static void write_svg(const log_state *L, const char *title) {
  if (!L->n) return;
  FILE *f = fopen(L->svg_path, "w");
  if (!f) return;
  const double W = 800, H = 480, x0 = 70, x1 = 770, y0 = 430, y1 = 50;
  double smax = 1, lmin = INFINITY, lmax = -INFINITY;
  for (size_t i = 0; i < L->n; i++) {
    const row *r = &L->rows[i];
    if (r->step > smax) smax = (double)r->step;
    if (isfinite(r->loss)) {
      lmin = fmin(lmin, r->loss);
      lmax = fmax(lmax, r->loss);
    }
  }
  if (!(lmax > lmin)) {
    lmin = isfinite(lmin) ? lmin - 0.5 : 0;
    lmax = lmin + 1;
  }
  lmin = floor(lmin * 2) / 2; /* round to half nats for tidy ticks */
  lmax = ceil(lmax * 2) / 2;
#define SX(s) (x0 + (x1 - x0) * (double)(s) / smax)
#define SY(l) (y0 - (y0 - y1) * ((l)-lmin) / (lmax - lmin))
  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
          "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
          W, H);
  fprintf(f, "<text x=\"%.0f\" y=\"28\" font-size=\"15\" text-anchor=\"middle\">%s</text>\n", W / 2, title);
  fprintf(f, "<path d=\"M%.0f %.0f V%.0f H%.0f\" stroke=\"black\" fill=\"none\"/>\n", x0, y1, y0, x1);
  for (int k = 0; k <= 5; k++) {
    double s = smax * k / 5, l = lmin + (lmax - lmin) * k / 5;
    fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">%.0f</text>\n", SX(s), y0 + 18, s);
    fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.2f</text>\n", x0 - 6, SY(l) + 4, l);
    fprintf(f, "<path d=\"M%.0f %.1f H%.0f\" stroke=\"#ddd\"/>\n", x0, SY(l), x1);
  }
  fprintf(f, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">step</text>\n", (x0 + x1) / 2, H - 12);
  fprintf(f,
          "<text x=\"18\" y=\"%.0f\" text-anchor=\"middle\" transform=\"rotate(-90 18 %.0f)\">loss "
          "(nats/char)</text>\n",
          (y0 + y1) / 2, (y0 + y1) / 2);
  static const char *color[3] = {"#9ecae1", "#3182bd", "#e6550d"};
  for (int kind = 0; kind < 3; kind++) {
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%s\" points=\"", color[kind], kind ? "2" : "1");
    for (size_t i = 0; i < L->n; i++)
      if (L->rows[i].kind == kind && isfinite(L->rows[i].loss))
        fprintf(f, "%.1f,%.1f ", SX(L->rows[i].step), SY(L->rows[i].loss));
    fprintf(f, "\"/>\n");
    for (size_t i = 0; kind && i < L->n; i++)
      if (L->rows[i].kind == kind && isfinite(L->rows[i].loss))
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", SX(L->rows[i].step), SY(L->rows[i].loss),
                color[kind]);
    fprintf(f, "<rect x=\"%.0f\" y=\"%d\" width=\"14\" height=\"4\" fill=\"%s\"/><text x=\"%.0f\" y=\"%d\">%s</text>\n",
            x1 - 150, 62 + 18 * kind, color[kind], x1 - 130, 67 + 18 * kind,
            kind == 0   ? "train (batch)"
            : kind == 1 ? "train (eval)"
                        : "validation (eval)");
  }
#undef SX
#undef SY
  fprintf(f, "</svg>\n");
  fclose(f);
}

/* ------------------------------------------------------------ main */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static const char *hms(double s, char *buf) {
  long t = s > 0 && s < 1e9 ? (long)(s + 0.5) : 0;
  snprintf(buf, 32, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  return buf;
}

static int die(int code, const char *msg) {
  fprintf(stderr, "train_charlm: error: %s\n", msg);
  return code;
}

int main(int argc, char **argv) {
  opts o;
  memset(&o, 0, sizeof o);
  char err[CHARLM_ERR];
  int pr = parse_args(&o, argc, argv, err);
  if (pr == 1) {
    usage(stdout);
    return 0;
  }
  if (pr) return die(2, err);

  /* data parallel: the launcher (no --rank) starts one process per GPU and waits for them */
  const int gpus = o.raw[F_GPUS] ? (int)o.i[F_GPUS] : 1;
  const int rank = o.raw[F_RANK] ? (int)o.i[F_RANK] : -1;
  if (rank >= gpus) return die(2, "--rank must be below --gpus");
  if (gpus > 1 && o.raw[F_DEVICE] && !strcmp(o.s[F_DEVICE], "host")) return die(2, "--gpus needs --device cuda");
  if (gpus > 1 && rank < 0) return charlm_dp_launch(argc, argv, gpus, o.raw[F_OUT] ? o.s[F_OUT] : FLAGS[F_OUT].gpu_def);
  const int dp = gpus > 1, lead = !dp || rank == 0; /* lead: logs, evaluates, checkpoints, samples */

  /* device, then the config that suits it */
  tg_runtime *rt = NULL;
  const char *why;
  int gpu;
  if (o.raw[F_DEVICE] && !strcmp(o.s[F_DEVICE], "host")) {
    gpu = 0;
    why = "--device host";
  } else if (tg_runtime_create_cuda(dp ? rank : 0, &rt) == TG_OK) {
    gpu = 1;
    why = o.raw[F_DEVICE] ? "--device cuda" : "a CUDA device is available";
  } else if (o.raw[F_DEVICE] || dp) {
    snprintf(err, sizeof err, "%s: no usable CUDA device: %s", dp ? "--gpus" : "--device cuda", tg_last_error());
    return die(1, err);
  } else {
    gpu = 0;
    why = "no usable CUDA device, so the host provider runs everything";
    printf("note: %s\n", tg_last_error());
  }
  apply_defaults(&o, gpu);
  const int sample_only = o.i[F_SAMPLE_ONLY] != 0;
  if (sample_only && !*o.s[F_RESUME]) return die(2, "--sample needs --resume CKPT (the checkpoint to sample from)");
  if (sample_only && dp) return die(2, "--sample runs on one GPU; leave out --gpus");
  if (sample_only && config_from_sidecar(&o, o.s[F_RESUME], err)) return die(1, err);
  if (gpu && !strcmp(o.s[F_ATTENTION], "host") && !o.raw[F_DTYPE]) {
    o.s[F_DTYPE] = "f32"; /* host attention has no bf16 kernels */
    printf("note: --attention host: using --dtype f32\n");
  }
  printf("config: %s (%s)\n", gpu ? "nanoGPT shakespeare_char on cuda:0" : "small host config", why);
  if (!gpu && strcmp(o.s[F_ATTENTION], "host")) {
    snprintf(err, sizeof err, "--attention %s needs a CUDA device; on --device host use --attention host",
             o.s[F_ATTENTION]);
    return die(2, err);
  }
  if (strcmp(o.s[F_DTYPE], "f32") && (!gpu || !strcmp(o.s[F_ATTENTION], "host"))) {
    snprintf(err, sizeof err,
             gpu ? "--dtype %s with --attention host: host attention computes in f32/f64; use --dtype f32"
                 : "--dtype %s needs a CUDA device (host kernels are f32/f64)",
             o.s[F_DTYPE]);
    return die(2, err);
  }
  if (o.d[F_MINLR] > o.d[F_LR]) {
    snprintf(err, sizeof err, "--min-lr %g is above --lr %g", o.d[F_MINLR], o.d[F_LR]);
    return die(2, err);
  }
  if (o.i[F_BATCH] * o.i[F_CONTEXT] > (1ll << 26)) return die(2, "--batch x --context is above 2^26 tokens per step");
  if (!gpu && tg_runtime_create_host(&rt)) return die(1, tg_last_error());

  const long long steps = o.i[F_STEPS], B = o.i[F_BATCH], T = o.i[F_CONTEXT];
  charlm_config cfg = {(int)o.i[F_LAYERS],
                       (int)o.i[F_HEADS],
                       (int)o.i[F_DMODEL],
                       (int)T,
                       0,
                       o.d[F_DROPOUT],
                       !strcmp(o.s[F_DTYPE], "bf16")  ? TG_BF16
                       : !strcmp(o.s[F_DTYPE], "f16") ? TG_F16
                                                      : TG_F32,
                       gpu ? TG_PROVIDER_AUTO : TG_PROVIDER_HOST,
                       !strcmp(o.s[F_ATTENTION], "host")    ? TG_PROVIDER_HOST
                       : !strcmp(o.s[F_ATTENTION], "fused") ? TG_PROVIDER_CUDA_FUSED
                                                            : TG_PROVIDER_CUDA_COMPOSED,
                       o.d[F_ATTNDROP]};

  charlm_data data;
  charlm_model m;
  memset(&m, 0, sizeof m);
  log_state L;
  memset(&L, 0, sizeof L);
  int32_t *x = NULL, *y = NULL, *prompt = NULL;
  char *text = NULL;
  int rc = 1;
  if (charlm_data_load(&data, o.s[F_DATA], err)) {
    tg_runtime_destroy(rt);
    return die(1, err);
  }
  cfg.vocab = data.vocab;
  if (charlm_data_check_context(&data, T, err) || charlm_config_check(&cfg, err)) {
    rc = 2;
    goto done;
  }
  if (charlm_model_init(&m, rt, &cfg, (uint64_t)o.i[F_SEED], err)) goto done;
  if (o.i[F_CHECKFINITE] && tg_tape_set_check_finite(m.tape, 1, NULL)) {
    snprintf(err, sizeof err, "tg_tape_set_check_finite: %s", tg_tape_error(m.tape));
    goto done;
  }
  printf("model: %d layers, %d heads, d_model %d, context %d, vocab %d: %.2fM parameters; dtype %s, attention %s\n",
         cfg.layers, cfg.heads, cfg.d_model, cfg.context, cfg.vocab, (double)m.n_params / 1e6, o.s[F_DTYPE],
         o.s[F_ATTENTION]);
  printf("data: %s: %lld chars (train %lld, val %lld)\n", o.s[F_DATA], (long long)data.n, (long long)data.n_train,
         (long long)(data.n - data.n_train));
  if (dp)
    printf("data parallel: %d GPUs (this is rank %d on cuda:%d), batch %lld per GPU, global batch %lld\n", gpus, rank,
           rank, B, B * gpus);
  if (!sample_only)
    printf("train: %lld steps, batch %lld, lr %g -> %g (warmup %lld), weight decay %g, dropout %g, attn dropout %g, "
           "clip %g\n",
           steps, B, o.d[F_LR], o.d[F_MINLR], o.i[F_WARMUP], o.d[F_WD], o.d[F_DROPOUT], o.d[F_ATTNDROP], o.d[F_CLIP]);

  charlm_rng rng;
  charlm_rng_seed(&rng, (uint64_t)o.i[F_SEED]);
  charlm_ckpt_state st = {0, 0, 0};
  const int resumed = *o.s[F_RESUME] != 0;
  if (resumed) {
    if (charlm_ckpt_load(&m, &data, o.s[F_RESUME], &st, err)) goto done;
    rng.s = st.rng;
    printf("resumed from %s at step %lld\n", o.s[F_RESUME], (long long)st.step);
  }
  if (sample_only) goto sample;
  if (rank > 0) /* its own data stream (charlm_dp.h: seed rules) */
    charlm_rng_seed(&rng, charlm_dp_seed(resumed ? st.rng : (uint64_t)o.i[F_SEED], rank));
  if (dp && charlm_dp_join(&m, gpus, rank, o.s[F_OUT], o.d[F_COMMTIMEOUT], err)) goto done;
  if (mkdirs(o.s[F_OUT], err) || (lead && log_open(&L, o.s[F_OUT], resumed ? st.step : -1, err))) goto done;
  x = malloc((size_t)(B * T) * sizeof *x);
  y = malloc((size_t)(B * T) * sizeof *y);
  if (!x || !y) {
    snprintf(err, sizeof err, "out of memory for a batch");
    goto done;
  }

  charlm_train_opts to = {
      o.d[F_LR], o.d[F_WD], 0.9, 0.99, 1e-8, o.d[F_CLIP], charlm_dp_seed((uint64_t)o.i[F_SEED], dp ? rank : 0)};
  const double t_start = now_s();
  const double elapsed0 = st.elapsed_s;
  double t_log = t_start, eval_time = 0, last_eval = 0, eval_in_window = 0;
  long long log_from = st.step, trained = 0;
  char tb[32], tb2[32], title[160];
  snprintf(title, sizeof title, "charlm: %d layers, d %d, context %d, batch %lld, %s", cfg.layers, cfg.d_model,
           cfg.context, B, o.s[F_DTYPE]);
  /* nanoGPT's protocol on this data (always_save_checkpoint = False): the model overfits late in
   * the run, so the best validation loss and its checkpoint (--save PATH.best) are kept apart
   * from the last ones. */
  double best_val = INFINITY;
  long long best_step = -1;
  for (long long step = st.step;; step++) {
    double elapsed = elapsed0 + now_s() - t_start;
    int do_eval = lead && (step % o.i[F_EVALINT] == 0 || step >= steps);
    if (do_eval && !(resumed && step == st.step)) { /* a checkpoint is written right after its eval */
      double te = now_s(), lt, lv;
      if (charlm_evaluate(&m, &data, 0, (int)o.i[F_EVALITERS], B, &rng, &lt, err) ||
          charlm_evaluate(&m, &data, 1, (int)o.i[F_EVALITERS], B, &rng, &lv, err))
        goto done;
      last_eval = now_s() - te;
      eval_time += last_eval;
      printf("step %lld: train loss %.4f, val loss %.4f (eval %.1f s)\n", step, lt, lv, last_eval);
      add_row(&L, (row){step, 1, lt, 0, 0, elapsed});
      add_row(&L, (row){step, 2, lv, 0, 0, elapsed});
      write_svg(&L, title);
      st.step = step;
      st.rng = rng.s;
      st.elapsed_s = elapsed;
      if (*o.s[F_SAVE] && charlm_ckpt_save(&m, &data, o.s[F_SAVE], &st, err)) goto done;
      if (lv < best_val) {
        best_val = lv;
        best_step = step;
        char bp[4096];
        snprintf(bp, sizeof bp, "%s.best", o.s[F_SAVE]);
        if (*o.s[F_SAVE] && charlm_ckpt_save(&m, &data, bp, &st, err)) goto done;
      }
      eval_in_window += now_s() - te;
    }
    if (step >= steps) break;
    double lr = charlm_lr(step, o.i[F_WARMUP], steps, o.d[F_LR], o.d[F_MINLR]);
    tg_id loss;
    charlm_batch(&data, 0, B, T, &rng, x, y);
    if (charlm_train_step(&m, x, y, B, T, &to, lr, step, &loss, err)) goto done;
    trained++;
    if (step % o.i[F_LOGINT] == 0 || step == steps - 1) {
      double lv;
      if (tg_tape_scalar(m.tape, loss, &lv)) {
        snprintf(err, sizeof err, "reading the loss: %s", tg_tape_error(m.tape));
        goto done;
      }
      if (!isfinite(lv)) {
        snprintf(err, sizeof err, "the loss is %g at step %lld; lower --lr or use --dtype f32", lv, step);
        goto done;
      }
      double t = now_s();
      double window = t - t_log - eval_in_window; /* training time only */
      long long nsteps = step + 1 - log_from;
      double per_step = (t - t_start - eval_time) / (double)trained;
      double eta =
          per_step * (double)(steps - step - 1) + last_eval * (double)((steps - step - 1) / o.i[F_EVALINT] + 1);
      double tok_s = (double)(nsteps * B * T * gpus) / window; /* global: every rank's tokens */
      printf("step %5lld/%lld | loss %.4f | lr %.2e | %8.0f tok/s | %7.1f ms/step | elapsed %s | ETA %s", step, steps,
             lv, lr, tok_s, 1e3 * window / (double)nsteps, hms(elapsed0 + t - t_start, tb), hms(eta, tb2));
      if (m.scaler) {
        double scale = 0;
        tg_loss_scaler_state(m.scaler, &scale, NULL);
        printf(" | loss scale %g, %lld steps skipped", scale, (long long)m.skipped);
      }
      printf("\n");
      fflush(stdout);
      add_row(&L, (row){step, 0, lv, lr, tok_s, elapsed0 + t - t_start});
      t_log = now_s();
      eval_in_window = 0;
      log_from = step + 1;
    }
  }
  if (lead) {
    write_svg(&L, title);
    printf("wrote %s and %s\n", L.csv_path, L.svg_path);
  }
  if (best_step >= 0) printf("best val loss %.4f at step %lld (this run)\n", best_val, best_step);
  if (*o.s[F_SAVE]) printf("checkpoint: %s (+ .meta), best: %s.best (+ .meta)\n", o.s[F_SAVE], o.s[F_SAVE]);

sample:;
  int n = lead ? (int)o.i[F_SAMPLE] : 0;
  if (!n) {
    rc = 0;
    goto done;
  }
  /* the prompt's bytes as tokens (a newline when none is given) */
  const char *ptext = *o.s[F_PROMPT] ? o.s[F_PROMPT] : "\n";
  int n_prompt = (int)strlen(ptext);
  prompt = malloc((size_t)n_prompt * sizeof *prompt);
  text = malloc((size_t)n + 1);
  if (!prompt || !text) {
    snprintf(err, sizeof err, "out of memory for the sample");
    goto done;
  }
  for (int i = 0; i < n_prompt; i++) {
    int tok = data.stoi[(unsigned char)ptext[i]];
    if (tok < 0 && !*o.s[F_PROMPT]) tok = 0;
    if (tok < 0) {
      snprintf(err, sizeof err, "--prompt: the character '%c' (byte %d) is not in the training text's vocabulary",
               ptext[i], (unsigned char)ptext[i]);
      goto done;
    }
    prompt[i] = tok;
  }
  charlm_rng srng;
  charlm_rng_seed(&srng, (uint64_t)o.i[F_SEED] ^ 0x5a3b1e);
  if (charlm_sample(&m, &data, prompt, n_prompt, n, o.d[F_TEMP], (int)o.i[F_TOPK], &srng, text, err)) goto done;
  if (sample_only) { /* the prompt and its continuation, nothing else on stdout after the header lines */
    printf("%s%s\n", *o.s[F_PROMPT] ? o.s[F_PROMPT] : "", text);
    rc = 0;
    goto done;
  }
  printf("---- sample (%d chars, temperature %g, top-k %lld) ----\n%s%s\n----\n", n, o.d[F_TEMP], o.i[F_TOPK],
         *o.s[F_PROMPT] ? o.s[F_PROMPT] : "", text);
  char sp[4096];
  snprintf(sp, sizeof sp, "%s/sample.txt", o.s[F_OUT]);
  FILE *sf = fopen(sp, "w");
  if (sf) {
    fputs(text, sf);
    fclose(sf);
  }
  rc = 0;
done:
  if (rc) die(rc, err);
  if (L.csv) fclose(L.csv);
  free(L.rows);
  free(text);
  free(prompt);
  free(x);
  free(y);
  charlm_dp_leave(&m);
  charlm_model_free(&m);
  charlm_data_free(&data);
  tg_runtime_destroy(rt);
  return rc;
}
