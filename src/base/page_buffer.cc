#include "base/page_buffer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <new>

namespace pc {

PageBuffer::PageBuffer(size_t bytes) {
  if (bytes == 0) return;
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t want = (bytes + page - 1) / page * page;
  if (want < bytes || want > SIZE_MAX - kAlignBytes) throw std::bad_alloc();
  // Map an alignment's worth more, then unmap the unaligned head and the
  // surplus tail, so the buffer starts on a huge-page boundary.
  const size_t span = want + kAlignBytes;
  void* p = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  const auto base = reinterpret_cast<uintptr_t>(p);
  const uintptr_t start = (base + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  if (start > base) ::munmap(p, start - base);
  const uintptr_t end = start + want, span_end = base + span;
  if (span_end > end) ::munmap(reinterpret_cast<void*>(end), span_end - end);
  data_ = reinterpret_cast<uint8_t*>(start);
  size_ = bytes;
  mapped_bytes_ = want;
  // Advice only: where transparent huge pages are off (or the kernel lacks
  // them) the buffer works with small pages.
  ::madvise(data_, mapped_bytes_, MADV_HUGEPAGE);
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

void PageBuffer::Free() {
  if (data_ != nullptr) ::munmap(data_, mapped_bytes_);
  data_ = nullptr;
  size_ = mapped_bytes_ = 0;
}

}  // namespace pc
