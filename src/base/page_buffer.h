// A large zero-filled byte buffer taken straight from the kernel: an
// anonymous private mapping advised for transparent huge pages (aligned to
// 2 MiB when it spans one) and populated up front, as vector<uint8_t>(n, 0)
// is: a first touch inside a timed step would cost a page fault (a 2 MiB
// zeroing with huge pages), and bench-model's fresh stores measured 10%
// slower at pp8 when their pages were faulted in lazily.
// Why not std::vector: a KV pool of a few GiB filled through 4 KiB pages
// needs ~10^5-10^6 page-table entries. Every TLB miss
// walks them and, on a virtualised CPU with shadow page tables, each switch
// into the process on an idle vCPU paid for them: a server holding 1.4 GiB
// of pool in 4 KiB pages stalled 16 of 100 idle `GET /health` requests by
// 5-20 ms; with a 100 MB pool, none (docs/BENCHMARKS.md, twelfth session).
// Movable, not copyable. Thread-safety: the object is not synchronised; the
// bytes are plain memory.
#pragma once
#include <cstddef>
#include <cstdint>

namespace pc {

class PageBuffer {
 public:
  PageBuffer() = default;
  // bytes of zeros; throws std::bad_alloc when the mapping fails, as a
  // vector would. bytes 0 gives an empty buffer (data() nullptr).
  explicit PageBuffer(size_t bytes);
  PageBuffer(PageBuffer&& o) noexcept;
  PageBuffer& operator=(PageBuffer&& o) noexcept;
  PageBuffer(const PageBuffer&) = delete;
  PageBuffer& operator=(const PageBuffer&) = delete;
  ~PageBuffer();

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // Gives the whole small pages inside [offset, offset + bytes) back to the
  // kernel (they read as zeros afterwards); the buffer keeps its size.
  void Discard(size_t offset, size_t bytes);

  // The alignment of data() for buffers of at least this many bytes (huge
  // pages start on it); smaller ones are page-aligned.
  static constexpr size_t kHugeBytes = size_t{2} << 20;

 private:
  void Free();
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_bytes_ = 0;  // size_ rounded up to whole small pages
};

}  // namespace pc
