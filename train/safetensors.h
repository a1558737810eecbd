/*
 * train/safetensors.h — a strict parser of the safetensors JSON header (checkpoint.c's reader).
 * Not installed. No tape dependency, so a fuzzer can drive it alone.
 *
 * The header is one JSON object: "__metadata__" (optional) maps strings to strings; every other
 * member is a tensor {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]} with exactly
 * those three keys. Accepted: RFC 8259 JSON of that shape (whitespace anywhere between tokens,
 * escapes incl. \uXXXX surrogate pairs, UTF-8 checked). Refused: anything else (other value
 * types, duplicate keys or tensor names, numbers with a sign, fraction, exponent or leading zero,
 * integers above 2^63 - 1, \u0000, more than TG_MAX_DIMS dims, unknown dtype strings, bytes after
 * the closing brace other than whitespace). The data section is checked against the tensors:
 * end - begin = numel * element size, and the tensors tile [0, data_len) exactly, as the
 * safetensors format requires. Every size is bounded by the input lengths; nothing recurses.
 */
#ifndef TIGA_TRAIN_SAFETENSORS_H
#define TIGA_TRAIN_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tiga.h"

/* Header sizes above this are refused (safetensors' own limit). */
#define TGI_ST_MAX_HEADER ((uint64_t)100 * 1000 * 1000)

typedef struct tgi_st_tensor {
  const char *name; /* NUL-terminated, in the header's string store */
  int dtype;        /* tg_dtype, or -1 for a safetensors dtype tiga has no tg_dtype for */
  const char *dtype_name;
  int ndim;
  int64_t shape[TG_MAX_DIMS];
  uint64_t begin, end; /* byte range in the data section */
} tgi_st_tensor;

typedef struct tgi_st_meta {
  const char *key, *value; /* NUL-terminated */
} tgi_st_meta;

typedef struct tgi_st_header {
  tgi_st_tensor *tensors; /* sorted by name */
  size_t n_tensors;
  tgi_st_meta *meta; /* sorted by key */
  size_t n_meta;
  char *strings; /* store of every unescaped string */
} tgi_st_header;

/* Parses json[0, len) and checks it against a data section of data_len bytes. true on success;
 * false with why (cap bytes) and nothing to free. */
bool tgi_st_parse(const char *json, size_t len, uint64_t data_len, tgi_st_header *out, char *why, size_t cap);
void tgi_st_free(tgi_st_header *h);
/* Lookups by exact name / key (binary search); NULL when absent. */
const tgi_st_tensor *tgi_st_find(const tgi_st_header *h, const char *name);
const char *tgi_st_meta_get(const tgi_st_header *h, const char *key);
/* The safetensors dtype string of a tg_dtype ("F32", ...). */
const char *tgi_st_dtype_name(tg_dtype dt);

#endif
