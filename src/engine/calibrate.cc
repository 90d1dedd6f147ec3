#include "engine/calibrate.h"

#include <algorithm>
#include <vector>

#include "base/clock.h"
#include "model/sampler.h"

namespace pc {

CostModel CalibratePrefill(Model& model, const CacheOptions& opt, size_t chunk_tokens, double max_ms, int rounds) {
  const ModelConfig& c = model.config();
  const size_t chunk = chunk_tokens;
  std::vector<size_t> positions = {0};
  for (size_t p = 1024; p + chunk <= static_cast<size_t>(c.n_ctx) && p <= 8192; p *= 2) positions.push_back(p);
  const size_t max_pos = positions.back() + chunk;
  KvStore kv(static_cast<size_t>(c.n_layer), static_cast<size_t>(c.kv_dim()), opt.block_size,
             (max_pos + opt.block_size - 1) / opt.block_size, opt.dtype);
  std::vector<int32_t> table(kv.num_blocks());
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  std::vector<float> logits;
  // Shallowest and deepest first: two points fix the line the step budget
  // uses; the rest refine the curve while the time allows.
  if (positions.size() > 2) std::rotate(positions.begin() + 1, positions.end() - 1, positions.end());
  auto chunk_ms = [&](size_t p) {
    std::vector<BatchToken> batch;
    for (size_t i = 0; i < chunk; ++i) batch.push_back({static_cast<int32_t>(1 + i % 100), static_cast<int32_t>(p + i), table, i + 1 == chunk});
    const int64_t t0 = NowNs();
    model.Forward(batch, kv, &logits);
    return NsToMs(NowNs() - t0);
  };
  // Each position's passes back to back, as a prompt's chunks run: a step's
  // cost depends on the one before it (on a 2-core Xeon a one-token step
  // right after a 256-token one took 5.5 ms, after one-token steps 3.3).
  const int64_t start_ns = NowNs();
  std::vector<std::pair<double, double>> samples;
  auto out_of_time = [&] { return NsToMs(NowNs() - start_ns) > max_ms; };
  for (size_t p : positions) {
    if (samples.size() >= 2 && out_of_time()) break;
    chunk_ms(p);  // also warms caches and threads
    const double ms = MedianPassMs([&] { return chunk_ms(p); }, rounds, out_of_time);
    samples.emplace_back(static_cast<double>(p + chunk / 2), ms / static_cast<double>(chunk));
  }
  // One-token steps at depth 0 and at the deepest position: what the
  // deeper one costs more is the pass over the positions before it.
  auto one_token_ms = [&](size_t p) {
    const std::vector<BatchToken> one = {{1, static_cast<int32_t>(p), table, true}};
    double best = 1e300;
    for (int rep = 0; rep < 3; ++rep) {
      const int64_t t0 = NowNs();
      model.Forward(one, kv, &logits);
      best = std::min(best, NsToMs(NowNs() - t0));
    }
    return best;
  };
  const size_t deep = positions[1 % positions.size()];
  const double pass = deep > 0 ? std::max(one_token_ms(deep) - one_token_ms(0), 0.0) / static_cast<double>(deep) : 0.0;
  CostModel m;
  m.SetPrefillSamples(std::move(samples));
  m.SetKvPass(pass, chunk);
  return m;
}

double MedianPassMs(const std::function<double()>& pass, int rounds, const std::function<bool()>& out_of_time) {
  std::vector<double> ms;
  do {
    ms.push_back(pass());
  } while (static_cast<int>(ms.size()) < rounds && !out_of_time());
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  return n % 2 == 1 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
}

namespace {

// The median of `reps` forward passes of tokens [0, n) of one sequence, ms;
// logits for every row or only the last (the median: what steps typically
// take, as the advisor predicts).
double StepMs(Model& model, KvStore& kv, const std::vector<int32_t>& table, size_t n, bool all_logits, int reps) {
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < n; ++i) {
    batch.push_back({static_cast<int32_t>(1 + i % 100), static_cast<int32_t>(i), table, all_logits || i + 1 == n});
  }
  std::vector<float> logits;
  std::vector<double> ms;
  for (int rep = 0; rep < reps; ++rep) {
    const int64_t t0 = NowNs();
    model.Forward(batch, kv, &logits);
    ms.push_back(NsToMs(NowNs() - t0));
  }
  std::nth_element(ms.begin(), ms.begin() + static_cast<std::ptrdiff_t>(ms.size() / 2), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

void WarmNestedPass(Model& model, const CacheOptions& opt, size_t tokens) {
  const ModelConfig& c = model.config();
  tokens = std::clamp<size_t>(tokens, 1, static_cast<size_t>(std::max(c.n_ctx - 1, 1)));
  // Positions [0, tokens) for the nested pass, the outer one's token after them.
  KvStore kv(static_cast<size_t>(c.n_layer), static_cast<size_t>(c.kv_dim()), opt.block_size,
             (tokens + 1 + opt.block_size - 1) / opt.block_size, opt.dtype);
  std::vector<int32_t> table(kv.num_blocks());
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  std::vector<BatchToken> inner;
  for (size_t i = 0; i < tokens; ++i) inner.push_back({static_cast<int32_t>(1 + i % 100), static_cast<int32_t>(i), table, i + 1 == tokens});
  const std::vector<BatchToken> outer = {{1, static_cast<int32_t>(tokens), table, true}};
  std::vector<float> logits, inner_logits;
  bool ran = false;
  // The nested pass stops before its second layer: one layer grows and
  // touches every buffer a layer uses (a large model's start is not held up
  // by a whole pass); the engine sizes its own logits.
  model.Forward(outer, kv, &logits, [&] {
    int asked = 0;
    if (!ran) model.Forward(inner, kv, &inner_logits, [&] { return ++asked < Model::kAsksPerLayer; });
    ran = true;
    return true;
  });
}

BatchCurve CalibrateBatchSizes(Model& model, const CacheOptions& opt, size_t max_tokens) {
  const ModelConfig& c = model.config();
  max_tokens = std::clamp<size_t>(max_tokens, 1, static_cast<size_t>(std::max(c.n_ctx, 1)));
  KvStore kv(static_cast<size_t>(c.n_layer), static_cast<size_t>(c.kv_dim()), opt.block_size,
             (max_tokens + opt.block_size - 1) / opt.block_size, opt.dtype);
  std::vector<int32_t> table(kv.num_blocks());
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  BatchCurve curve;
  StepMs(model, kv, table, std::min<size_t>(max_tokens, 16), false, 1);  // warm threads and caches
  for (size_t n = 1;; n = std::min(n * 2, max_tokens)) {
    curve.step_ms_by_tokens.emplace_back(static_cast<double>(n), StepMs(model, kv, table, n, false, n <= 16 ? 5 : 3));
    if (n == max_tokens) break;
  }
  // The logits rows: the same step with every row's logits, less the step
  // with one, per extra row.
  const size_t rows = std::min<size_t>(max_tokens, 32);
  if (rows > 1) {
    const double all = StepMs(model, kv, table, rows, true, 3), last = StepMs(model, kv, table, rows, false, 3);
    curve.logits_ms_per_row = std::max(all - last, 0.0) / static_cast<double>(rows - 1);
  }
  std::vector<float> logits;
  const std::vector<BatchToken> one = {{1, 0, table, true}};
  model.Forward(one, kv, &logits);
  Sampler sampler(SamplingParams{1.0f, 0, 1.0f, 1, 0.0f, 1.0f});
  constexpr int kDraws = 16;
  const int64_t t0 = NowNs();
  for (int i = 0; i < kDraws; ++i) sampler.Sample(logits);
  curve.sample_ms_per_row = NsToMs(NowNs() - t0) / kDraws;
  Sampler greedy(SamplingParams{0.0f, 0, 1.0f, 1, 0.0f, 1.0f});
  const int64_t t1 = NowNs();
  for (int i = 0; i < kDraws; ++i) greedy.Sample(logits);
  curve.greedy_ms_per_row = NsToMs(NowNs() - t1) / kDraws;
  return curve;
}

}  // namespace pc
