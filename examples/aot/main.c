/* Two kernels compiled ahead of time by `kiln compile --emit obj --header`, linked into a plain
 * C program with no Kiln library (see README.md beside this file):
 *   rms.o / rms.h    rmsnorm 64x300, eps 1e-5, symbols rms_*
 *   attn.o / attn.h  split-KV decode attention 1,4,2,1,600,64,64 (two phases, workspaces), attn_*
 * The program fills its own inputs, checks RMSNorm against a plain double loop, and writes the
 * attention inputs and output as NumPy .npy files into the directory given as argv[1], so that
 * `kiln run --input ... --output ...` can be compared with it bit for bit. Exit 0 when all is well. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attn.h"
#include "rms.h"

static void fill(float* v, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    v[i] = (float)(seed >> 8) / 8388608.0f - 1.0f;
  }
}

/* A float32, C-order .npy file (format version 1.0). */
static int write_npy(const char* dir, const char* name, const float* data, const int64_t* shape, int rank) {
  char path[4096], dict[256], dims[128] = "";
  size_t n = 1;
  for (int i = 0; i < rank; ++i) {
    char d[32];
    snprintf(d, sizeof d, "%lld,%s", (long long)shape[i], i + 1 < rank || rank == 1 ? " " : "");
    strcat(dims, d);
    n *= (size_t)shape[i];
  }
  int len = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", dims);
  int total = 10 + len + 1;
  int pad = (64 - total % 64) % 64;
  snprintf(path, sizeof path, "%s/%s.npy", dir, name);
  FILE* f = fopen(path, "wb");
  if (!f) return -1;
  unsigned short header_len = (unsigned short)(len + pad + 1);
  fwrite("\x93NUMPY\x01\x00", 1, 8, f);
  fwrite(&header_len, 2, 1, f); /* little-endian host */
  fwrite(dict, 1, (size_t)len, f);
  for (int i = 0; i < pad; ++i) fputc(' ', f);
  fputc('\n', f);
  size_t wrote = fwrite(data, sizeof(float), n, f);
  return fclose(f) == 0 && wrote == n ? 0 : -1;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  /* RMSNorm against a double loop. */
  static float x[RMS_X_ELEMENTS], w[RMS_W_ELEMENTS], y[RMS_Y_ELEMENTS];
  const int64_t xs[] = RMS_X_SHAPE;
  const int64_t rows = xs[0], cols = xs[1];
  fill(x, RMS_X_ELEMENTS, 1);
  fill(w, RMS_W_ELEMENTS, 2);
  if (rms_run(x, w, y) != 0) return 1;
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < cols; ++c) ss += (double)x[r * cols + c] * x[r * cols + c];
    double inv = 1.0 / sqrt(ss / (double)cols + 1e-5);
    for (int64_t c = 0; c < cols; ++c) {
      double want = x[r * cols + c] * inv * w[c];
      double err = fabs(want - y[r * cols + c]) / (fabs(want) + 1e-3);
      if (err > worst) worst = err;
    }
  }
  printf("rms: %lld blocks, worst relative error %.3g against a double loop\n", (long long)rms_num_blocks, worst);
  if (worst > 1e-5) {
    fprintf(stderr, "rms: disagrees with the loop\n");
    return 1;
  }

  /* Attention: two phases and a workspace, all inside attn_run. */
  static float q[ATTN_Q_ELEMENTS], k[ATTN_K_ELEMENTS], v[ATTN_V_ELEMENTS], o[ATTN_O_ELEMENTS];
  fill(q, ATTN_Q_ELEMENTS, 3);
  fill(k, ATTN_K_ELEMENTS, 4);
  fill(v, ATTN_V_ELEMENTS, 5);
  if (attn_run(q, k, v, o) != 0) return 1;
  printf("attn: %lld phases, %lld blocks, %d workspace(s), o[0] = %.6f\n", (long long)attn_num_phases,
         (long long)attn_num_blocks, ATTN_NUM_WORKSPACES, o[0]);
  const int64_t qs[] = ATTN_Q_SHAPE, ks[] = ATTN_K_SHAPE, vs[] = ATTN_V_SHAPE, os[] = ATTN_O_SHAPE;
  if (write_npy(argv[1], "q", q, qs, ATTN_Q_RANK) || write_npy(argv[1], "k", k, ks, ATTN_K_RANK) ||
      write_npy(argv[1], "v", v, vs, ATTN_V_RANK) || write_npy(argv[1], "o", o, os, ATTN_O_RANK)) {
    fprintf(stderr, "cannot write the .npy files into %s\n", argv[1]);
    return 1;
  }
  printf("aot: ok\n");
  return 0;
}
