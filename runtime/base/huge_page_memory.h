// Memory for large buffers that are streamed every decode step (the interleaved weight
// copies, runtime/model/tp_shard.h), placed where the kernel can back it with 2 MiB
// transparent huge pages.
//
//   void* p = AllocateHugePageAligned(bytes);      // never null
//   ...
//   FreeHugePageAligned(p, bytes);                 // the same byte count
//
// Why: a decode step reads tens to hundreds of MB once each; with 4 KiB pages most of
// the cost of reading a 64-position KV block was address translation (TLB misses),
// measured with a harness at SmolLM2's attention shapes: 1-token attention 220-240 ns
// per (query, block) on huge pages against 327-341 ns on small ones. Measure the whole
// model before using it for a buffer: the CPU KV cache on huge pages made decode at
// 6,000 positions slower, not faster (README, "Long context on the CPU"), so it is not
// used there.
//
// Allocations of at least kHugePageBytes are mapped anonymously (Linux: mmap), start
// on a 2 MiB boundary, are rounded up to whole 2 MiB pages, and are marked
// madvise(MADV_HUGEPAGE) before they are touched, so that the kernel backs them with
// huge pages when its THP mode is "always" or "madvise"
// (/sys/kernel/mm/transparent_hugepage/enabled). A failed madvise (THP "never", a
// kernel without THP) is not an error: the memory works the same with small pages,
// only the address translation is slower; nothing is reported. Smaller allocations
// gain nothing from huge pages and take kCacheLineBytes-aligned heap memory.
// Elsewhere than Linux every allocation is plain aligned heap memory (aligned to
// kHugePageBytes when at least that large).
//
// The memory is zeroed (as std::vector's value-initialization would make it anyway).
// Out of memory is fatal (SPLITSPEC_CHECK naming the bytes), as it is for std::vector
// in this project. Thread-safe (no shared state).
#ifndef SPLITSPEC_RUNTIME_BASE_HUGE_PAGE_MEMORY_H_
#define SPLITSPEC_RUNTIME_BASE_HUGE_PAGE_MEMORY_H_

#include <cstddef>

namespace splitspec {

// The size of a transparent huge page on x86-64 and aarch64 (4 KiB base pages).
inline constexpr size_t kHugePageBytes = size_t{2} << 20;
inline constexpr size_t kCacheLineBytes = 64;

// At least `bytes` zeroed bytes: kHugePageBytes-aligned and marked for huge pages when
// bytes >= kHugePageBytes, else kCacheLineBytes-aligned. bytes == 0 returns a valid
// pointer to free like any other. Never null.
void* AllocateHugePageAligned(size_t bytes);
// Frees what AllocateHugePageAligned(bytes) returned; `bytes` must be the same count.
// Null is ignored.
void FreeHugePageAligned(void* pointer, size_t bytes);

}  // namespace splitspec

#endif  // SPLITSPEC_RUNTIME_BASE_HUGE_PAGE_MEMORY_H_
