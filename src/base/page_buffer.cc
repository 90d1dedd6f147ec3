#include "base/page_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <new>

namespace pc {

PageBuffer::PageBuffer(size_t bytes) {
  if (bytes == 0) return;
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t want = (bytes + page - 1) / page * page;
  if (want < bytes || want > SIZE_MAX - kHugeBytes) throw std::bad_alloc();
  // Map an alignment's worth more, then unmap the unaligned head and the
  // surplus tail, so a buffer that can hold a huge page starts on one.
  const size_t align = want >= kHugeBytes ? kHugeBytes : page;
  const size_t span = want + align - page;
  void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const auto base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t start = (base + align - 1) / align * align;
  if (start > base) ::munmap(p, start - base);
  const uintptr_t end = start + want, span_end = base + span;
  if (span_end > end) ::munmap(reinterpret_cast<void*>(end), span_end - end);
  data_ = reinterpret_cast<uint8_t*>(start);
  size_ = bytes;
  mapped_bytes_ = want;
  // Advice only: where transparent huge pages are off (or the kernel lacks
  // them) the buffer works with small pages.
  if (align == kHugeBytes) ::madvise(data_, mapped_bytes_, MADV_HUGEPAGE);
  // Populate now. Kernels before 5.14 lack the advice (EINVAL): touch every
  // page. Any other failure is memory the kernel cannot give: bad_alloc, as
  // a vector would throw, rather than a fault later.
  if (::madvise(data_, mapped_bytes_, MADV_POPULATE_WRITE) != 0) {
    if (errno != EINVAL) {
      Free();
      throw std::bad_alloc();
    }
    for (size_t off = 0; off < mapped_bytes_; off += page) static_cast<volatile uint8_t*>(data_)[off] = 0;
  }
}

PageBuffer::PageBuffer(PageBuffer&& o) noexcept
    : data_(o.data_), size_(o.size_), mapped_bytes_(o.mapped_bytes_) {
  o.data_ = nullptr;
  o.size_ = o.mapped_bytes_ = 0;
}

PageBuffer& PageBuffer::operator=(PageBuffer&& o) noexcept {
  if (this != &o) {
    Free();
    data_ = o.data_;
    size_ = o.size_;
    mapped_bytes_ = o.mapped_bytes_;
    o.data_ = nullptr;
    o.size_ = o.mapped_bytes_ = 0;
  }
  return *this;
}

PageBuffer::~PageBuffer() { Free(); }

void PageBuffer::Discard(size_t offset, size_t bytes) {
  if (data_ == nullptr || offset >= size_) return;
  bytes = std::min(bytes, size_ - offset);
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(data_) + offset;
  const uintptr_t first = (begin + page - 1) / page * page, last = (begin + bytes) / page * page;
  if (first < last) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

void PageBuffer::Free() {
  if (data_ != nullptr) ::munmap(data_, mapped_bytes_);
  data_ = nullptr;
  size_ = mapped_bytes_ = 0;
}

}  // namespace pc
