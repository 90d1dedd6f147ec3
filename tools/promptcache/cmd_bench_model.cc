// promptcache bench-model: prefill (ppN) and decode (tgN) speed in the
// pp/tg convention, mean ± sd over repetitions, with the fraction of this
// machine's roofline measured in the same run (read bandwidth over the
// weights a decode step streams; register-only FP32 FMA peak). A benchmark, not a test.
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>

#include "base/clock.h"
#include "commands.h"
#include "roofline.h"
#include "model/sequence.h"

namespace pc::cli {
namespace {

struct Flags {
  std::string model, kv_type = "f16";
  int p = 512, n = 128, reps = 5, depth = 0, pp_depth = 0, threads = 0;
  bool json = false;
};

struct MeanSd {
  double mean = 0, sd = 0;
};
MeanSd Stats(const std::vector<double>& v) {
  MeanSd s;
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  for (double x : v) s.sd += (x - s.mean) * (x - s.mean);
  s.sd = v.size() > 1 ? std::sqrt(s.sd / static_cast<double>(v.size() - 1)) : 0;
  return s;
}

std::vector<int32_t> RandomTokens(size_t n, int32_t n_vocab, std::mt19937& rng) {
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = 1 + static_cast<int32_t>(rng() % static_cast<uint32_t>(n_vocab - 1));
  return t;
}

// The weight bytes a decode step streams: the repacked copies, and the
// tensors read in place (token_embd only when it is also the output).
std::vector<std::span<const float>> StreamedWeights(const Model& m) {
  std::vector<std::span<const float>> out;
  auto add = [&](const void* p, size_t bytes) {
    if (bytes >= (size_t{64} << 10)) out.emplace_back(static_cast<const float*>(p), bytes / sizeof(float));
  };
  const PackedWeights& pw = m.packed();
  for (const PackedWeights::Entry& e : pw.entries) add(pw.data(e), e.bytes);
  const bool tied = m.gguf().FindTensor("output.weight") == nullptr;
  for (const GgufTensorInfo& t : m.gguf().tensors()) {
    if (t.name == "token_embd.weight" && !tied) continue;
    const bool replaced = std::any_of(pw.entries.begin(), pw.entries.end(),
                                      [&](const PackedWeights::Entry& e) { return e.original.data() == t.data; });
    if (!replaced) add(t.data, static_cast<size_t>(t.size_bytes));
  }
  return out;
}

// Streaming read bandwidth over those bytes (mapped pages it faults in are
// pages decode reads anyway), all pool threads, best of 5 sweeps; bytes/s.
double MeasureBandwidth(Model& m) {
  const std::vector<std::span<const float>> spans = StreamedWeights(m);
  size_t bytes = 0;
  for (std::span<const float> s : spans) bytes += s.size_bytes();
  double best = 0;
  std::vector<float> sink(static_cast<size_t>(m.pool().num_threads()));
  for (int rep = 0; rep < 5; ++rep) {
    const int64_t t0 = NowNs();
    for (std::span<const float> all : spans) {
      m.pool().ParallelFor(all.size(), 4096, [&](size_t b, size_t e, int t) {
        sink[static_cast<size_t>(t)] += ReadSweep(all.subspan(b, e - b));
      });
    }
    best = std::max(best, static_cast<double>(bytes) / (static_cast<double>(NowNs() - t0) * 1e-9));
  }
  return best;
}

// Register-only FP32 FMA throughput on all pool threads; FLOP per second.
double MeasurePeakFlops(Model& m) {
  const int n = m.pool().num_threads();
  std::vector<double> flops(static_cast<size_t>(n));
  std::vector<float> sink(static_cast<size_t>(n));
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const int64_t t0 = NowNs();
    m.pool().ParallelFor(static_cast<size_t>(n), 1, [&](size_t b, size_t, int t) {
      flops[b] = FmaLoop(size_t{20'000'000}, &sink[static_cast<size_t>(t)]);
    });
    double total = 0;
    for (double f : flops) total += f;
    best = std::max(best, total / (static_cast<double>(NowNs() - t0) * 1e-9));
  }
  return best;
}

int BenchModel(const Flags& f) {
  Result<std::unique_ptr<Model>> loaded = Model::Load(f.model, f.threads);
  if (!loaded.ok()) return Fail(loaded.status().message());
  Model& m = **loaded;
  const ModelConfig& c = m.config();
  const size_t n_ctx = static_cast<size_t>(c.n_ctx);
  if (static_cast<size_t>(f.pp_depth + f.p + 1) > n_ctx || static_cast<size_t>(f.depth + f.n + 1) > n_ctx) {
    return Fail(fmt::format("-p/-d/-n exceed the context length {}", c.n_ctx));
  }
  // Bytes a decode step streams: every weight once (token_embd only as the
  // tied output; of a mixture of experts' 3-D expert tensors the share a
  // token uses), plus the K/V of the context; FLOPs per prefill token.
  double weight_bytes = 0, matmul_params = 0;
  const double expert_share = c.n_expert > 0 ? static_cast<double>(c.n_expert_used) / c.n_expert : 1.0;
  for (const GgufTensorInfo& t : m.gguf().tensors()) {
    const bool embd = t.name == "token_embd.weight";
    if (embd && m.gguf().FindTensor("output.weight")) continue;
    const double share = t.dims.size() == 3 ? expert_share : 1.0;
    weight_bytes += share * static_cast<double>(t.size_bytes);
    if (t.dims.size() >= 2) matmul_params += share * static_cast<double>(t.NumElements());
  }
  Result<KvDtype> kv_type = ParseKvDtype(f.kv_type, static_cast<size_t>(c.head_dim));
  if (!kv_type.ok()) return Fail(kv_type.status().message());
  const double kv_bytes_per_pos = 2.0 * c.n_layer * static_cast<double>(KvBytes(*kv_type, static_cast<size_t>(c.kv_dim())));  // K and V
  const double attn_flops_per_pos = 4.0 * c.n_layer * c.n_head * c.head_dim;
  std::mt19937 rng(42);
  std::vector<double> pp, tg;
  {  // One unmeasured prompt and step first, as llama-bench warms up: the
     // forward pass's buffers and the pool's threads exist before timing.
    Session warm(m, static_cast<size_t>(f.p) + 2, *kv_type);
    warm.Prefill(RandomTokens(static_cast<size_t>(f.p), c.n_vocab, rng));
    warm.Decode(0);
  }
  // One store per kind of test, cleared between repetitions (llama-bench
  // keeps its context too): each repetition writes K/V over memory the last
  // one touched, not over freshly mapped pages.
  Session pp_session(m, static_cast<size_t>(f.pp_depth + f.p) + 1, *kv_type);
  // A cache hit's suffix: each repetition's prompt prefilled after the same
  // pp_depth cached positions.
  if (f.pp_depth > 0) pp_session.Prefill(RandomTokens(static_cast<size_t>(f.pp_depth), c.n_vocab, rng));
  for (int r = 0; r < f.reps; ++r) {
    Session& s = pp_session;
    s.Truncate(static_cast<size_t>(f.pp_depth));
    const std::vector<int32_t> prompt = RandomTokens(static_cast<size_t>(f.p), c.n_vocab, rng);
    const int64_t t0 = NowNs();
    s.Prefill(prompt);
    pp.push_back(f.p / (static_cast<double>(NowNs() - t0) * 1e-9));
  }
  Session tg_session(m, f.n > 0 ? static_cast<size_t>(f.depth + f.n) + 1 : 1, *kv_type);
  for (int r = 0; r < f.reps && f.n > 0; ++r) {  // -n 0: prefill only, as in llama-bench
    Session& s = tg_session;
    s.Clear();
    if (f.depth > 0) s.Prefill(RandomTokens(static_cast<size_t>(f.depth), c.n_vocab, rng));
    s.Prefill(RandomTokens(1, c.n_vocab, rng));  // the 1-token prompt
    const std::vector<int32_t> next = RandomTokens(static_cast<size_t>(f.n), c.n_vocab, rng);
    const int64_t t0 = NowNs();
    for (int i = 0; i < f.n; ++i) s.Decode(next[static_cast<size_t>(i)]);
    tg.push_back(f.n / (static_cast<double>(NowNs() - t0) * 1e-9));
  }
  const double bw = MeasureBandwidth(m), peak = MeasurePeakFlops(m);
  const MeanSd ps = Stats(pp), ts = Stats(tg);
  const double tg_bytes = weight_bytes + kv_bytes_per_pos * (f.depth + 1 + f.n / 2.0);
  const double tg_roof = bw / tg_bytes;
  const double pp_flops = 2 * matmul_params + attn_flops_per_pos * (f.pp_depth + f.p / 2.0);
  const double pp_roof = peak / pp_flops;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double rss = static_cast<double>(ru.ru_maxrss) * 1024, file = static_cast<double>(std::filesystem::file_size(f.model));
  const std::string tg_name = f.depth ? fmt::format("tg{} @ d{}", f.n, f.depth) : fmt::format("tg{}", f.n);
  const std::string pp_name = f.pp_depth ? fmt::format("pp{} @ d{}", f.p, f.pp_depth) : fmt::format("pp{}", f.p);
  const PackedWeights& pw = m.packed();
  if (f.json) {
    nlohmann::json j = {{"model", f.model}, {"threads", m.pool().num_threads()}, {"isa", IsaName(*ActiveIsa())},
                        {"pp", {{"tokens", f.p}, {"depth", f.pp_depth}, {"tok_s_mean", ps.mean}, {"tok_s_sd", ps.sd},
                                {"roofline_tok_s", pp_roof},
                                {"roofline_fraction", ps.mean / pp_roof}}},
                        {"tg", {{"tokens", f.n}, {"depth", f.depth}, {"tok_s_mean", ts.mean}, {"tok_s_sd", ts.sd},
                                {"roofline_tok_s", tg_roof}, {"roofline_fraction", ts.mean / tg_roof}}},
                        {"read_bandwidth_gb_s", bw / 1e9}, {"fp32_fma_peak_gflop_s", peak / 1e9},
                        {"peak_rss_bytes", rss}, {"file_bytes", file},
                        {"repack", {{"num_matrices", pw.num_matrices}, {"bytes", pw.bytes}, {"load_ms", pw.load_ms}}},
                        {"fingerprint_ms", m.fingerprint_ms()}};
    if (f.n == 0) j.erase("tg");
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("model %s: %.1f MB, %d threads, ISA %s, %d reps\n", f.model.c_str(), file / 1e6, m.pool().num_threads(),
              IsaName(*ActiveIsa()), f.reps);
  std::printf("%-14s %12s %10s %14s %9s\n", "test", "tok/s", "± sd", "roofline tok/s", "fraction");
  std::printf("%-14s %12.1f %10.1f %14.0f %8.1f%%\n", pp_name.c_str(), ps.mean, ps.sd, pp_roof, 100 * ps.mean / pp_roof);
  if (f.n > 0) {
    std::printf("%-14s %12.1f %10.1f %14.0f %8.1f%%\n", tg_name.c_str(), ts.mean, ts.sd, tg_roof, 100 * ts.mean / tg_roof);
  }
  std::printf("roofline measured in this run: read %.1f GB/s over the weights decode streams; FP32 FMA peak %.0f GFLOP/s\n"
              "(decode streams %.1f MB per token; prefill needs %.2f GFLOP per token)\n",
              bw / 1e9, peak / 1e9, tg_bytes / 1e6, pp_flops / 1e9);
  std::printf("at load: fingerprint of every byte in %.0f ms; %zu quantized matrices repacked (%.1f MB) in %.0f ms\n",
              m.fingerprint_ms(), pw.num_matrices, static_cast<double>(pw.bytes) / 1e6, pw.load_ms);
  std::printf("peak resident memory %.1f MB = %.2f x the file\n", rss / 1e6, rss / file);
  return 0;
}

}  // namespace

void RegisterBenchModel(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<Flags>();
  CLI::App* c = app.add_subcommand("bench-model", "Benchmark: ppN prefill and tgN decode tokens/s with the roofline fraction");
  c->add_option("-m,--model", f->model, "GGUF model")->required();
  c->add_option("-p", f->p, "Prompt tokens for ppN")->check(CLI::Range(1, 1 << 20));
  c->add_option("-n", f->n, "Generated tokens for tgN")->check(CLI::Range(0, 1 << 20));
  c->add_option("-r,--reps", f->reps, "Repetitions")->check(CLI::Range(1, 1000));
  c->add_option("-d,--depth", f->depth, "Context already in the cache before tgN")->check(CLI::Range(0, 1 << 20));
  c->add_option("--pp-depth", f->pp_depth, "Context already in the cache before ppN (a cache hit's suffix)")
      ->check(CLI::Range(0, 1 << 20));
  c->add_option("-t,--threads", f->threads, "Threads (default: physical cores)");
  c->add_option("--kv-type", f->kv_type, "KV cache element type: f16, f32, q8_0")->check(CLI::IsMember({"f16", "f32", "q8_0"}));
  c->add_flag("--json", f->json, "JSON output");
  c->callback([f, exit_code] { *exit_code = BenchModel(*f); });
}

}  // namespace pc::cli
