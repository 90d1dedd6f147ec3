// Built with -mavx2 -mfma; called only when the CPU has them.
#include <immintrin.h>

#include <cstddef>

namespace pc {

double FmaLoopAvx2(size_t iters, float* sink) {
  // Ten independent chains hide the FMA latency (4 cycles x 2 ports).
  __m256 acc[10];
  for (__m256& a : acc) a = _mm256_set1_ps(1.0f);
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (size_t it = 0; it < iters; ++it) {
    for (__m256& a : acc) a = _mm256_fmadd_ps(a, m, c);
  }
  __m256 s = acc[0];
  for (int k = 1; k < 10; ++k) s = _mm256_add_ps(s, acc[k]);
  float out[8];
  _mm256_storeu_ps(out, s);
  *sink = out[0];
  return 2.0 * 8 * 10 * static_cast<double>(iters);
}

}  // namespace pc
