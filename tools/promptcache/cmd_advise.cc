// promptcache calibrate: measure one model's costs on this machine (prefill
// per token by position, decode per token by context, step time by step
// size, tier loads) into a JSON profile. promptcache advise: replay a traffic log through the cache
// policy with those costs and say what caching buys.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <thread>

#include "advise.h"
#include "base/clock.h"
#include "commands.h"
#include "engine/calibrate.h"
#include "kvcache/disk_tier.h"
#include "kvcache/redis_tier.h"
#include "kvcache/tier_stack.h"

namespace pc::cli {
namespace {

struct CalibrateFlags {
  std::string model, out = "profile.json", disk_dir, redis;
  bool host = true;
  int threads = 0;
  size_t chunk_tokens = 256;
};

// One-token steps at depths every 128 positions to 4,096, then every 1,024
// to 16,384 (within the model's context): a decode step's attention splits
// the context into spans run on the threads, so its cost rises in stairs
// (bench-135m, 2 threads: flat from 512 to 1,024, +40% from 1,024 to
// 1,536), and samples at powers of two alone sit on the stairs' edges (the
// advisor priced depth 1,200 at 5.1 ms where the server took 7.2). Each
// depth's steps back to back, as a stream's are, the median of five after
// a warm-up.
std::vector<std::pair<double, double>> DecodeSamples(Model& model, const CacheOptions& co) {
  const ModelConfig& c = model.config();
  std::vector<size_t> ctxs;
  for (size_t p = 0; p < static_cast<size_t>(c.n_ctx) && p <= 16384; p += p < 4096 ? 128 : 1024) ctxs.push_back(p);
  KvStore kv(static_cast<size_t>(c.n_layer), static_cast<size_t>(c.kv_dim()), co.block_size,
             (ctxs.back() + 1 + co.block_size - 1) / co.block_size, co.dtype);
  std::vector<int32_t> table(kv.num_blocks());
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  std::vector<float> logits;
  std::vector<std::pair<double, double>> out;
  for (size_t ctx : ctxs) {
    const BatchToken t{1, static_cast<int32_t>(ctx), table, true};
    std::vector<double> ms;
    for (int rep = 0; rep < 6; ++rep) {
      const int64_t t0 = NowNs();
      model.Forward({&t, 1}, kv, &logits);
      if (rep > 0) ms.push_back(NsToMs(NowNs() - t0));
    }
    std::nth_element(ms.begin(), ms.begin() + 2, ms.end());
    out.emplace_back(static_cast<double>(ctx), ms[2]);
  }
  return out;
}

// What a step costs more after the engine has idled: for pauses of 2, 20
// and 200 ms, five times each, the pause and then four one-token steps back
// to back; per step after the pause, the median of its time less a warm
// step's (the median of steps run back to back). A server at moderate load
// idles between requests, and its next request's first steps are slower.
std::vector<std::pair<double, std::vector<double>>> IdleWake(Model& model, const CacheOptions& co) {
  const ModelConfig& c = model.config();
  KvStore kv(static_cast<size_t>(c.n_layer), static_cast<size_t>(c.kv_dim()), co.block_size, 1, co.dtype);
  const std::vector<int32_t> table = {0};
  std::vector<float> logits;
  auto step_ms = [&] {
    const BatchToken t{1, 0, table, true};
    const int64_t t0 = NowNs();
    model.Forward({&t, 1}, kv, &logits);
    return NsToMs(NowNs() - t0);
  };
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  std::vector<double> warm;
  for (int i = 0; i < 12; ++i) warm.push_back(step_ms());
  const double warm_ms = median(std::vector<double>(warm.begin() + 4, warm.end()));
  constexpr size_t kSteps = 4;
  std::vector<std::pair<double, std::vector<double>>> out;
  for (double pause_ms : {2.0, 20.0, 200.0}) {
    std::vector<std::vector<double>> ms(kSteps);
    for (int trial = 0; trial < 5; ++trial) {
      std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(pause_ms * 1e3)));
      for (size_t k = 0; k < kSteps; ++k) ms[k].push_back(step_ms());
    }
    std::vector<double> extra;
    for (size_t k = 0; k < kSteps; ++k) extra.push_back(std::max(median(ms[k]) - warm_ms, 0.0));
    out.emplace_back(pause_ms, std::move(extra));
  }
  return out;
}

int Calibrate(const CalibrateFlags& f) {
  Result<std::unique_ptr<Model>> model = Model::Load(f.model, f.threads);
  if (!model.ok()) return Fail(model.status().message());
  const CacheOptions co{16, KvDtype::kF16, 1};
  PrefixCache probe((*model)->config().kv_shape(), (*model)->fingerprint(), co);
  loadgen::CostProfile p;
  p.model = f.model;
  p.block_size = co.block_size;
  std::fprintf(stderr, "calibrating prefill...\n");
  // Chunks the size of the server's default step budget: per-token cost
  // falls with chunk size (bigger GEMMs), so measure what the server runs.
  const CostModel prefill = CalibratePrefill(**model, co, f.chunk_tokens, 20000, 5);
  p.prefill_ms_per_token = prefill.prefill_samples();
  p.kv_pass_ms_per_position = prefill.kv_pass_ms_per_position();
  p.prefill_chunk_tokens = prefill.sample_chunk_tokens();
  std::fprintf(stderr, "calibrating decode...\n");
  p.decode_ms_per_token = DecodeSamples(**model, co);
  std::fprintf(stderr, "calibrating step sizes...\n");
  BatchCurve batch = CalibrateBatchSizes(**model, co, f.chunk_tokens);
  p.step_ms_by_tokens = std::move(batch.step_ms_by_tokens);
  p.logits_ms_per_row = batch.logits_ms_per_row;
  p.sample_ms_per_row = batch.sample_ms_per_row;
  p.greedy_ms_per_row = batch.greedy_ms_per_row;
  std::fprintf(stderr, "calibrating wake-up after idle...\n");
  p.idle_wake_ms = IdleWake(**model, co);
  std::vector<std::unique_ptr<KvTier>> tiers;
  if (f.host) tiers.push_back(std::make_unique<HostTier>(uint64_t{1} << 30));
  if (!f.disk_dir.empty()) {
    DiskTierOptions d;
    d.dir = f.disk_dir;
    d.fingerprint = Hash128{0x5ca1ab1e, 0xca11b8a7e};  // a scratch namespace, never a real model's
    tiers.push_back(std::make_unique<DiskTier>(d));
  }
  if (!f.redis.empty()) {
    RedisTierOptions r;
    if (Status st = ParseRedisAddress(f.redis, &r); !st.ok()) return Fail(st.message());
    r.ns = "promptcache-calibrate";
    tiers.push_back(std::make_unique<RedisTier>(r));
  }
  for (auto& t : tiers) {
    const std::optional<TierCost> c = CalibrateTier(*t, probe.payload_bytes());
    if (!c) {
      std::fprintf(stderr, "calibrate: the %s tier could not store test blocks (full or unreachable); left out of the profile\n",
                   t->name().c_str());
      continue;
    }
    p.tiers[t->name()] = {c->latency_ms, c->ms_per_block};
  }
  std::ofstream out(f.out);
  out << p.ToJson().dump(2) << "\n";
  if (!out) return Fail("cannot write " + f.out);
  std::printf("%s\n", p.ToJson().dump(2).c_str());
  return 0;
}

struct AdviseFlags {
  std::string trace, profile, json_path, html_path, step_log, steps;
  loadgen::TraceParams tp;
  size_t pool_tokens = 65536, host_tokens = 0, disk_tokens = 0, redis_tokens = 0, max_running = 32, batch_tokens = 256;
  double redis_ttl_s = 0, step_ms = 25;
  std::string admission = "cache-aware";
  bool time_scale_set = false;
  bool greedy = false;
};

int Advise(AdviseFlags f) {
  std::ifstream in(f.profile);
  if (!in) return Fail("cannot read the cost profile '" + f.profile + "' (make one with promptcache calibrate)");
  nlohmann::json pj = nlohmann::json::parse(in, nullptr, false);
  Result<loadgen::CostProfile> cost = loadgen::CostProfile::FromJson(pj);
  if (!cost.ok()) return Fail(f.profile + ": " + cost.status().message());
  nlohmann::json fit_meta;
  if (!f.steps.empty()) {  // the server's measured steps scale the calibrated prices
    std::ifstream sin(f.steps);
    if (!sin) return Fail("cannot read the step log '" + f.steps + "'");
    Result<loadgen::StepFit> fit = loadgen::FitStepLog(sin, *cost, f.greedy);
    if (!fit.ok()) return Fail(f.steps + ": " + fit.status().message());
    fit->ApplyTo(&*cost);
    fit_meta = {{"log", f.steps}, {"steps", fit->kind_steps}, {"scale", fit->scale}, {"measured_s", fit->measured_ms / 1e3},
                {"priced_s", fit->priced_ms / 1e3}};
    std::printf("%s: steps of decodes only (%zu), of decodes and prompt tokens (%zu) and of prompt tokens only (%zu) took "
                "%.2fx, %.2fx and %.2fx the profile's prices (least squares); prices scaled by those\n\n",
                f.steps.c_str(), fit->kind_steps[0], fit->kind_steps[1], fit->kind_steps[2], fit->scale[0], fit->scale[1],
                fit->scale[2]);
  }
  f.tp.path = f.trace;
  const int64_t t0 = NowNs();
  Result<std::vector<loadgen::BenchRequest>> reqs = loadgen::LoadTrace(f.tp);
  if (!reqs.ok()) return Fail(reqs.status().message());
  loadgen::AdviceOptions opt;
  opt.max_running = f.max_running;
  opt.batch_tokens = f.batch_tokens;
  opt.step_ms = f.step_ms;
  opt.greedy = f.greedy;
  opt.admission = f.admission == "fifo" ? Admission::kFifo : Admission::kCacheAware;
  opt.tiers.push_back({"pool", f.pool_tokens, 0});
  if (f.host_tokens) opt.tiers.push_back({"host", f.host_tokens, 0});
  if (f.disk_tokens) opt.tiers.push_back({"disk", f.disk_tokens, 0});
  if (f.redis_tokens) opt.tiers.push_back({"redis", f.redis_tokens, f.redis_ttl_s});
  std::vector<loadgen::SimRequest> sim = loadgen::ToSimRequests(*reqs);
  // Traffic beyond one server's compute would only show unbounded queues;
  // unless the user chose a time scale, spread the arrivals so the server is
  // 70% busy (as if served by that many such servers) and say so.
  const double util = loadgen::Utilization(sim, *cost);
  double spread = 1;
  if (!f.time_scale_set && util > 0.9) {
    spread = util / 0.7;
    for (loadgen::SimRequest& r : sim) r.arrival_s *= spread;
  }
  std::unique_ptr<std::ofstream> step_log;
  if (!f.step_log.empty()) {
    step_log = std::make_unique<std::ofstream>(f.step_log);
    if (!*step_log) return Fail(fmt::format("cannot write the step log '{}'", f.step_log));
    opt.on_step = [&step_log](const loadgen::SimStep& s) { *step_log << loadgen::StepLogLine(s); };
  }
  loadgen::Advice a = loadgen::Advise(sim, *cost, opt);
  if (spread > 1) {
    a.verdict = fmt::format("At its own arrival rate this traffic needs {:.1f} times the compute of one server running "
                            "this model on this machine; the advice below spreads arrivals by that factor / 0.7 (one "
                            "server 70% busy, i.e. about {:.0f} such servers). ", util, spread) + a.verdict;
  }
  nlohmann::json meta = {{"trace", f.trace}, {"utilization_at_trace_rate", util}, {"arrival_spread", spread}, {"profile", f.profile}, {"num_requests", sim.size()},
                         {"token_scale", f.tp.token_scale}, {"time_scale", f.tp.time_scale},
                         {"sample_every", f.tp.sample_every}, {"seconds", NsToMs(NowNs() - t0) / 1e3}};
  for (const auto& t : opt.tiers) meta["capacity_tokens"][t.name] = t.capacity_tokens;
  if (!fit_meta.is_null()) meta["step_fit"] = fit_meta;
  std::printf("%s: %zu requests, advised in %.1f s; compute demand at the trace's rate: %.2f of one server%s\n\n%s",
              f.trace.c_str(), sim.size(), NsToMs(NowNs() - t0) / 1e3, util,
              spread > 1 ? fmt::format(" (arrivals spread x{:.1f})", spread).c_str() : "", loadgen::AdviceTable(a).c_str());
  if (!f.json_path.empty()) std::ofstream(f.json_path) << loadgen::AdviceJson(a, meta).dump(2) << "\n";
  if (!f.html_path.empty()) std::ofstream(f.html_path) << loadgen::AdviceHtml("promptcache advise: " + f.trace, a, meta);
  return 0;
}

}  // namespace

void RegisterCalibrate(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<CalibrateFlags>();
  CLI::App* c = app.add_subcommand("calibrate", "Measure a model's prefill, decode and tier-load costs on this machine (JSON profile)");
  c->add_option("-m,--model", f->model, "GGUF model")->required();
  c->add_option("-o,--out", f->out, "Profile to write");
  c->add_option("--disk-cache", f->disk_dir, "Also time the disk tier in this directory");
  c->add_option("--redis", f->redis, "Also time a Redis tier at HOST:PORT");
  c->add_flag("!--no-host", f->host, "Skip the host-RAM tier");
  c->add_option("--chunk", f->chunk_tokens, "Prefill chunk to time (the server's --batch-tokens)")->check(CLI::Range(1, 8192));
  c->add_option("-t,--threads", f->threads, "Threads");
  c->callback([f, exit_code] { *exit_code = Calibrate(*f); });
}

void RegisterAdvise(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<AdviseFlags>();
  f->tp.token_scale = 1;
  f->tp.max_requests = size_t{1} << 40;
  f->tp.max_output_tokens = size_t{1} << 30;
  CLI::App* c = app.add_subcommand("advise", "From a traffic log, predict what prefix caching buys (TTFT, E2E, hit rate by capacity)");
  c->add_option("--trace,--log", f->trace, "JSON Lines trace or `serve --request-log` output")->required();
  c->add_option("--profile", f->profile, "Cost profile from promptcache calibrate")->required();
  c->add_option("--pool-tokens", f->pool_tokens, "Hot KV pool capacity in tokens");
  c->add_option("--host-tokens", f->host_tokens, "Host-RAM tier capacity in tokens (0: none)");
  c->add_option("--disk-tokens", f->disk_tokens, "Disk tier capacity in tokens (0: none)");
  c->add_option("--redis-tokens", f->redis_tokens, "Redis tier capacity in tokens (0: none)");
  c->add_option("--redis-ttl", f->redis_ttl_s, "Redis TTL in seconds (0: none)");
  c->add_option("--max-running", f->max_running, "The server's --max-running");
  c->add_option("--batch-tokens", f->batch_tokens, "The server's --batch-tokens");
  c->add_option("--max-step-ms", f->step_ms, "The server's --max-step-ms")->check(CLI::Range(0.0, 60000.0));
  c->add_flag("--greedy", f->greedy, "The clients ask for temperature 0 (as bench does); default: the API's temperature 1");
  c->add_option("--admission", f->admission, "The server's --admission")->check(CLI::IsMember({"cache-aware", "fifo"}));
  c->add_option("--token-scale", f->tp.token_scale, "Multiply token counts and block size by this");
  c->add_option("--time-scale", f->tp.time_scale, "Multiply arrival times by this (default: as recorded, spread "
                "automatically when one server could not keep up)")->each([f](const std::string&) { f->time_scale_set = true; });
  c->add_option("--output-scale", f->tp.output_scale, "Multiply output lengths by this");
  c->add_option("--trace-sample", f->tp.sample_every, "Keep every k-th request");
  c->add_option("--trace-skip", f->tp.skip_lines, "Start after this many lines");
  c->add_option("--max-requests", f->tp.max_requests, "At most this many requests");
  c->add_option("--max-output-tokens", f->tp.max_output_tokens, "Cap output lengths (as bench does when replaying)");
  c->add_option("--json", f->json_path, "Write the advice as JSON");
  c->add_option("--html", f->html_path, "Write an HTML report");
  c->add_option("--steps", f->steps, "A `serve --step-log` of this model on this machine: the profile's prices are scaled "
                "to what those steps took (the server's threads, clients and moment included)");
  c->add_option("--step-log", f->step_log, "Write the simulated steps (with the cache as configured) as JSON Lines, "
                "in the format of `serve --step-log`");
  c->callback([f, exit_code] { *exit_code = Advise(*f); });
}

}  // namespace pc::cli
