// Helpers shared by the tests: locating ../shared (skip when absent, fail
// when PROMPTCACHE_REQUIRE_SHARED=1), reading reference files, temp paths.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <memory>
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
// A fresh file path in a per-process temp folder (removed at normal exit).
std::string TempPath(const std::string& name);
// Runs a shell command; returns its stdout and sets *exit_code.
std::string RunCommand(const std::string& cmd, int* exit_code);

// One line of a ../shared/reference file: the prompt's ids, the reference
// engine's greedy ids and, per step, its top-10 [id, logprob].
struct RefStep {
  int32_t id;
  std::vector<std::pair<int32_t, float>> top;
};
struct RefCase {
  std::vector<int32_t> prompt, greedy;
  std::vector<RefStep> steps;
};
std::vector<RefCase> LoadReference(const std::string& path);

// The build of the reference engine whose arithmetic recorded a shared
// reference file (../shared/reference/README.md names the CPU of each set):
// "avx512fp16" for the first set (stories260K, tiny-gqa F32/F16/Q8_0/Q4_0),
// "avx512" for the later one (the tiny-gqa K-quants, qwen2, qwen3, phi3,
// llama3), "avx2" for the families (gemma2/3, the mixtures of experts,
// gpt-oss, YaRN). For --ggml-target and SetGgmlTarget.
std::string ReferenceGgmlTarget(const std::string& model_name);

// One generated step as an engine reports it: the chosen id and its top
// alternatives (id, logprob), best first.
struct GenStep {
  int32_t id;
  std::vector<std::pair<int32_t, float>> top;
};
// Generates greedily after `prefix` for up to n steps.
using GenerateFn = std::function<std::vector<GenStep>(const std::vector<int32_t>& prefix, int n)>;
// Free-running greedy generation checked against a reference case by the
// README's rule: while our choice matches the reference's, every reference
// top-10 logprob must agree within tol; a different choice is allowed only
// where the reference's top-1/top-2 gap is within tol, and generation then
// restarts from the reference's tokens (teacher forcing by relaunch). The
// reference engine ignored end-of-sequence by never choosing it: where we
// choose `eos`, our best other id is compared with its choice (the margin
// between its two best ids other than `eos`). jumps, if given, is a budget
// of steps where the choice may differ past that margin (the README's
// router near-ties of the mixtures of experts); each use is printed.
// Returns the largest difference seen; records failures with gtest.
float CheckGreedyAgainstReference(const RefCase& c, float tol, const GenerateFn& gen, const std::string& what,
                                  int32_t eos = 2, int* jumps = nullptr);

// n normally distributed floats (mean 0, sd scale) from a fixed seed.
std::vector<float> RandomFloats(size_t n, uint32_t seed, float scale = 1.0f);

}  // namespace pc::test
