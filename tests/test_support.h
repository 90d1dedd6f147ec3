// Helpers shared by the tests: locating ../shared (skip when absent, fail
// when PROMPTCACHE_REQUIRE_SHARED=1), reading reference files, temp paths.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace pc::test {

// Path under the shared data folder, or "" when it is absent.
std::string SharedPath(const std::string& rel);
bool RequireShared();

// Skips the test (or fails it under PROMPTCACHE_REQUIRE_SHARED=1) when the
// shared file is missing; otherwise yields its path.
#define PC_SHARED_OR_SKIP(var, rel)                                                     \
  std::string var = ::pc::test::SharedPath(rel);                                        \
  if (var.empty()) {                                                                    \
    if (::pc::test::RequireShared()) FAIL() << "shared data missing: " << (rel);        \
    GTEST_SKIP() << "shared data '" << (rel) << "' not found (../shared absent); skipping"; \
  }

std::vector<uint8_t> ReadBytes(const std::string& path);
std::string ReadText(const std::string& path);
void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes);
// A fresh file path in a per-process temp folder.
std::string TempPath(const std::string& name);
// Runs a shell command; returns its stdout and sets *exit_code.
std::string RunCommand(const std::string& cmd, int* exit_code);

// n normally distributed floats (mean 0, sd scale) from a fixed seed.
std::vector<float> RandomFloats(size_t n, uint32_t seed, float scale = 1.0f);

}  // namespace pc::test
