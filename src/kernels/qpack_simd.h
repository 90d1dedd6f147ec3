// The x16 matmul kernel of every quantized type, written once over a SIMD
// traits class S (qpack_avx2.cc, qpack_avx512.cc define one each and
// include this file; it must never be included elsewhere, since its code is
// compiled for the including file's instruction set).
//
// S has S::kLanes 32-bit lanes (16, or 8 for one half of the rows) and:
//   V Load(p)          its lanes' part of a 64-byte [16 rows][4 bytes] vector
//   V LanesU8(p), LanesI8(p)   16 bytes (one per row) -> int32 lanes
//   F LanesF16(p)      16 fp16 (one per row) -> float lanes; LanesBf16 the same from bf16
//   V DotU(acc, w, x4) acc += per lane sum of 4 (w unsigned byte * x signed byte)
//   V DotS(acc, w, x4) the same with signed w (|w| <= 128)
//   bool kVnni         DotU is exact for any unsigned byte (else w < 128 only)
//   bool kI16Acc       has the 16-bit lane path below (maddubs without VNNI):
//   V Dot16(acc, w, x4)  acc += per 16-bit lane sum of 2 (w unsigned * x), unsaturated
//   V Widen(a16, b16)  per lane a.lo * b.lo + a.hi * b.hi (int16 halves, exact in int32)
//   V Pairs16(p)       bytes (one per row) sign-extended into both int16 halves
//   V Ones16()         1 in every int16 half
//   integer ops And, Or, Xor8, Srl16/Sll16/Srl32/Sll32<N>, Add, Sub, MulLo,
//   Set1x8, Set1x32, Lut(idx, table) (a 16-entry byte table per 128 bits), float ops
//   Cvt, Mul, Add, Set1, Neg, Store(float* y16, F): its lanes of 16 floats.
#pragma once
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/qpack.h"

namespace pc {
// Internal linkage: the two including files compile this code for different
// instruction sets, and the linker must never swap one copy for the other.
namespace {
namespace x16 {

template <int... I, class F>
inline void StaticFor(std::integer_sequence<int, I...>, F&& f) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, class F>
inline void StaticFor(F&& f) {
  StaticFor(std::make_integer_sequence<int, N>{}, f);
}

inline int32_t Load4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Vector vl (0..7) of 32-element chunk c: elements 32c + 4vl .. +3 of every
// lane's row, as unsigned bytes (q, or the grid value + 128), or as signed
// values (q - offset) when Signed.
template <class S, X16Layout L, bool Signed, int VL>
inline typename S::V Unpack(const uint8_t* blk, size_t c) {
  using V = typename S::V;
  const uint8_t* low = blk + L.low;
  V q;
  if constexpr (L.bits == 8) {
    q = S::Load(low + (c * 8 + VL) * 64);
    return Signed ? S::Xor8(q, 0x80) : q;  // stored q + 128
  } else if constexpr (L.bits >= 4) {
    const V raw = S::Load(low + (c * 4 + VL / 2) * 64);
    q = S::And(VL % 2 == 0 ? raw : S::template Srl16<4>(raw), S::Set1x8(0x0F));
  } else {
    const V raw = S::Load(low + (c * 2 + VL / 4) * 64);
    q = S::And(S::template Srl16<2 * (VL % 4)>(raw), S::Set1x8(0x03));
  }
  if constexpr (L.bits == 5 || L.bits == 3) {
    // Bit VL of each byte of the plane moves to bit 4 (Q5) or 2 (Q3_K); the
    // mask drops what the 32-bit shift brought in from neighbouring bytes.
    constexpr int kTo = L.bits == 5 ? 4 : 2;
    const V plane = S::Load(blk + L.high + c * 64);
    V bit;
    if constexpr (VL >= kTo) bit = S::template Srl32<VL - kTo>(plane);
    else bit = S::template Sll32<kTo - VL>(plane);
    q = S::Or(q, S::And(bit, S::Set1x8(static_cast<char>(1 << kTo))));
  } else if constexpr (L.bits == 6) {
    const V raw = S::Load(blk + L.high + (c * 2 + VL / 4) * 64);
    constexpr int kShift = 4 - 2 * (VL % 4);  // bits 2k..2k+1 to 4..5
    V hi;
    if constexpr (kShift > 0) hi = S::template Sll16<kShift>(raw);
    else if constexpr (kShift < 0) hi = S::template Srl16<-kShift>(raw);
    else hi = raw;
    q = S::Or(q, S::And(hi, S::Set1x8(0x30)));
  }
  if constexpr (L.table) return S::Lut(q, Signed ? static_cast<const void*>(GridValues(L.grid)) : GridValuesPlus128(L.grid));
  if constexpr (Signed) return S::Sub8(q, static_cast<char>(L.offset));
  return q;
}

template <bool K>
using ActBlock = std::conditional_t<K, BlockQ8_K, BlockQ8A>;

// Sum of the activation values of sub-block j.
template <X16Layout L>
inline int32_t XSum(const ActBlock<L.n == 256>& x, int j) {
  if constexpr (L.n == 32) return x.sum;
  else if constexpr (L.sub == 16) return x.bsums[j];
  else return x.bsums[2 * j] + x.bsums[2 * j + 1];
}

// Vectors whose maddubs products the kernel sums in 16-bit lanes before
// widening them once (0: not this way). Unsigned weights of `bits` bits give
// pair sums of at most 2 * (2^bits - 1) * 127, so a group of g vectors stays
// below 2^15 while g * that does: Q4 (8 vectors, 30,480), Q5 (4), Q2 (all).
// The widening multiplies by the sub-block scale at once; formats whose
// offset would need that scale too (Q6_K, Q3_K), the signed and the grid
// ones keep the 32-bit path.
template <class S, X16Layout L, bool Signed>
constexpr int I16Group() {
  if constexpr (!S::kI16Acc || Signed || L.table || (L.offset != 0 && L.sub_scales)) {
    return 0;
  } else {
    const int pair_max = 2 * ((1 << L.bits) - 1) * 127, vecs = L.sub / 4;
    int best = 0;
    for (int g = 1; g <= vecs; ++g) {
      if (vecs % g == 0 && g * pair_max <= 32767) best = g;
    }
    return best >= 2 ? best : 0;
  }
}

// One sub-block j of chunk c through the 16-bit lanes (I16Group above): the
// integer sums of every token, scaled by the sub-block's scale if it has one,
// into a[t]; the minimum's product into m[t].
template <class S, TensorType T, int NT, int JS, class XB>
inline void SubBlock16(const uint8_t* blk, size_t c, int j, const XB* const* xb, typename S::V* a, typename S::V* m) {
  using V = typename S::V;
  constexpr X16Layout L = X16LayoutFor(T);
  constexpr int kVecPerSub = L.sub / 4, kGroup = I16Group<S, L, false>();
  const V scale = L.sub_scales ? S::Pairs16(blk + L.sc + static_cast<size_t>(j) * 16) : S::Ones16();
  V part[NT];
  for (int t = 0; t < NT; ++t) part[t] = S::Zero();
  StaticFor<kVecPerSub / kGroup>([&](auto g) {
    V h[NT];
    for (int t = 0; t < NT; ++t) h[t] = S::Zero();
    StaticFor<kGroup>([&](auto vv) {
      constexpr int kVl = JS * kVecPerSub + decltype(g)::value * kGroup + decltype(vv)::value;
      const V w = Unpack<S, L, false, kVl>(blk, c);
      for (int t = 0; t < NT; ++t) h[t] = S::Dot16(h[t], w, Load4(xb[t]->qs + c * 32 + kVl * 4));
    });
    for (int t = 0; t < NT; ++t) part[t] = S::Add(part[t], S::Widen(h[t], scale));
  });
  for (int t = 0; t < NT; ++t) {
    const int32_t xs = XSum<L>(*xb[t], j);
    if constexpr (L.offset != 0) part[t] = S::Sub(part[t], S::Set1x32(L.offset * xs));  // no sub-scales here
    a[t] = L.sub_scales ? S::Add(a[t], part[t]) : part[t];
    // A minimum's lanes are (min, 0) as int16 halves and |xs| < 2^15.
    if constexpr (L.sub_mins) m[t] = S::Add(m[t], S::Widen(S::LanesU8(blk + L.mn + static_cast<size_t>(j) * 16), S::Set1x32(xs)));
    else if constexpr (L.has_min) m[t] = S::Set1x32(xs);
  }
}

// NG consecutive groups (group + g * gb: rows [0, 16 NG)) against NT
// activation rows. With NG = 2 every activation broadcast serves 32 rows
// instead of 16: broadcasts share the vector pipes with the products on
// current cores (a Zen 5 core runs two vpdpbusd a cycle from registers, one
// a cycle with a broadcast each), so halving them raises the products'
// rate. Pairs take the 32-bit path only (16-bit lanes would not leave the
// registers for both groups' sums). Each output's operations are the same,
// in the same order, whatever NG: the same bits.
template <class S, TensorType T, int NT, int NG>
void KernelGroups(const uint8_t* group, size_t gb, size_t nb, const uint8_t* x, size_t x_stride, float* y,
                  size_t y_stride, const uint8_t* pf, size_t pf_lines) {
  using V = typename S::V;
  using F = typename S::F;
  constexpr X16Layout L = X16LayoutFor(T);
  // Without VNNI, maddubs would saturate on bytes past 127: those formats
  // (Q8_0, the grid ones) take signed products instead, offsets applied.
  constexpr bool kSigned = !S::kVnni && (L.bits == 8 || L.table);
  constexpr bool kI16 = I16Group<S, L, kSigned>() > 0;
  static_assert(NG == 1 || !kI16);
  constexpr int kSubsPerChunk = 32 / L.sub, kVecPerSub = L.sub / 4;
  using XB = ActBlock<L.n == 256>;
  F acc[NG][NT];
  for (int g = 0; g < NG; ++g) {
    for (int t = 0; t < NT; ++t) acc[g][t] = S::ZeroF();
  }
  size_t pf_due = 0;
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* blk[NG];
    for (int g = 0; g < NG; ++g) {
      blk[g] = group + static_cast<size_t>(g) * gb + b * L.bytes;
      S::Prefetch(blk[g] + 4 * L.bytes);
    }
    // pf_lines spread evenly over nb blocks without a division per block.
    for (pf_due += pf_lines; pf_due >= nb; pf_due -= nb, pf += 64) __builtin_prefetch(pf, 0, 2);
    const XB* xb[NT];
    for (int t = 0; t < NT; ++t) xb[t] = reinterpret_cast<const XB*>(x + t * x_stride) + b;
    V a[NG][NT], m[NG][NT];
    for (int g = 0; g < NG; ++g) {
      for (int t = 0; t < NT; ++t) a[g][t] = m[g][t] = S::Zero();
    }
    for (size_t c = 0; c < static_cast<size_t>(L.n / 32); ++c) {
      StaticFor<kSubsPerChunk>([&](auto js) {
        const int j = static_cast<int>(c) * kSubsPerChunk + js;
        if constexpr (kI16) {
          SubBlock16<S, T, NT, decltype(js)::value>(blk[0], c, j, xb, a[0], m[0]);
          return;
        }
        V isum[NG][NT];
        for (int g = 0; g < NG; ++g) {
          for (int t = 0; t < NT; ++t) isum[g][t] = S::Zero();
        }
        StaticFor<kVecPerSub>([&](auto vv) {
          constexpr int kVl = decltype(js)::value * kVecPerSub + decltype(vv)::value;
          V w[NG];
          for (int g = 0; g < NG; ++g) w[g] = Unpack<S, L, kSigned, kVl>(blk[g], c);
          for (int t = 0; t < NT; ++t) {
            const int32_t x4 = Load4(xb[t]->qs + c * 32 + kVl * 4);
            for (int g = 0; g < NG; ++g) isum[g][t] = kSigned ? S::DotS(isum[g][t], w[g], x4) : S::DotU(isum[g][t], w[g], x4);
          }
        });
        for (int t = 0; t < NT; ++t) {
          const int32_t xs = XSum<L>(*xb[t], j);
          for (int g = 0; g < NG; ++g) {
            V s = isum[g][t];
            if constexpr (!kSigned && L.offset != 0) s = S::Sub(s, S::Set1x32(L.offset * xs));
            if constexpr (L.sub_scales) {
              a[g][t] = S::Add(a[g][t], S::MulLo(S::LanesI8(blk[g] + L.sc + static_cast<size_t>(j) * 16), s));
            } else {
              a[g][t] = s;
            }
            if constexpr (L.sub_mins) {
              m[g][t] = S::Add(m[g][t], S::MulLo(S::LanesU8(blk[g] + L.mn + static_cast<size_t>(j) * 16), S::Set1x32(xs)));
            } else if constexpr (L.has_min) {
              m[g][t] = S::Set1x32(xs);
            }
          }
        }
      });
    }
    for (int g = 0; g < NG; ++g) {
      const F d = L.bf16_scale ? S::LanesBf16(reinterpret_cast<const uint16_t*>(blk[g]))
                               : S::LanesF16(reinterpret_cast<const uint16_t*>(blk[g]));
      F mm = S::ZeroF();
      if constexpr (L.has_min) {
        mm = S::LanesF16(reinterpret_cast<const uint16_t*>(blk[g] + L.mh));
        if constexpr (L.n == 256) mm = S::Neg(mm);  // K-quants subtract their minimum
      }
      for (int t = 0; t < NT; ++t) {
        const F dx = S::Set1(xb[t]->d);
        F tt = S::Mul(S::Cvt(a[g][t]), S::Mul(d, dx));
        if constexpr (L.has_min) tt = S::AddF(tt, S::Mul(S::Cvt(m[g][t]), S::Mul(mm, dx)));
        acc[g][t] = S::AddF(acc[g][t], tt);
      }
    }
  }
  for (int g = 0; g < NG; ++g) {
    for (int t = 0; t < NT; ++t) S::Store(y + t * y_stride + kX16Rows * static_cast<size_t>(g), acc[g][t]);
  }
}

// The next rows' lines a caller asks for (pf, pf_lines: qpack.h) shared out
// over the `passes` passes a runner makes over one group (or pair): pass p
// takes its share, spread over its blocks. Issued in the first pass alone,
// they came as a burst the memory system queued while that pass waited, and
// the later passes fetched nothing: a GEMM streaming its weights from memory
// (kernels_bench BM_Gemm/Q8_0x16_stream_Avx512, 25 tokens over 60 MB, a Zen 5)
// ran at a median 392 GFLOP/s with the burst and 429 spread (ten alternating
// runs; the same product from cache ~540).
struct PassLines {
  const uint8_t* pf;
  size_t lines;
};
inline PassLines ShareOfPass(const uint8_t* pf, size_t pf_lines, size_t pass, size_t passes) {
  const size_t first = pass * pf_lines / passes;
  return {pf + 64 * first, (pass + 1) * pf_lines / passes - first};
}

template <class S, TensorType T, int NT>
void Kernel(const uint8_t* group, size_t nb, const uint8_t* x, size_t x_stride, float* y, size_t y_stride,
            const uint8_t* pf = nullptr, size_t pf_lines = 0) {
  KernelGroups<S, T, NT, 1>(group, 0, nb, x, x_stride, y, y_stride, pf, pf_lines);
}

}  // namespace x16
}  // namespace
}  // namespace pc
