// The Engine's reports: the request log, step-target accounting, the pool
// snapshot and the Prometheus metrics (described once, refreshed on render).
#include <algorithm>

#include "base/clock.h"
#include "engine/engine_active.h"

namespace pc {

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "error";
}

double RequestTimings::mean_itl_ms() const {
  if (itl_ms.empty()) return 0;
  double s = 0;
  for (double v : itl_ms) s += v;
  return s / static_cast<double>(itl_ms.size());
}

// One line per finished request (a trace line, plus what it cached and its
// queue time and TTFT as measured), kept until the loop writes it outside the
// lock (FlushRequestLog). Block ids are the chained (salted) block hashes cut
// to 53 bits, so they stay exact as JSON numbers anywhere.
void Engine::LogRequest(const Active& a) {
  std::string blocks;
  const size_t prompt_blocks = std::min(a.keys.size(), a.req.prompt.size() / cache_.block_size());
  for (const Hash128& h : std::span<const Hash128>(a.keys).first(prompt_blocks)) {
    blocks += fmt::format("{}{}", blocks.empty() ? "" : ",", h.lo & ((uint64_t{1} << 53) - 1));
  }
  pending_log_.push_back(fmt::format(
      "{{\"t_ms\":{:.3f},\"input_tokens\":{},\"output_tokens\":{},\"prefix_blocks\":[{}],\"block_size\":{},"
      "\"cached_tokens\":{},\"queue_ms\":{:.1f},\"ttft_ms\":{:.1f}}}\n",
      NsToMs(a.arrival_ns - start_ns_), a.req.prompt.size(), a.num_generated(), blocks, cache_.block_size(), a.num_cached,
      a.timings.queue_ms, a.timings.ttft_ms));
}

// Loop thread, without mu_: file I/O never holds up Submit or /metrics.
void Engine::FlushRequestLog() {
  if (!request_log_ || pending_log_.empty()) return;
  for (const std::string& line : pending_log_) *request_log_ << line;
  request_log_->flush();
  pending_log_.clear();
}

std::unique_ptr<std::ofstream> Engine::OpenLog(const std::string& path, const char* what) {
  if (path.empty()) return nullptr;
  auto f = std::make_unique<std::ofstream>(path, std::ios::app);
  if (*f) return f;
  fmt::print(stderr, "promptcache: cannot open the {} log '{}'; not logging\n", what, path);
  return nullptr;
}

std::string Engine::StepItems(const std::vector<WorkItem>& work, const std::vector<Active*>& acts) const {
  if (!step_log_) return {};
  std::string decodes, chunks;
  for (size_t i = 0; i < work.size(); ++i) {
    const size_t pos = acts[i]->seq->num_computed();
    if (work[i].decode) decodes += fmt::format("{}{}", decodes.empty() ? "" : ",", pos);
    else chunks += fmt::format("{}[{},{}]", chunks.empty() ? "" : ",", pos, work[i].num_tokens);
  }
  return fmt::format("\"decodes\":[{}],\"chunks\":[{}]", decodes, chunks);
}

// One line per step: when it started (ms since the engine started), its
// items, its tokens (with the drafts it verified), the budget's prediction and the
// measured time. Written at once: a step takes milliseconds, a line
// microseconds.
void Engine::LogStep(const std::string& items, const StepShape& ran, int64_t t0_ns, double ms) {
  if (!step_log_) return;
  *step_log_ << fmt::format("{{\"t_ms\":{:.3f},{},\"tokens\":{},\"predicted_ms\":{:.3f},\"ms\":{:.3f}}}\n",
                            NsToMs(t0_ns - start_ns_), items, ran.n_decode + ran.n_prefill, step_budget_.StepMs(ran), ms);
  step_log_->flush();
}

// Steps predicted past the target, by what put them there: the decodes
// alone, or the one-token floor a prompt always gets. Both are what the
// CPU cannot do at this target; the budget does not drift to hide them.
void Engine::NotePlannedStep(const StepShape& shape, bool lone, size_t prefill_depth) {
  if (opt_.max_step_ms <= 0 || !step_budget_.knows_prefill_cost()) return;
  const double decode_ms = step_budget_.DecodeMs(shape.n_decode, shape.decode_context);
  const double ms = step_budget_.StepMs(shape);
  metrics_.Set("promptcache_step_predicted_ms", "", ms);
  // A step without decodes may be stretched past the target on purpose
  // (StepBudget: its fixed part kept to a tenth, at the depth it was planned
  // for); only past that is it over.
  const double limit_ms =
      shape.n_decode > 0 ? opt_.max_step_ms : step_budget_.PrefillOnlyStepMs(static_cast<double>(prefill_depth));
  metrics_.Set("promptcache_prefill_cost_ms", "part=\"token_at_0\"", step_budget_.prefill_ms_per_token());
  metrics_.Set("promptcache_prefill_cost_ms", "part=\"per_1k_positions\"", 1000 * step_budget_.attention_ms_per_position());
  metrics_.Set("promptcache_prefill_cost_ms", "part=\"chunk_pass_per_1k_positions\"", 1000 * step_budget_.kv_pass_ms_per_position());
  if (ms <= limit_ms * 1.05 || (lone && shape.n_decode == 0)) return;  // a lone prompt's steps are unbounded
  const bool decodes = shape.n_decode > 0 && decode_ms > opt_.max_step_ms;
  metrics_.Add("promptcache_steps_over_target_total", decodes ? "cause=\"decodes\"" : "cause=\"prefill_floor\"", 1);
}

EngineSnapshot Engine::Snapshot() const {
  MutexLock lock(mu_);
  EngineSnapshot s = pool_snapshot_;
  s.num_running = scheduler_.num_running();
  s.num_waiting = scheduler_.num_waiting();
  return s;
}

// Requires mu_; runs on the loop thread, the only one that touches the pool.
void Engine::RefreshPoolSnapshot(bool between_steps) {
  const BlockPool& p = cache_.pool();
  pool_snapshot_.num_blocks = static_cast<size_t>(p.num_blocks());
  pool_snapshot_.kv_bytes = cache_.store().bytes();
  pool_snapshot_.num_used_blocks = static_cast<size_t>(p.num_blocks() - p.num_free());
  pool_snapshot_.num_cached_blocks = static_cast<size_t>(p.num_cached());
  pool_snapshot_.block_size = cache_.block_size();
  const BlockPool& lp = cache_.local_pool();
  const KvStore& kv = cache_.store();
  EngineSnapshot& s = pool_snapshot_;
  s.num_local_blocks = cache_.split() ? static_cast<size_t>(lp.num_blocks() - 1) : 0;  // less the sentinel
  s.num_used_local_blocks = cache_.split() ? static_cast<size_t>(lp.num_blocks() - lp.num_free() - 1) : 0;
  s.num_cached_local_blocks = cache_.split() ? static_cast<size_t>(lp.num_cached()) : 0;
  s.local_bound_bytes = cache_.local_blocks_per_sequence() * kv.local_block_bytes();
  s.window_tokens = cache_.window_tokens();
  if (!between_steps) return;
  for (const auto& [id, a] : active_) {
    if (!a->seq) continue;
    s.peak_sequence_global_bytes = std::max(s.peak_sequence_global_bytes, a->seq->num_global_blocks() * kv.global_block_bytes());
    s.peak_sequence_local_bytes = std::max(s.peak_sequence_local_bytes, a->seq->num_local_blocks_held() * kv.local_block_bytes());
  }
}

void Engine::DescribeMetrics() {
  MetricsRegistry& m = metrics_;
  std::vector<std::string> tier_labels = {"tier=\"pool\""};
  if (opt_.tiers) {
    for (const auto& t : opt_.tiers->tiers()) tier_labels.push_back(fmt::format("tier=\"{}\"", t->name()));
  }
  m.Describe("promptcache_ttft_seconds", "histogram", "Arrival to first token.");
  m.Describe("promptcache_itl_seconds", "histogram", "Gap between consecutive tokens of a request.");
  m.Describe("promptcache_e2e_seconds", "histogram", "Arrival to last token.");
  m.Describe("promptcache_queue_seconds", "histogram", "Arrival to admission into the running batch.");
  m.Describe("promptcache_preemptions_total", "counter",
             "Running sequences sent back to the queue because the KV pool ran short.");
  m.Describe("promptcache_resumed_cached_tokens_total", "counter",
             "Tokens a preempted sequence found in the prefix cache when it resumed.");
  m.Describe("promptcache_step_seconds", "histogram", "Duration of one forward step (decode and prefill together).");
  m.Describe("promptcache_steps_over_target_total", "counter",
             "Steps planned past the step-time target (--max-step-ms; a step without decodes: past the length the "
             "budget allows it) by cause: the decodes alone exceed it, or the one prompt token a step always advances does.",
             {"cause=\"decodes\"", "cause=\"prefill_floor\""});
  m.Describe("promptcache_steps_dropped_total", "counter",
             "Steps dropped between two stages of a layer so that cache hits that arrived got a step of their own first "
             "(serve --no-step-drop: never).");
  m.Describe("promptcache_dropped_step_seconds_total", "counter", "Compute time lost in dropped steps.");
  m.Describe("promptcache_steps_paused_total", "counter",
             "Steps paused between two stages of a layer while the prompts of cache hits that arrived ran "
             "in a step of their own; nothing is lost (serve --no-step-drop: never).");
  m.Describe("promptcache_idle_spins_total", "counter",
             "Idle spins begun: times the step loop ran out of work with serve --idle-spin-ms above 0.");
  m.Describe("promptcache_idle_spinning", "gauge", "1 while the step loop spins with nothing to run, else 0.");
  m.Describe("promptcache_idle_spin_seconds_total", "counter",
             "Time the step loop spun with nothing to run, keeping the pool's threads awake for the next request "
             "(serve --idle-spin-ms; each pool thread spun about as long).");
  m.Describe("promptcache_step_predicted_ms", "gauge", "The step budget's prediction for the last step planned.");
  m.Describe("promptcache_prefill_cost_ms", "gauge",
             "The step budget's prefill price: ms per prompt token at position 0, and its growth per 1,000 positions "
             "(calibrated at start, refined from measured steps).",
             {"part=\"token_at_0\"", "part=\"per_1k_positions\""});
  m.Describe("promptcache_step_tokens_total", "counter", "Tokens computed in steps, by kind.",
             {"kind=\"decode\"", "kind=\"prefill\"", "kind=\"draft\""});
  m.Describe("promptcache_tier_load_seconds", "histogram", "Time to bring cached KV back from a tier.",
             std::vector<std::string>(tier_labels.begin() + 1, tier_labels.end()));
  m.Describe("promptcache_requests_total", "counter", "Finished requests by finish reason.",
             {"finish_reason=\"stop\"", "finish_reason=\"length\"", "finish_reason=\"cancelled\"",
              "finish_reason=\"error\""});
  m.Describe("promptcache_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.");
  m.Describe("promptcache_generation_tokens_total", "counter", "Generated tokens.");
  m.Describe("promptcache_prefix_cache_queried_tokens_total", "counter", "Prompt tokens looked up in the prefix cache.");
  m.Describe("promptcache_prefix_cache_hit_tokens_total", "counter", "Prompt tokens whose KV was reused, by tier.",
             tier_labels);
  m.Describe("promptcache_prefix_cache_logits_hits_total", "counter",
             "Prompts cached whole whose first token came from their kept last logits (no forward pass).");
  m.Describe("promptcache_draft_tokens_total", "counter",
             "Prompt-lookup draft tokens verified, and those accepted (their rows gave the next token).",
             {"result=\"drafted\"", "result=\"accepted\""});
  m.Describe("promptcache_draft_acceptance_ratio", "gauge", "Accepted over drafted tokens since start.");
  m.Describe("promptcache_requests_running", "gauge", "Requests in the running batch.");
  m.Describe("promptcache_requests_waiting", "gauge", "Requests in the queue.");
  m.Describe("promptcache_kv_pool_blocks", "gauge", "KV pool blocks by state.",
             {"state=\"used\"", "state=\"cached\"", "state=\"total\""});
  m.Describe("promptcache_kv_pool_usage_ratio", "gauge", "Fraction of KV blocks held by running requests.");
  m.Describe("promptcache_kv_block_size_tokens", "gauge", "Tokens per KV block.");
  m.Describe("promptcache_kv_sequence_peak_bytes", "gauge",
             "The most K/V bytes one sequence has held between steps since start, by kind of layer: global layers "
             "(every position), "
             "sliding-window layers (only the window's blocks on a split cache; bound: "
             "promptcache_kv_window_bound_bytes).", {"layers=\"global\"", "layers=\"local\""});
  if (cache_.split()) {
    m.Describe("promptcache_kv_window_bound_bytes", "gauge",
               "K/V bytes of the sliding-window layers a sequence holds at most between steps: ceil(window/block)+1 "
               "blocks (blocks reserved for rejected draft tokens come on top until the next step).");
    m.Describe("promptcache_kv_local_pool_blocks", "gauge",
               "Blocks of the sliding-window layers' pool by state (used: held by running sequences; cached: window "
               "tails kept for prefix hits).", {"state=\"used\"", "state=\"cached\"", "state=\"total\""});
  }
  m.Describe("promptcache_min_useful_match_tokens", "gauge",
             "Shortest cached prefix (from position 0) whose reuse beats recomputing it, by tier (measured costs); "
             "one block for the pool, where reuse costs nothing.", tier_labels);
  if (opt_.tiers) {
    m.Describe("promptcache_tier_entries", "gauge", "Blocks stored per spill tier.", {});
    m.Describe("promptcache_tier_bytes", "gauge", "Bytes stored per spill tier.", {});
    m.Describe("promptcache_tier_corrupt_blocks_total", "counter", "Blocks that failed verification on load.", {});
    m.Describe("promptcache_tier_dropped_blocks_total", "counter", "Blocks a tier refused or lost on insert.", {});
    m.Describe("promptcache_tier_healthy", "gauge", "1 while the tier works, 0 while it is down or refusing writes.", {});
    m.Describe("promptcache_tier_rejected_blocks_total", "counter",
               "Blocks a tier returned whose content was for other tokens than their key stands for.",
               std::vector<std::string>(tier_labels.begin() + 1, tier_labels.end()));
  }
}

std::string Engine::RenderMetrics() {
  const EngineSnapshot s = Snapshot();
  metrics_.Set("promptcache_requests_running", "", static_cast<double>(s.num_running));
  metrics_.Set("promptcache_requests_waiting", "", static_cast<double>(s.num_waiting));
  metrics_.Set("promptcache_kv_pool_blocks", "state=\"used\"", static_cast<double>(s.num_used_blocks));
  metrics_.Set("promptcache_kv_pool_blocks", "state=\"cached\"", static_cast<double>(s.num_cached_blocks));
  metrics_.Set("promptcache_kv_pool_blocks", "state=\"total\"", static_cast<double>(s.num_blocks));
  metrics_.Set("promptcache_kv_pool_usage_ratio", "",
               s.num_blocks ? static_cast<double>(s.num_used_blocks) / static_cast<double>(s.num_blocks) : 0);
  metrics_.Set("promptcache_kv_block_size_tokens", "", static_cast<double>(s.block_size));
  metrics_.Set("promptcache_kv_sequence_peak_bytes", "layers=\"global\"", static_cast<double>(s.peak_sequence_global_bytes));
  metrics_.Set("promptcache_kv_sequence_peak_bytes", "layers=\"local\"", static_cast<double>(s.peak_sequence_local_bytes));
  if (cache_.split()) {
    metrics_.Set("promptcache_kv_window_bound_bytes", "", static_cast<double>(s.local_bound_bytes));
    metrics_.Set("promptcache_kv_local_pool_blocks", "state=\"used\"", static_cast<double>(s.num_used_local_blocks));
    metrics_.Set("promptcache_kv_local_pool_blocks", "state=\"cached\"", static_cast<double>(s.num_cached_local_blocks));
    metrics_.Set("promptcache_kv_local_pool_blocks", "state=\"total\"", static_cast<double>(s.num_local_blocks));
  }
  const double drafted = metrics_.Get("promptcache_draft_tokens_total", "result=\"drafted\"");
  metrics_.Set("promptcache_draft_acceptance_ratio", "",
               drafted > 0 ? metrics_.Get("promptcache_draft_tokens_total", "result=\"accepted\"") / drafted : 0);
  metrics_.Set("promptcache_min_useful_match_tokens", "tier=\"pool\"", static_cast<double>(s.block_size));
  if (opt_.tiers) {
    for (const auto& t : opt_.tiers->tiers()) {
      const std::string l = fmt::format("tier=\"{}\"", t->name());
      const TierStats ts = t->stats();
      metrics_.Set("promptcache_tier_entries", l, static_cast<double>(ts.num_entries));
      metrics_.Set("promptcache_tier_bytes", l, static_cast<double>(ts.bytes_used));
      metrics_.Set("promptcache_tier_corrupt_blocks_total", l, static_cast<double>(ts.num_corrupt));
      metrics_.Set("promptcache_tier_dropped_blocks_total", l, static_cast<double>(ts.num_dropped));
      metrics_.Set("promptcache_tier_healthy", l, ts.healthy ? 1 : 0);
      metrics_.Set("promptcache_min_useful_match_tokens", l,
                   static_cast<double>(opt_.tiers->costs().MinUsefulMatchTokens(t->name(), s.block_size, context_length())));
    }
  }
  return metrics_.Render();
}
}  // namespace pc
