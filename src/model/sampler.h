// Token sampling: greedy, or temperature with top-k and top-p, from a seeded
// generator whose sequence is fixed by this code (not by the C++ library), so
// a seed reproduces the same tokens on any machine.
#pragma once
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace pc {

struct SamplingParams {
  float temperature = 0.8f;  // <= 0 means greedy
  int top_k = 40;            // <= 0 means the whole vocabulary
  float top_p = 0.95f;       // >= 1 disables nucleus filtering
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);
  int32_t Sample(std::span<const float> logits);
  // Uniform in [0, 1).
  double NextUniform();

 private:
  SamplingParams p_;
  uint64_t state_;
  std::vector<std::pair<float, int32_t>> cand_;
};

// Index of the largest logit (lowest id among ties).
int32_t Argmax(std::span<const float> logits);

// The k most likely ids with their log-softmax over all logits, best first.
std::vector<std::pair<int32_t, float>> TopLogprobs(std::span<const float> logits, int k);

// log-softmax of one id.
float TokenLogprob(std::span<const float> logits, int32_t id);

}  // namespace pc
