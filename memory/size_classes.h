#ifndef NDSERVE_MEMORY_SIZE_CLASSES_H_
#define NDSERVE_MEMORY_SIZE_CLASSES_H_

#include <algorithm>
#include <bit>
#include <cstddef>

namespace ndserve {

// The power-of-two size classes of the binned pool: class c holds blocks of exactly
// 2^(c + kMinShift) bytes, from 512 B (class 0) to 128 MiB. The binned pool's shared
// free lists and its thread caches both index by these classes, so a block moves
// between the two without being re-rounded; they are defined here and nowhere else.
// Pure functions of their arguments: thread-safe.
struct SizeClasses {
  static constexpr int kMinShift = 9;   // 512 B: no smaller block is worth a list entry
  static constexpr int kMaxShift = 27;  // 128 MiB: above it, rounding wastes too much
  static constexpr int kCount = kMaxShift - kMinShift + 1;
  static constexpr std::size_t kMinBytes = std::size_t{1} << kMinShift;
  static constexpr std::size_t kMaxBytes = std::size_t{1} << kMaxShift;

  // The class that serves a request of 1..kMaxBytes bytes (the smallest that fits).
  // For a class's own size (a block's size) it is that class.
  static constexpr int Of(std::size_t bytes) {
    return std::max(static_cast<int>(std::bit_width(bytes - 1)), kMinShift) - kMinShift;
  }
  // Bytes of every block of class `c` (0..kCount-1).
  static constexpr std::size_t Bytes(int c) { return std::size_t{1} << (c + kMinShift); }
  // Bytes of the block that serves `bytes` (1..kMaxBytes): Bytes(Of(bytes)).
  static constexpr std::size_t RoundUp(std::size_t bytes) {
    return std::max(std::bit_ceil(bytes), kMinBytes);
  }
};

}  // namespace ndserve

#endif  // NDSERVE_MEMORY_SIZE_CLASSES_H_
