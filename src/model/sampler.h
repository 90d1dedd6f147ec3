// Token sampling: greedy, or temperature with top-k, typical-p, top-p and
// min-p, from a seeded generator whose sequence is fixed by this code (not by
// the C++ library), so a seed reproduces the same tokens on any machine.
//
// The order of stages, from the model's logits to a token (docs/SERVER.md):
//   1. logit_bias added (AdjustLogits)
//   2. penalties over the context: repetition (divide positive logits,
//      multiply negative ones), presence and frequency (AdjustLogits)
//   3. the structured-output mask; end of generation barred before
//      min_tokens (the engine)
//   4. greedy when temperature <= 0; else softmax at the temperature, then
//      top-k, typical-p, top-p, min-p (each on what the previous kept), and
//      a draw from what is left.
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
  float min_p = 0.0f;      // keep p >= min_p * p_max; <= 0 disables
  float typical_p = 1.0f;  // locally typical mass kept; >= 1 disables
};

// Logit changes that depend on the text so far (stages 1-2 above).
struct LogitAdjust {
  std::vector<std::pair<int32_t, float>> bias;  // (id, added logit)
  float repetition_penalty = 1.0f;  // > 1 discourages tokens in the window
  int repeat_last_n = -1;           // window over the context's tail; -1 all, 0 none
  float presence_penalty = 0.0f;    // subtracted once from tokens generated
  float frequency_penalty = 0.0f;   // subtracted per time a token was generated
  bool active() const {
    return !bias.empty() || (repetition_penalty != 1.0f && repeat_last_n != 0) || presence_penalty != 0.0f ||
           frequency_penalty != 0.0f;
  }
};

// Applies adj to logits in place. context: prompt then generated tokens;
// the last num_generated of them are the generated ones.
void AdjustLogits(const LogitAdjust& adj, std::span<const int32_t> context, size_t num_generated,
                  std::span<float> logits);

// Draws a token: top_k, typical_p, top_p, then min_p, over the candidates
// in descending order (logit, then lower id first), a uniform draw walking
// that order. The order is built only as far as needed: the truncations
// select and sort blocks of growing size from the rest (nth_element) as
// they reach them, and the draw's walk through what they left unsorted
// narrows it to one bucket of logit values by the buckets' masses until
// few tokens are left, so a draw costs O(vocabulary), not a sort of the
// whole vocabulary (a full sort took 3-4 ms of a 3.4 ms decode step at 49k
// tokens on bench-135m; now 0.34 ms, mostly exp). Thread-safety: one per
// sequence.
class Sampler {
 public:
  explicit Sampler(const SamplingParams& p);
  int32_t Sample(std::span<const float> logits);
  // Uniform in [0, 1).
  double NextUniform();

 private:
  struct Candidate {
    float logit;
    int32_t id;
    double p;  // exp((logit - max) / temperature), unnormalised
  };
  // Sorts cand_ through index n - 1 (see above).
  void SortThrough(size_t n);
  // The draw r's token among cand_[sorted_, keep), the walk's remainder
  // (see above).
  int32_t WalkUnsorted(double r, size_t keep);
  // Keeps the locally typical candidates (typical_p), in descending order.
  void KeepTypical(double sum);
  SamplingParams p_;
  uint64_t state_;
  std::vector<Candidate> cand_;
  size_t sorted_ = 0;  // cand_[0, sorted_) is in descending order and ahead of the rest
};

// Index of the largest logit (lowest id among ties).
int32_t Argmax(std::span<const float> logits);

// The k most likely ids with their log-softmax over all logits, best first.
std::vector<std::pair<int32_t, float>> TopLogprobs(std::span<const float> logits, int k);

// log-softmax of one id.
float TokenLogprob(std::span<const float> logits, int32_t id);

}  // namespace pc
