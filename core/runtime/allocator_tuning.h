#pragma once
// How glibc's malloc treats the tensors a forward allocates and frees.
//
// By default glibc gives every allocation over its mmap threshold (128 KB at
// start, rising as mapped chunks are freed, at most 32 MB) a fresh mapping of
// its own, and hands memory freed at the top of the heap back to the system
// past 128 KB. A forward allocates and frees the same few-megabyte
// intermediates in every layer, so each one was faulted in and zeroed again:
// measured on the bundled target (2 threads, `kvscope-cli bench`), an
// uncached decode step at context 256 took 43-45 ms against 33.6-34.0 ms
// with the settings below, its load 20-21 ms against 10.5-11 ms; the 0.5 B
// shape's load 2.17 s against 1.50 s, at the same peak RSS. Weights in
// mappings of their own were slower to read as well (a one-row forward of the
// bundled target 1.5-2x in a bare program).
//
// The price: memory the process freed (up to the trim threshold) stays with
// it for reuse instead of going back to the system; the peak is unchanged.
#include <cstddef>

namespace kvscope {

// Raises malloc's mmap threshold to glibc's maximum (32 MB) and its trim
// threshold to 256 MB, unless MALLOC_MMAP_THRESHOLD_ or
// MALLOC_TRIM_THRESHOLD_ chose otherwise. Returns whether it changed them
// (false without glibc, when the user chose, or when another allocator, such
// as AddressSanitizer's, stands in for glibc's).
bool keepTensorMemoryForReuse();

// Asks the kernel for 2 MB pages under [data, data + bytes) about to be
// written, when it holds at least 8 MB (transparent huge pages in "madvise"
// mode, Debian's default). Each 4 KB page's first write is a page fault, and
// under a paravirtualised VM those faults were a third of loading the 0.5 B
// shape (perf, 2026-11-29). Advice only: where the kernel declines, the pages
// stay 4 KB.
void adviseHugePages(void* data, size_t bytes);

}  // namespace kvscope
