// PC_CHECK: internal invariants. Active in every build type; a failure is a
// bug in this program, never a consequence of bad input.
#pragma once
#include <cstdio>
#include <cstdlib>

#define PC_CHECK(cond)                                                          \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, \
                   #cond);                                                      \
      std::abort();                                                             \
    }                                                                           \
  } while (0)
