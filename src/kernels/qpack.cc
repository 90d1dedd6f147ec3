#include "kernels/qpack.h"

#include <cstring>
#include <vector>

#include "base/check.h"
#include "kernels/qpack_kernels.h"

namespace pc {

const X16Kernels* X16KernelsFor(Isa isa) {
  if (isa >= Isa::kAvx512) {
    if (const X16Kernels* k = Avx512X16Kernels()) return k;
  }
  if (isa == Isa::kAvxVnni) return AvxVnniX16Kernels();
  return isa >= Isa::kAvx2 ? Avx2X16Kernels() : nullptr;
}

namespace {

// Stored q of the x16 layout: the grid index for the grid formats (the
// first index of that value: MXFP4's -0 comes back as +0).
int StoredQ(const DecodedBlock& d, int e, Grid grid) {
  if (grid == Grid::kNone) return d.q[e];
  const int8_t* values = GridValues(grid);
  for (int i = 0; i < 16; ++i) {
    if (values[i] + 128 == d.q[e]) return i;
  }
  PC_CHECK(false);
  return 0;
}

void Put(const X16Layout& l, uint8_t* blk, int r, int e, int q) {
  uint8_t* low = blk + l.low;
  const int k = e % 4;
  if (l.bits == 8) {
    low[(e / 4) * 64 + r * 4 + k] = static_cast<uint8_t>(q);
    return;
  }
  if (l.bits >= 4) {
    low[(e / 8) * 64 + r * 4 + k] |= static_cast<uint8_t>((q & 15) << ((e % 8) / 4 * 4));
  } else {
    low[(e / 16) * 64 + r * 4 + k] |= static_cast<uint8_t>((q & 3) << ((e % 16) / 4 * 2));
  }
  uint8_t* high = blk + l.high;
  if (l.bits == 5 || l.bits == 3) {
    const int bit = (q >> (l.bits == 5 ? 4 : 2)) & 1;
    high[(e / 32) * 64 + r * 4 + k] |= static_cast<uint8_t>(bit << ((e % 32) / 4));
  } else if (l.bits == 6) {
    high[(e / 16) * 64 + r * 4 + k] |= static_cast<uint8_t>(((q >> 4) & 3) << ((e % 16) / 4 * 2));
  }
}

int Get(const X16Layout& l, const uint8_t* blk, int r, int e) {
  const uint8_t* low = blk + l.low;
  const int k = e % 4;
  if (l.bits == 8) return low[(e / 4) * 64 + r * 4 + k];
  int q;
  if (l.bits >= 4) {
    q = (low[(e / 8) * 64 + r * 4 + k] >> ((e % 8) / 4 * 4)) & 15;
  } else {
    q = (low[(e / 16) * 64 + r * 4 + k] >> ((e % 16) / 4 * 2)) & 3;
  }
  const uint8_t* high = blk + l.high;
  if (l.bits == 5 || l.bits == 3) {
    const int bit = (high[(e / 32) * 64 + r * 4 + k] >> ((e % 32) / 4)) & 1;
    q |= bit << (l.bits == 5 ? 4 : 2);
  } else if (l.bits == 6) {
    q |= ((high[(e / 16) * 64 + r * 4 + k] >> ((e % 16) / 4 * 2)) & 3) << 4;
  }
  return q;
}

}  // namespace

void RepackX16(TensorType t, const uint8_t* rows, size_t row_bytes, size_t nb, uint8_t* out) {
  const X16Layout l = X16LayoutOf(t);
  PC_CHECK(l.n > 0);
  const size_t bb = BlockBytes(t);
  DecodedBlock d;
  for (size_t b = 0; b < nb; ++b) {
    uint8_t* blk = out + b * l.bytes;
    std::memset(blk, 0, l.bytes);
    auto* dh = reinterpret_cast<uint16_t*>(blk);
    auto* mh = reinterpret_cast<uint16_t*>(blk + l.mh);
    for (int r = 0; r < 16; ++r) {
      DecodeBlock(t, rows + static_cast<size_t>(r) * row_bytes + b * bb, &d);
      std::memcpy(dh + r, &d.dh, 2);
      if (l.has_min) std::memcpy(mh + r, &d.mh, 2);
      for (int j = 0; l.sub_scales && j < l.n / l.sub; ++j) {
        blk[l.sc + static_cast<size_t>(j) * 16 + r] = static_cast<uint8_t>(static_cast<int8_t>(d.sc[j]));
        if (l.sub_mins) blk[l.mn + static_cast<size_t>(j) * 16 + r] = static_cast<uint8_t>(d.mn[j]);
      }
      for (int e = 0; e < l.n; ++e) Put(l, blk, r, e, StoredQ(d, e, l.grid));
    }
  }
}

void UnpackX16Row(TensorType t, const uint8_t* group, size_t nb, int r, uint8_t* row_out) {
  const X16Layout l = X16LayoutOf(t);
  PC_CHECK(l.n > 0 && r >= 0 && r < 16);
  const size_t bb = BlockBytes(t);
  PC_CHECK(bb <= kMaxBlockBytes);
  static constexpr uint8_t zero[kMaxBlockBytes] = {};
  DecodedBlock d;
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* blk = group + b * l.bytes;
    DecodeBlock(t, zero, &d);  // the format's constants
    std::memcpy(&d.dh, blk + 2 * r, 2);
    if (l.has_min) std::memcpy(&d.mh, blk + l.mh + 2 * r, 2);
    for (int j = 0; l.sub_scales && j < l.n / l.sub; ++j) {
      d.sc[j] = static_cast<int8_t>(blk[l.sc + static_cast<size_t>(j) * 16 + r]);
      if (l.sub_mins) d.mn[j] = blk[l.mn + static_cast<size_t>(j) * 16 + r];
    }
    for (int e = 0; e < l.n; ++e) {
      const int q = Get(l, blk, r, e);
      d.q[e] = static_cast<uint8_t>(l.table ? GridValues(l.grid)[q] + 128 : q);
    }
    EncodeBlock(t, d, row_out + b * bb);
  }
}

}  // namespace pc
