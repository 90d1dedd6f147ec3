// Monotonic time helpers. Units are in the names.
#pragma once
#include <chrono>
#include <cstdint>

namespace pc {

inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
inline double NsToMs(int64_t ns) { return static_cast<double>(ns) / 1e6; }

}  // namespace pc
