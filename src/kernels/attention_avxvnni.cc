// The avxvnni table's attention entries (dot.h): attention_avx2_body.h with
// 8-bit K's integer dots in the VEX vpdpbusd (the F32/F16 paths as at the
// avx2 level). Compiled with -mavx2 -mfma -mf16c -mavxvnni.
#include "kernels/dot.h"

namespace pc {
namespace {
constexpr bool kVnni = true;
}  // namespace
}  // namespace pc

#include "kernels/attention_avx2_body.h"

namespace pc {

void AvxVnniAttendLanes(const LaneGroup* groups, size_t n, const float* k, const float* v, size_t head_dim) {
  AttendLanesImpl(groups, n, k, v, head_dim);
}

void AvxVnniAttendCols(const float* q, const QueryQ8& q8, size_t nq, size_t group, const KvTile& kv,
                       size_t head_dim, size_t first, size_t nv, float* scratch, float* m, float* l, float* acc) {
  AttendColsImpl(q, q8, nq, group, kv, head_dim, first, nv, scratch, m, l, acc);
}

void AvxVnniAttendLanesQ8(const LaneGroup* groups, size_t n, const uint8_t* const* krows, const float* v, size_t head_dim) {
  AttendLanesQ8Impl(groups, n, krows, v, head_dim);
}

}  // namespace pc
