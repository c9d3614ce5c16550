#include "runtime/base/huge_page_memory.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "runtime/base/logging.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace splitspec {
namespace {

size_t RoundUp(size_t bytes, size_t multiple) { return (bytes + multiple - 1) / multiple * multiple; }

// Zeroed, kCacheLineBytes-aligned heap memory (small buffers; non-Linux large ones with
// `alignment` = kHugePageBytes).
void* AlignedHeap(size_t bytes, size_t alignment) {
  const size_t size = RoundUp(bytes == 0 ? 1 : bytes, alignment);
  void* pointer = std::aligned_alloc(alignment, size);
  SPLITSPEC_CHECK(pointer != nullptr) << "out of memory allocating " << size << " bytes";
  std::memset(pointer, 0, size);
  return pointer;
}

}  // namespace

void* AllocateHugePageAligned(size_t bytes) {
  if (bytes < kHugePageBytes) return AlignedHeap(bytes, kCacheLineBytes);
#if defined(__linux__)
  // Map one huge page more than needed, then unmap the head before the first 2 MiB
  // boundary and the tail after the rounded size: the kernel only backs whole, aligned
  // 2 MiB ranges with huge pages.
  const size_t size = RoundUp(bytes, kHugePageBytes);
  const size_t mapped = size + kHugePageBytes;
  void* region = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  SPLITSPEC_CHECK(region != MAP_FAILED)
      << "out of memory mapping " << mapped << " bytes: " << std::strerror(errno);
  const auto start = reinterpret_cast<uintptr_t>(region);
  const uintptr_t aligned = RoundUp(start, kHugePageBytes);
  if (aligned > start) munmap(region, aligned - start);
  const size_t tail = mapped - (aligned - start) - size;
  if (tail > 0) munmap(reinterpret_cast<void*>(aligned + size), tail);
  // Before the first touch, so that the first faults already take huge pages. Its
  // failure (THP "never" or absent) leaves working small-page memory: ignored.
  madvise(reinterpret_cast<void*>(aligned), size, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);  // anonymous mappings are zero-filled
#else
  return AlignedHeap(bytes, kHugePageBytes);
#endif
}

void FreeHugePageAligned(void* pointer, size_t bytes) {
  if (pointer == nullptr) return;
#if defined(__linux__)
  if (bytes >= kHugePageBytes) {
    munmap(pointer, RoundUp(bytes, kHugePageBytes));
    return;
  }
#endif
  (void)bytes;
  std::free(pointer);
}

}  // namespace splitspec
