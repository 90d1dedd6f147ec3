// promptcache bench-prefix: what the prefix cache does to TTFT and ITL on
// one model, in one process: cold vs full hit vs partial hit, and decode
// speed after a long cached prefix vs after a short prompt, each request
// alone through the serving engine. The partial hit's cost per new token is
// compared with a cold prompt's cost per token at the same depth: the TTFT
// of a cold (cached + new)-token prompt less that of a cold cached-token
// prompt, over the new tokens. A benchmark, not a test: run it on an idle
// machine.
#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <cstdio>

#include "commands.h"
#include "engine/engine.h"

namespace pc::cli {
namespace {

struct Flags {
  std::string model, kv_type = "f16";
  int prompt_len = 4096, partial_cached = 4000, partial_new = 100, short_len = 16, n = 64, reps = 3, threads = 0;
  size_t block_size = 16;
  bool json = false;
};

struct Sample {
  double ttft_ms, itl_ms;
  size_t cached;
};

struct Stat {
  std::vector<double> v;
  double mean() const {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0 : s / static_cast<double>(v.size());
  }
  double sd() const {
    if (v.size() < 2) return 0;
    double m = mean(), s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return std::sqrt(s / static_cast<double>(v.size() - 1));
  }
};

std::vector<int32_t> SyntheticPrompt(size_t len, int32_t n_vocab, uint64_t seed) {
  std::vector<int32_t> p = {1};
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  while (p.size() < len) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    p.push_back(300 + static_cast<int32_t>(x % static_cast<uint64_t>(n_vocab - 300)));
  }
  return p;
}

Result<Sample> Measure(Engine& engine, const std::vector<int32_t>& prompt, int n, bool use_cache) {
  EngineRequest req;
  req.prompt = prompt;
  req.max_tokens = n;
  req.sampling.temperature = 0;
  req.ignore_eos = true;
  req.use_cache = use_cache;
  SubmitOutcome sub = engine.Submit(std::move(req));
  if (sub.error != SubmitError::kNone) return Status::Error(sub.message);
  for (;;) {
    std::optional<StreamEvent> ev = sub.stream->Next(1000);
    if (!ev || !ev->done) continue;
    if (ev->finish == FinishReason::kError || ev->finish == FinishReason::kCancelled) return Status::Error(ev->error);
    return Sample{ev->timings.ttft_ms, ev->timings.mean_itl_ms(), ev->num_cached_tokens};
  }
}

int Bench(const Flags& f) {
  auto model = Model::Load(f.model, f.threads);
  if (!model.ok()) return Fail(model.status().message());
  auto tok = Tokenizer::FromGguf((*model)->gguf());
  if (!tok.ok()) return Fail(tok.status().message());
  Model& m = **model;
  const int32_t nv = m.config().n_vocab;
  if (f.prompt_len + f.n > m.config().n_ctx || f.partial_cached >= f.prompt_len) return Fail("prompt lengths do not fit the context");
  Result<KvDtype> kv_type = ParseKvDtype(f.kv_type, static_cast<size_t>(m.config().head_dim));
  if (!kv_type.ok()) return Fail(kv_type.status().message());
  EngineOptions eo;
  eo.cache.block_size = f.block_size;
  eo.cache.dtype = *kv_type;
  eo.max_batch_tokens = kPrefillChunkTokens;
  eo.max_running = 1;
  std::map<std::string, Stat> stats;
  for (int r = 0; r < f.reps; ++r) {
    // Fresh prompts per repetition so each cold run is really cold.
    const auto prompt = SyntheticPrompt(f.prompt_len, nv, 100 + r);
    auto partial = std::vector<int32_t>(prompt.begin(), prompt.begin() + f.partial_cached);
    const auto tail = SyntheticPrompt(f.partial_new + 1, nv, 900 + r);
    partial.insert(partial.end(), tail.begin() + 1, tail.end());
    const auto short_prompt = SyntheticPrompt(f.short_len, nv, 500 + r);
    Engine engine(m, *tok, eo);  // a fresh cache per repetition
    auto run = [&](const char* name, const std::vector<int32_t>& p, bool use) -> bool {
      auto s = Measure(engine, p, f.n, use);
      if (!s.ok()) {
        Fail(s.status().message());
        return false;
      }
      stats[std::string(name) + ".ttft_ms"].v.push_back(s->ttft_ms);
      stats[std::string(name) + ".itl_ms"].v.push_back(s->itl_ms);
      stats[std::string(name) + ".cached_tokens"].v.push_back(static_cast<double>(s->cached));
      std::fprintf(stderr, "rep %d %-8s cached %5zu  TTFT %9.1f ms  mean ITL %6.2f ms\n", r + 1, name, s->cached,
                   s->ttft_ms, s->itl_ms);
      return true;
    };
    // Cold prompts of the partial hit's two lengths, uncached, for the cost
    // per token at that depth.
    const auto depth_a = SyntheticPrompt(f.partial_cached, nv, 700 + r);
    const auto depth_b = SyntheticPrompt(f.partial_cached + f.partial_new, nv, 800 + r);
    if (!run("cold", prompt, true) || !run("hit", prompt, true) || !run("partial", partial, true) ||
        !run("short", short_prompt, false) || !run("cold_at_cached", depth_a, false) ||
        !run("cold_at_cached_plus_new", depth_b, false)) {
      return 1;
    }
  }
  const double cold = stats["cold.ttft_ms"].mean(), hit = stats["hit.ttft_ms"].mean();
  const double cold_per_tok = cold / f.prompt_len;
  const double partial_per_new = stats["partial.ttft_ms"].mean() / (f.partial_new + (f.prompt_len - f.prompt_len));
  nlohmann::json j;
  for (auto& [k, s] : stats) j[k] = {{"mean", s.mean()}, {"sd", s.sd()}, {"n", s.v.size()}};
  j["ttft_hit_over_cold"] = hit / cold;
  j["itl_hit_over_cold"] = stats["hit.itl_ms"].mean() / stats["cold.itl_ms"].mean();
  j["itl_long_prefix_over_short"] = stats["hit.itl_ms"].mean() / stats["short.itl_ms"].mean();
  j["partial_cost_per_new_token_over_cold_per_token"] = partial_per_new / cold_per_tok;
  const double cold_at_depth =
      (stats["cold_at_cached_plus_new.ttft_ms"].mean() - stats["cold_at_cached.ttft_ms"].mean()) / f.partial_new;
  j["cold_cost_per_token_at_partial_depth_ms"] = cold_at_depth;
  j["partial_cost_per_new_token_over_cold_at_same_depth"] = partial_per_new / cold_at_depth;
  if (f.json) {
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model %s, prompt %d tokens, %d new, %d reps, block %zu, %d threads\n", f.model.c_str(), f.prompt_len,
              f.n, f.reps, f.block_size, m.pool().num_threads());
  for (auto& [k, s] : stats) std::printf("  %-22s %10.2f ± %.2f\n", k.c_str(), s.mean(), s.sd());
  std::printf("  TTFT full hit / cold:                      %.4f (1/%.0f)\n", hit / cold, cold / hit);
  std::printf("  mean ITL hit / cold:                       %.3f\n", j["itl_hit_over_cold"].get<double>());
  std::printf("  mean ITL after %d cached / after %d-token prompt: %.3f\n", f.prompt_len, f.short_len,
              j["itl_long_prefix_over_short"].get<double>());
  std::printf("  partial hit: cost per new token / cold cost per token (whole prompt): %.2f\n",
              j["partial_cost_per_new_token_over_cold_per_token"].get<double>());
  std::printf("  partial hit: cost per new token / cold cost per token at the same depth (%d..%d): %.2f "
              "(%.2f / %.2f ms)\n",
              f.partial_cached, f.partial_cached + f.partial_new,
              j["partial_cost_per_new_token_over_cold_at_same_depth"].get<double>(), partial_per_new, cold_at_depth);
  return 0;
}

}  // namespace

void RegisterBenchPrefix(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<Flags>();
  CLI::App* c = app.add_subcommand("bench-prefix", "Measure TTFT and ITL cold, on a full and a partial prefix hit");
  c->add_option("-m,--model", f->model, "GGUF model")->required();
  c->add_option("--prompt-len", f->prompt_len, "Prompt tokens");
  c->add_option("--partial-cached", f->partial_cached, "Cached tokens in the partial-hit case");
  c->add_option("--partial-new", f->partial_new, "New tokens in the partial-hit case");
  c->add_option("--short-len", f->short_len, "Short prompt for the ITL comparison");
  c->add_option("-n", f->n, "Tokens generated per run");
  c->add_option("-r,--reps", f->reps, "Repetitions");
  c->add_option("-t,--threads", f->threads, "Threads");
  c->add_option("--kv-type", f->kv_type, "KV cache element type: f16, f32, q8_0")->check(CLI::IsMember({"f16", "f32", "q8_0"}));
  c->add_option("--block-size", f->block_size, "Tokens per KV block");
  c->add_flag("--json", f->json, "JSON output");
  c->callback([f, exit_code] { *exit_code = Bench(*f); });
}

}  // namespace pc::cli
