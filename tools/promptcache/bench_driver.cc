#include "bench_driver.h"

#include <httplib.h>

#include <cstdio>
#include <fstream>
#include <cstdlib>

namespace pc::cli {

using namespace loadgen;
using nlohmann::json;

namespace {

// The value on the line of a Prometheus page that starts with `series `.
double MetricValue(const std::string& page, const std::string& series) {
  const std::string key = "\n" + series + " ";
  const size_t at = page.find(key);
  if (at == std::string::npos) return 0;
  return std::strtod(page.c_str() + at + key.size(), nullptr);
}

// KV capacity in tokens from a promptcache /metrics page (0 if unavailable).
size_t CapacityFromMetrics(const Target& t) {
  httplib::Client c(t.host, t.port);
  auto res = c.Get("/metrics");
  if (!res || res->status != 200) return 0;
  const double blocks = MetricValue(res->body, "promptcache_kv_pool_blocks{state=\"total\"}");
  const double block_size = MetricValue(res->body, "promptcache_kv_block_size_tokens");
  return static_cast<size_t>(blocks * block_size);
}

Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) return Errorf("cannot write '{}'", path);
  return OkStatus();
}

}  // namespace

Result<BenchOutcome> RunBench(const Target& target, const BenchConfig& cfg) {
  std::vector<BenchRequest> reqs;
  BenchOutcome out;
  RunOptions run = cfg.run;
  if (cfg.workload == "trace") {
    PC_ASSIGN_OR_RETURN(reqs, LoadTrace(cfg.trace));
    run.arrival = Arrival::kTrace;
    const size_t cap = cfg.cache_capacity_tokens ? cfg.cache_capacity_tokens : CapacityFromMetrics(target);
    if (cap > 0) out.ideal_cached_fraction = IdealCachedFraction(reqs, cap);
  } else {
    PC_ASSIGN_OR_RETURN(reqs, MakeShape(cfg.shape));
  }
  if (cfg.ab) reqs = Interleave(reqs);
  if (cfg.warmup_requests > 0) Warmup(target, cfg.warmup_requests, 64, cfg.shape.range);
  const double t0 = NowSeconds();
  out.records = Run(target, reqs, run);
  out.wall_s = NowSeconds() - t0;
  out.groups = Aggregate(out.records, out.wall_s, cfg.slo);
  out.verdict = Judge(out.records);
  size_t prompt = 0, cached = 0;
  for (const RequestRecord& r : out.records) {
    if (r.ok && r.cache && r.cached_tokens) prompt += r.prompt_tokens, cached += *r.cached_tokens;
  }
  out.measured_cached_fraction = prompt ? static_cast<double>(cached) / static_cast<double>(prompt) : 0;
  json meta = {{"workload", cfg.workload}, {"url", fmt::format("http://{}:{}", target.host, target.port)},
               {"ab", cfg.ab}, {"wall_s", out.wall_s}, {"num_requests", out.records.size()},
               {"concurrency", run.concurrency}, {"arrival", run.arrival == Arrival::kClosed ? "closed" : run.arrival == Arrival::kPoisson ? "poisson" : "trace"},
               {"measured_cached_fraction", out.measured_cached_fraction},
               {"slo", {{"ttft_ms", cfg.slo.ttft_ms}, {"tpot_ms", cfg.slo.tpot_ms}}}};
  if (cfg.workload == "trace") {
    meta["trace"] = {{"path", cfg.trace.path}, {"token_scale", cfg.trace.token_scale}, {"time_scale", cfg.trace.time_scale},
                     {"speed", run.speed}, {"max_requests", cfg.trace.max_requests},
                     {"sample_every", cfg.trace.sample_every}};
    if (out.ideal_cached_fraction) meta["ideal_cached_fraction"] = *out.ideal_cached_fraction;
  } else {
    meta["shape"] = {{"name", cfg.shape.name}, {"num_requests", cfg.shape.num_requests}, {"num_docs", cfg.shape.num_docs},
                     {"doc_tokens", cfg.shape.doc_tokens}, {"prompt_tokens", cfg.shape.prompt_tokens},
                     {"output_tokens", cfg.shape.output_tokens}, {"system_tokens", cfg.shape.system_tokens},
                     {"turns", cfg.shape.turns}};
  }
  if (!cfg.json_path.empty()) PC_RETURN_IF_ERROR(WriteFile(cfg.json_path, ToJson(out.records, out.groups, out.verdict, meta).dump(2)));
  if (!cfg.html_path.empty()) {
    const std::string title = cfg.title.empty() ? "promptcache bench: " + cfg.workload : cfg.title;
    PC_RETURN_IF_ERROR(WriteFile(cfg.html_path, Html(title, out.records, out.groups, out.verdict, meta)));
  }
  return out;
}

void PrintBench(const BenchConfig& cfg, const BenchOutcome& out) {
  std::printf("%s: %zu requests in %.1f s\n", cfg.workload.c_str(), out.records.size(), out.wall_s);
  std::printf("%s", TerminalTable(out.groups).c_str());
  std::printf("%s\n", out.verdict.text.c_str());
  if (out.ideal_cached_fraction) {
    std::printf("cached tokens: measured %.1f%%, ideal for the same capacity %.1f%% (difference %+.1f points)\n",
                out.measured_cached_fraction * 100, *out.ideal_cached_fraction * 100,
                (out.measured_cached_fraction - *out.ideal_cached_fraction) * 100);
  }
  for (const RequestRecord& r : out.records) {
    if (!r.ok) {
      std::printf("first error: request %zu: %s\n", r.index, r.error.c_str());
      break;
    }
  }
}

}  // namespace pc::cli
