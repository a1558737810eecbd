/* The safetensors header parser (train/safetensors.h states what it accepts). One pass over the
 * bytes with a cursor; strings are unescaped into one store as long as the input (unescaping
 * never grows a string, and each string's quotes pay for its NUL). */
#include "safetensors.h"
#include "../tape/alloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
  const char *name;
  unsigned size;
  int dtype;
} DTYPES[] = {
    {"F64", 8, TG_F64}, {"F32", 4, TG_F32}, {"F16", 2, TG_F16}, {"BF16", 2, TG_BF16}, {"I64", 8, TG_I64},
    {"I32", 4, TG_I32}, {"U8", 1, TG_U8},   {"BOOL", 1, -1},    {"I8", 1, -1},        {"I16", 2, -1},
    {"U16", 2, -1},     {"U32", 4, -1},     {"U64", 8, -1},     {"F8_E5M2", 1, -1},   {"F8_E4M3", 1, -1},
};
#define N_DTYPES (sizeof DTYPES / sizeof DTYPES[0])

const char *tgi_st_dtype_name(tg_dtype dt) {
  for (size_t i = 0; i < N_DTYPES; i++)
    if (DTYPES[i].dtype == (int)dt) return DTYPES[i].name;
  return "?";
}

typedef struct parser {
  const unsigned char *s;
  size_t n, i;
  char *store;
  size_t used;
  char *why;
  size_t cap;
  bool failed;
} parser;

static bool fail(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(parser *p, const char *fmt, ...) {
  if (p->failed) return false;
  p->failed = true;
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  snprintf(p->why, p->cap, "header byte %zu: %s", p->i, msg);
  return false;
}

static void ws(parser *p) {
  while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' || p->s[p->i] == '\r'))
    p->i++;
}

/* Skips whitespace, then consumes c. */
static bool eat(parser *p, char c) {
  ws(p);
  if (p->i < p->n && p->s[p->i] == (unsigned char)c) {
    p->i++;
    return true;
  }
  return false;
}

static bool expect(parser *p, char c) {
  if (eat(p, c)) return true;
  if (p->i >= p->n) return fail(p, "the header ends where '%c' was expected", c);
  return fail(p, "expected '%c', found '%c'", c, p->s[p->i] >= 0x20 && p->s[p->i] < 0x7f ? p->s[p->i] : '?');
}

static int hex(unsigned char c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}

static bool hex4(parser *p, unsigned *out) {
  if (p->n - p->i < 4) return fail(p, "truncated \\u escape");
  unsigned v = 0;
  for (int k = 0; k < 4; k++) {
    int h = hex(p->s[p->i + (size_t)k]);
    if (h < 0) return fail(p, "bad hex digit in a \\u escape");
    v = v * 16 + (unsigned)h;
  }
  p->i += 4;
  *out = v;
  return true;
}

static void put(parser *p, unsigned char c) { p->store[p->used++] = (char)c; }

static void put_utf8(parser *p, unsigned cp) {
  if (cp < 0x80) {
    put(p, (unsigned char)cp);
  } else if (cp < 0x800) {
    put(p, (unsigned char)(0xc0 | (cp >> 6)));
    put(p, (unsigned char)(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    put(p, (unsigned char)(0xe0 | (cp >> 12)));
    put(p, (unsigned char)(0x80 | ((cp >> 6) & 0x3f)));
    put(p, (unsigned char)(0x80 | (cp & 0x3f)));
  } else {
    put(p, (unsigned char)(0xf0 | (cp >> 18)));
    put(p, (unsigned char)(0x80 | ((cp >> 12) & 0x3f)));
    put(p, (unsigned char)(0x80 | ((cp >> 6) & 0x3f)));
    put(p, (unsigned char)(0x80 | (cp & 0x3f)));
  }
}

/* Length of the well-formed UTF-8 sequence at s[0..avail), or 0 (RFC 3629: no overlongs, no
 * surrogates, nothing above U+10FFFF). */
static size_t utf8_len(const unsigned char *s, size_t avail) {
  unsigned char c = s[0];
  size_t n;
  unsigned char lo = 0x80, hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf)
    n = 2;
  else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else
    return 0;
  if (avail < n || s[1] < lo || s[1] > hi) return 0;
  for (size_t k = 2; k < n; k++)
    if (s[k] < 0x80 || s[k] > 0xbf) return 0;
  return n;
}

/* A JSON string; *out points into the store (NUL-terminated). */
static bool string(parser *p, const char **out) {
  if (!expect(p, '"')) return false;
  char *start = p->store + p->used;
  for (;;) {
    if (p->i >= p->n) return fail(p, "unterminated string");
    unsigned char c = p->s[p->i];
    if (c == '"') {
      p->i++;
      break;
    }
    if (c < 0x20) return fail(p, "control character 0x%02x in a string", c);
    if (c == '\\') {
      if (p->n - p->i < 2) return fail(p, "truncated escape");
      unsigned char e = p->s[p->i + 1];
      p->i += 2;
      const char *simple = strchr("\"\\/bfnrt", e);
      if (e && simple) {
        static const char repl[] = "\"\\/\b\f\n\r\t";
        put(p, (unsigned char)repl[simple - "\"\\/bfnrt"]);
        continue;
      }
      if (e != 'u') return fail(p, "unknown escape '\\%c'", e >= 0x20 && e < 0x7f ? e : '?');
      unsigned cp;
      if (!hex4(p, &cp)) return false;
      if (cp >= 0xdc00 && cp <= 0xdfff) return fail(p, "lone low surrogate in a \\u escape");
      if (cp >= 0xd800 && cp <= 0xdbff) {
        unsigned lo;
        if (p->n - p->i < 2 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u')
          return fail(p, "high surrogate without its low surrogate");
        p->i += 2;
        if (!hex4(p, &lo)) return false;
        if (lo < 0xdc00 || lo > 0xdfff) return fail(p, "high surrogate without its low surrogate");
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
      }
      if (cp == 0) return fail(p, "\\u0000 in a string");
      put_utf8(p, cp);
      continue;
    }
    if (c < 0x80) {
      put(p, c);
      p->i++;
      continue;
    }
    size_t k = utf8_len(p->s + p->i, p->n - p->i);
    if (!k) return fail(p, "invalid UTF-8 in a string");
    memcpy(p->store + p->used, p->s + p->i, k);
    p->used += k;
    p->i += k;
  }
  put(p, 0);
  *out = start;
  return true;
}

/* A non-negative integer without sign, fraction, exponent or leading zero, at most 2^63 - 1. */
static bool integer(parser *p, uint64_t *out) {
  ws(p);
  size_t start = p->i;
  uint64_t v = 0;
  while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
    unsigned d = p->s[p->i] - '0';
    if (v > (UINT64_C(0x7fffffffffffffff) - d) / 10) return fail(p, "integer above 2^63 - 1");
    v = v * 10 + d;
    p->i++;
  }
  if (p->i == start) return fail(p, "expected a non-negative integer");
  if (p->s[start] == '0' && p->i - start > 1) return fail(p, "integer with a leading zero");
  if (p->i < p->n && (p->s[p->i] == '.' || p->s[p->i] == 'e' || p->s[p->i] == 'E'))
    return fail(p, "expected an integer, found a fraction or exponent");
  *out = v;
  return true;
}

/* [int, ...] with at most max entries (more is an error naming what). */
static bool int_array(parser *p, uint64_t *vals, int max, int *count, const char *what) {
  *count = 0;
  if (!expect(p, '[')) return false;
  if (eat(p, ']')) return true;
  do {
    if (*count == max) return fail(p, "%s has more than %d entries", what, max);
    if (!integer(p, &vals[(*count)++])) return false;
  } while (eat(p, ','));
  return expect(p, ']');
}

static bool tensor(parser *p, tgi_st_tensor *t) {
  bool seen[3] = {false, false, false};
  if (!expect(p, '{')) return false;
  if (eat(p, '}')) return fail(p, "tensor '%s' has no dtype, shape or data_offsets", t->name);
  do {
    const char *key;
    if (!string(p, &key) || !expect(p, ':')) return false;
    int k = !strcmp(key, "dtype") ? 0 : !strcmp(key, "shape") ? 1 : !strcmp(key, "data_offsets") ? 2 : -1;
    if (k < 0) return fail(p, "tensor '%s' has an unknown key '%.40s'", t->name, key);
    if (seen[k]) return fail(p, "tensor '%s' has the key '%s' twice", t->name, key);
    seen[k] = true;
    if (k == 0) {
      const char *dt;
      if (!string(p, &dt)) return false;
      size_t i = 0;
      while (i < N_DTYPES && strcmp(DTYPES[i].name, dt))
        i++;
      if (i == N_DTYPES) return fail(p, "tensor '%s' has the unknown dtype '%.20s'", t->name, dt);
      t->dtype = DTYPES[i].dtype;
      t->dtype_name = DTYPES[i].name;
    } else if (k == 1) {
      uint64_t dims[TG_MAX_DIMS];
      if (!int_array(p, dims, TG_MAX_DIMS, &t->ndim, "a shape")) return false;
      for (int d = 0; d < t->ndim; d++)
        t->shape[d] = (int64_t)dims[d];
    } else {
      uint64_t off[2];
      int n;
      if (!int_array(p, off, 2, &n, "data_offsets")) return false;
      if (n != 2) return fail(p, "tensor '%s': data_offsets needs 2 entries, has %d", t->name, n);
      t->begin = off[0];
      t->end = off[1];
    }
  } while (eat(p, ','));
  if (!expect(p, '}')) return false;
  if (!seen[0] || !seen[1] || !seen[2])
    return fail(p, "tensor '%s' lacks '%s'", t->name, !seen[0] ? "dtype" : !seen[1] ? "shape" : "data_offsets");
  return true;
}

static bool metadata(parser *p, tgi_st_meta **meta, size_t *n, size_t *cap) {
  if (!expect(p, '{')) return false;
  if (eat(p, '}')) return true;
  do {
    if (*n == *cap) {
      size_t nc = *cap ? 2 * *cap : 16;
      tgi_st_meta *nm = tgi_realloc(*meta, nc * sizeof *nm);
      if (!nm) return fail(p, "out of host memory");
      *meta = nm;
      *cap = nc;
    }
    tgi_st_meta *m = &(*meta)[*n];
    if (!string(p, &m->key) || !expect(p, ':')) return false;
    ws(p);
    if (p->i >= p->n || p->s[p->i] != '"') return fail(p, "metadata value of '%.60s' is not a string", m->key);
    if (!string(p, &m->value)) return false;
    (*n)++;
  } while (eat(p, ','));
  return expect(p, '}');
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const tgi_st_tensor *)a)->name, ((const tgi_st_tensor *)b)->name);
}
static int by_key(const void *a, const void *b) {
  return strcmp(((const tgi_st_meta *)a)->key, ((const tgi_st_meta *)b)->key);
}
static int by_offset(const void *a, const void *b) {
  const tgi_st_tensor *x = *(const tgi_st_tensor *const *)a, *y = *(const tgi_st_tensor *const *)b;
  return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : x->end < y->end ? -1 : x->end > y->end;
}

static unsigned dtype_size(const char *name) {
  for (size_t i = 0; i < N_DTYPES; i++)
    if (!strcmp(DTYPES[i].name, name)) return DTYPES[i].size;
  return 0;
}

/* Sizes, ranges and the exact tiling of the data section; false with why. */
static bool check_data(parser *p, tgi_st_header *h, uint64_t data_len) {
  for (size_t k = 0; k < h->n_tensors; k++) {
    tgi_st_tensor *t = &h->tensors[k];
    uint64_t bytes = dtype_size(t->dtype_name);
    for (int d = 0; d < t->ndim; d++) {
      uint64_t dim = (uint64_t)t->shape[d];
      if (dim && bytes > data_len / dim)
        return fail(p, "tensor '%s' (shape dim %d = %llu) is larger than the data section (%llu bytes)", t->name, d,
                    (unsigned long long)dim, (unsigned long long)data_len);
      bytes *= dim;
    }
    if (t->begin > t->end || t->end > data_len)
      return fail(p, "tensor '%s' has data_offsets [%llu, %llu] outside the data section of %llu bytes", t->name,
                  (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)data_len);
    if (t->end - t->begin != bytes)
      return fail(p, "tensor '%s' has data_offsets [%llu, %llu] (%llu bytes); its dtype and shape need %llu", t->name,
                  (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)(t->end - t->begin),
                  (unsigned long long)bytes);
  }
  const tgi_st_tensor **order = tgi_malloc((h->n_tensors ? h->n_tensors : 1) * sizeof *order);
  if (!order) return fail(p, "out of host memory");
  for (size_t k = 0; k < h->n_tensors; k++)
    order[k] = &h->tensors[k];
  if (h->n_tensors) qsort(order, h->n_tensors, sizeof *order, by_offset);
  uint64_t at = 0;
  bool ok = true;
  for (size_t k = 0; k < h->n_tensors && ok; k++) {
    if (order[k]->begin != at)
      ok = fail(p, "tensor '%s' starts at data byte %llu; the tensors must tile the data section (expected %llu)",
                order[k]->name, (unsigned long long)order[k]->begin, (unsigned long long)at);
    at = order[k]->end;
  }
  if (ok && at != data_len)
    ok = fail(p, "the tensors cover %llu bytes of a %llu-byte data section", (unsigned long long)at,
              (unsigned long long)data_len);
  free(order);
  return ok;
}

bool tgi_st_parse(const char *json, size_t len, uint64_t data_len, tgi_st_header *out, char *why, size_t cap) {
  memset(out, 0, sizeof *out);
  parser p = {(const unsigned char *)json, len, 0, tgi_malloc(len + 1), 0, why, cap, false};
  size_t tcap = 0, mcap = 0;
  bool have_meta = false;
  if (!p.store) return snprintf(why, cap, "out of host memory"), false;
  out->strings = p.store;
  if (len == 0 || json[0] != '{') {
    fail(&p, "the header does not start with '{'");
    goto bad;
  }
  p.i = 1;
  if (!eat(&p, '}')) {
    do {
      const char *name;
      if (!string(&p, &name) || !expect(&p, ':')) goto bad;
      if (!strcmp(name, "__metadata__")) {
        if (have_meta) {
          fail(&p, "__metadata__ appears twice");
          goto bad;
        }
        have_meta = true;
        if (!metadata(&p, &out->meta, &out->n_meta, &mcap)) goto bad;
        continue;
      }
      if (out->n_tensors == tcap) {
        size_t nc = tcap ? 2 * tcap : 64;
        tgi_st_tensor *nt = tgi_realloc(out->tensors, nc * sizeof *nt);
        if (!nt) {
          fail(&p, "out of host memory");
          goto bad;
        }
        out->tensors = nt;
        tcap = nc;
      }
      tgi_st_tensor *t = &out->tensors[out->n_tensors];
      memset(t, 0, sizeof *t);
      t->name = name;
      if (!tensor(&p, t)) goto bad;
      out->n_tensors++;
    } while (eat(&p, ','));
    if (!expect(&p, '}')) goto bad;
  }
  ws(&p);
  if (p.i != p.n) {
    fail(&p, "bytes after the header's closing brace");
    goto bad;
  }
  if (out->n_tensors) qsort(out->tensors, out->n_tensors, sizeof *out->tensors, by_name);
  for (size_t k = 1; k < out->n_tensors; k++)
    if (!strcmp(out->tensors[k].name, out->tensors[k - 1].name)) {
      fail(&p, "the tensor name '%s' appears twice", out->tensors[k].name);
      goto bad;
    }
  if (out->n_meta) qsort(out->meta, out->n_meta, sizeof *out->meta, by_key);
  for (size_t k = 1; k < out->n_meta; k++)
    if (!strcmp(out->meta[k].key, out->meta[k - 1].key)) {
      fail(&p, "the metadata key '%s' appears twice", out->meta[k].key);
      goto bad;
    }
  if (!check_data(&p, out, data_len)) goto bad;
  return true;
bad:
  tgi_st_free(out);
  return false;
}

void tgi_st_free(tgi_st_header *h) {
  free(h->tensors);
  free(h->meta);
  free(h->strings);
  memset(h, 0, sizeof *h);
}

const tgi_st_tensor *tgi_st_find(const tgi_st_header *h, const char *name) {
  tgi_st_tensor key;
  key.name = name;
  return h->n_tensors ? bsearch(&key, h->tensors, h->n_tensors, sizeof key, by_name) : NULL;
}

const char *tgi_st_meta_get(const tgi_st_header *h, const char *key) {
  tgi_st_meta k = {key, NULL};
  const tgi_st_meta *m = h->n_meta ? bsearch(&k, h->meta, h->n_meta, sizeof k, by_key) : NULL;
  return m ? m->value : NULL;
}
