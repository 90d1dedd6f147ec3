// The avx2 table's attention entries (dot.h): attention_avx2_body.h with
// the AVX2 byte products. Compiled with -mavx2 -mfma -mf16c only.
#include "kernels/dot.h"

namespace pc {
namespace {
constexpr bool kVnni = false;
}  // namespace
}  // namespace pc

#include "kernels/attention_avx2_body.h"

namespace pc {

void Avx2AttendLanes(const LaneGroup* groups, size_t n, const float* k, const float* v, size_t head_dim) {
  AttendLanesImpl(groups, n, k, v, head_dim);
}

void Avx2AttendCols(const float* q, const QueryQ8& q8, size_t nq, size_t group, const KvTile& kv, size_t head_dim,
                    size_t first, size_t nv, float* scratch, float* m, float* l, float* acc) {
  AttendColsImpl(q, q8, nq, group, kv, head_dim, first, nv, scratch, m, l, acc);
}

void Avx2AttendLanesQ8(const LaneGroup* groups, size_t n, const uint8_t* const* krows, const float* v, size_t head_dim) {
  AttendLanesQ8Impl(groups, n, krows, v, head_dim);
}

}  // namespace pc
