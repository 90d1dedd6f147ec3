#include "engine/engine.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "base/check.h"
#include "base/clock.h"
#include "engine/engine_active.h"

namespace pc {

std::optional<StreamEvent> RequestStream::Next(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  MutexLock lock(mu_);
  while (events_.empty()) {
    if (!lock.WaitUntil(cv_, deadline) && events_.empty()) return std::nullopt;
  }
  StreamEvent ev = std::move(events_.front());
  events_.pop_front();
  return ev;
}

void RequestStream::Push(StreamEvent ev) {
  {
    MutexLock lock(mu_);
    events_.push_back(std::move(ev));
  }
  cv_.notify_one();
}

namespace {
uint64_t TenantId(const std::string& tenant) {
  return tenant.empty() ? 0 : std::hash<std::string>{}(tenant) | 1;
}

// The default pool holds a few contexts of the length served, not of the
// model's trained length (which may be 128k tokens).
KvShape WithContext(KvShape c, size_t ctx_tokens) {
  if (ctx_tokens > 0) c.n_ctx = ctx_tokens;
  return c;
}

CacheOptions WithDefaultMemory(const KvShape& c, size_t step_tokens, CacheOptions o) {
  o.step_tokens = step_tokens;
  if (o.mem_bytes == 0) o.mem_bytes = DefaultKvCacheBytes(c, o);
  return o;
}
}  // namespace

Engine::Engine(Model& model, const Tokenizer& tok, const EngineOptions& opt)
    : model_(model),
      tok_(tok),
      opt_(opt),
      cache_(WithContext(model.config().kv_shape(), opt.ctx_tokens), model.fingerprint(),
             WithDefaultMemory(WithContext(model.config().kv_shape(), opt.ctx_tokens), opt.max_batch_tokens, opt.cache)),
      logits_memo_(opt.logits_memo_bytes, static_cast<size_t>(model.config().n_vocab)),
      scheduler_(SchedulerOptions{opt.max_batch_tokens, opt.max_running, opt.max_waiting,
                                  static_cast<size_t>(cache_.pool().num_blocks()), cache_.block_size(),
                                  std::max<size_t>(1, static_cast<size_t>(cache_.pool().num_blocks()) / 100), opt.admission,
                                  model.prompt_tail_tokens()}),
      step_budget_(StepBudgetOptions{opt.max_step_ms, opt.max_batch_tokens, cache_.block_size()}) {
  // A row of logits each, touched now: grown inside a step, a fresh row
  // (128 KB at 32k tokens) costs that step its page faults.
  step_logits_.assign(static_cast<size_t>(model.config().n_vocab), 0.0f);
  inside_logits_.assign(static_cast<size_t>(model.config().n_vocab), 0.0f);
  step_budget_.SetKvPass(opt_.kv_pass_ms_per_position, opt_.prefill_profile_chunk);
  step_budget_.SetPrefillProfile(opt_.prefill_profile);
  if (opt_.tiers) cache_.set_listener(opt_.tiers);
  start_ns_ = NowNs();
  request_log_ = OpenLog(opt_.request_log_path, "request");
  step_log_ = OpenLog(opt_.step_log_path, "step");
  DescribeMetrics();
  RefreshPoolSnapshot();  // no other thread yet
  loop_ = std::thread([this] { Loop(); });
}

Engine::~Engine() {
  stopping_.store(true, std::memory_order_relaxed);
  CancelAll();
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  loop_.join();
  // The model (and its pool) outlives the engine: its workers sleep now
  // rather than at the end of a spin nobody waits on.
  if (opt_.idle_spin_ms > 0) model_.pool().KeepAwakeUntil(0);
  FlushRequestLog();  // the loop has stopped: this thread owns the log now
  MutexLock lock(mu_);
  for (auto& [id, a] : active_) {
    StreamEvent ev;
    ev.done = true;
    ev.finish = FinishReason::kCancelled;
    a->stream->Push(std::move(ev));
  }
  active_.clear();
}

size_t Engine::context_length() const {
  const size_t want = opt_.ctx_tokens > 0 ? opt_.ctx_tokens : static_cast<size_t>(model_.config().n_ctx);
  return std::min(want, static_cast<size_t>(cache_.pool().num_blocks()) * cache_.block_size());
}

SubmitOutcome Engine::Submit(EngineRequest req) {
  SubmitOutcome out;
  const ModelConfig& c = model_.config();
  auto invalid = [&](std::string msg) {
    out.error = SubmitError::kInvalid;
    out.message = std::move(msg);
    return out;
  };
  if (req.prompt.empty()) return invalid("the prompt is empty");
  for (int32_t id : req.prompt) {
    if (id < 0 || id >= c.n_vocab) return invalid(fmt::format("token id {} is outside the vocabulary (0..{})", id, c.n_vocab - 1));
  }
  if (req.max_tokens < 1) return invalid("max_tokens must be at least 1");
  if (req.draft_tokens < 0) req.draft_tokens = static_cast<int>(opt_.draft_tokens);
  if (model_.numerics() == Numerics::kGgmlCompat) req.draft_tokens = 0;
  const size_t total = req.prompt.size() + static_cast<size_t>(req.max_tokens);
  if (total > context_length()) {
    return invalid(fmt::format("this model's maximum context length is {} tokens; the prompt has {} and max_tokens asks "
                               "for {} more", context_length(), req.prompt.size(), req.max_tokens));
  }
  std::vector<Hash128> hashes;
  if (req.use_cache || request_log_) hashes = cache_.BlockHashes(req.prompt, req.salt);
  MutexLock lock(mu_);
  if (draining_ || stop_) {
    out.error = SubmitError::kDraining;
    out.message = "the server is shutting down";
    return out;
  }
  const uint64_t id = next_id_++;
  auto progress = std::make_shared<RequestProgress>();
  progress->tokens = req.prompt;
  SchedRequest sr{id, req.prompt.size(), static_cast<size_t>(req.max_tokens),
                  req.use_cache ? hashes : std::vector<Hash128>{}, NowNs(), TenantId(req.tenant), progress};
  const SubmitResult r = scheduler_.Submit(sr);
  if (r == SubmitResult::kTooLarge) {
    return invalid(fmt::format("the request needs {} KV blocks; the pool has {}", scheduler_.BlocksNeeded(sr),
                               cache_.pool().num_blocks()));
  }
  if (r == SubmitResult::kQueueFull) {
    out.error = SubmitError::kQueueFull;
    out.message = fmt::format("the queue is full ({} waiting requests)", scheduler_.num_waiting());
    return out;
  }
  auto a = std::make_unique<Active>(id, std::move(req), std::move(progress), tok_);
  a->arrival_ns = sr.arrival_ns;
  a->keys = std::move(hashes);
  out.stream = a->stream;
  active_.emplace(id, std::move(a));
  arrivals_.fetch_add(1, std::memory_order_release);
  wake_.notify_one();
  return out;
}

void Engine::BeginDrain() {
  MutexLock lock(mu_);
  draining_ = true;
}

void Engine::CancelAll() {
  MutexLock lock(mu_);
  for (auto& [id, a] : active_) a->stream->Cancel();
  wake_.notify_one();
}

bool Engine::Idle() const {
  MutexLock lock(mu_);
  return active_.empty();
}

void Engine::Loop() {
  for (;;) {
    IdleSpin();
    {
      MutexLock lock(mu_);
      while (!stop_ && active_.empty()) lock.Wait(wake_);
      if (stop_) return;
    }
    if (!Step()) {
      MutexLock lock(mu_);
      lock.WaitFor(wake_, std::chrono::milliseconds(2));
    }
  }
}

void Engine::IdleSpin() {
  if (opt_.idle_spin_ms <= 0) return;
  uint64_t seen = 0;
  {
    MutexLock lock(mu_);
    if (stop_ || !active_.empty()) return;
    seen = arrivals_.load(std::memory_order_acquire);
  }
  const int64_t t0 = NowNs(), deadline = t0 + static_cast<int64_t>(opt_.idle_spin_ms * 1e6);
  model_.pool().KeepAwakeUntil(deadline);
  metrics_.Add("promptcache_idle_spins_total", "", 1);
  metrics_.Set("promptcache_idle_spinning", "", 1);
  int64_t now = t0, last_yield = t0;
  while (arrivals_.load(std::memory_order_acquire) == seen && !stopping_.load(std::memory_order_relaxed)) {
    for (int i = 0; i < 64; ++i) CpuPause();
    now = NowNs();
    if (now >= deadline) break;
    if (YieldDue(now, &last_yield, kAwakeYieldNs)) sched_yield();
  }
  metrics_.Add("promptcache_idle_spin_seconds_total", "", NsToMs(now - t0) / 1e3);
  metrics_.Set("promptcache_idle_spinning", "", 0);
}

// Requires mu_. Ends the request: done event, scheduler and metrics, blocks freed.
void Engine::Finish(Active& a, FinishReason reason, int64_t now_ns, const std::string& error) {
  StreamEvent ev;
  ev.done = true;
  ev.finish = reason;
  ev.error = error;
  ev.num_prompt_tokens = a.req.prompt.size();
  ev.num_cached_tokens = a.num_cached;
  ev.num_generated_tokens = a.num_generated();
  ev.num_draft_tokens = a.num_drafted;
  ev.num_accepted_draft_tokens = a.num_accepted;
  a.timings.e2e_ms = NsToMs(now_ns - a.arrival_ns);
  ev.timings = a.timings;
  ev.cached_by_tier = a.cached_by_tier;
  ev.tier_load_ms = a.tier_load_ms;
  const std::string reason_label = fmt::format("finish_reason=\"{}\"", FinishReasonName(reason));
  metrics_.Add("promptcache_requests_total", reason_label, 1);
  if (a.num_generated() > 0) {
    metrics_.Observe("promptcache_e2e_seconds", "", a.timings.e2e_ms / 1e3);
    metrics_.Add("promptcache_generation_tokens_total", "", static_cast<double>(a.num_generated()));
  }
  a.stream->Push(std::move(ev));
  if (request_log_) LogRequest(a);
  scheduler_.Finish(a.id);
  active_.erase(a.id);  // destroys a: its sequence returns its blocks
  RefreshPoolSnapshot();
}

void Engine::DropCancelled() {
  MutexLock lock(mu_);
  std::vector<Active*> gone;
  for (auto& [id, a] : active_) {
    if (a->stream->cancelled()) gone.push_back(a.get());
  }
  const int64_t now = NowNs();
  for (Active* a : gone) Finish(*a, FinishReason::kCancelled, now);
}

// Requires mu_. Admitted requests adopt their cached prefix: at once from the
// pool, or after the tier stack has loaded what the pool lacks.
void Engine::StartAdmitted(int64_t now_ns) {
  PoolView pool;
  pool.free_blocks = static_cast<size_t>(cache_.pool().num_free());
  pool.cached_leading_blocks = [&](const SchedRequest& r) { return cache_.NumPoolLeading(r.block_hashes); };
  pool.cost = &step_budget_;
  for (uint64_t id : scheduler_.Admit(now_ns, pool)) {
    Active& a = *active_.at(id);
    if (a.num_preemptions == 0) a.admit_ns = now_ns;
    if (opt_.tiers && a.req.use_cache) {
      const std::vector<Hash128>& keys = a.keys;
      const size_t k = cache_.NumPoolLeading(keys);
      if (k < keys.size()) {
        a.loading = true;
        opt_.tiers->SubmitLoad(id, std::vector<Hash128>(keys.begin() + static_cast<std::ptrdiff_t>(k), keys.end()),
                               k * cache_.block_size(), cache_.block_size());
        continue;
      }
    }
    StartSequence(a, now_ns, {});
  }
}

// Requires mu_. Installs finished tier loads into the pool and starts their requests.
void Engine::InstallLoads(int64_t now_ns) {
  if (!opt_.tiers) return;
  for (LoadResult& r : opt_.tiers->TakeFinishedLoads()) {
    auto it = active_.find(r.request_id);
    if (it == active_.end()) continue;  // cancelled while loading
    Active& a = *it->second;
    a.loading = false;
    // The leading blocks still in the pool first: the installs below take
    // blocks, and must not evict the prefix they continue.
    std::vector<int32_t> held = cache_.HoldPoolLeading(a.keys);
    std::map<std::string, size_t> loaded_tokens;
    const size_t bs = cache_.block_size();
    for (size_t i = 0; i < r.keys.size(); ++i) {
      // The tokens this block must hold: a tier entry whose content is for
      // other tokens is refused (and counted) whatever its key says.
      const size_t first = r.first_token + i * bs;
      if (first + bs > a.tokens().size()) break;
      const PrefixCache::Install got =
          cache_.InstallBlock(r.keys[i], r.payloads[i], std::span<const int32_t>(a.tokens()).subspan(first, bs));
      using R = PrefixCache::Install::Result;
      if (got.result == R::kWrongTokens || got.result == R::kMalformed) {
        metrics_.Add("promptcache_tier_rejected_blocks_total", fmt::format("tier=\"{}\"", r.tier_of[i]), 1);
        break;  // the chain is broken from here
      }
      if (!got.installed()) continue;  // computed meanwhile by another request, or no room
      held.push_back(got.block);
      loaded_tokens[r.tier_of[i]] += cache_.block_size();
    }
    for (const auto& [tier, ms] : r.load_ms_by_tier) {
      a.tier_load_ms[tier] += ms;
      metrics_.Observe("promptcache_tier_load_seconds", fmt::format("tier=\"{}\"", tier), ms / 1e3);
    }
    StartSequence(a, now_ns, loaded_tokens);
    for (int32_t b : held) cache_.ReleaseBlock(b);
    opt_.tiers->Recycle(std::move(r.payloads));  // copied into the pool
  }
}

// Fresh prompts that use the cache keep and look up their last logits
// (a resumed sequence's tokens are not a prompt anyone sent).
bool Engine::UsesLogitsMemo(const Active& a) const {
  return a.req.use_cache && a.num_preemptions == 0 && opt_.logits_memo_bytes > 0;
}

// Requires mu_.
void Engine::StartSequence(Active& a, int64_t now_ns, const std::map<std::string, size_t>& loaded_tokens) {
  // A fresh prompt seen before may have its last logits kept: then every
  // cached token is adopted, and if that is all of them, nothing is computed.
  std::vector<float> memo;
  const bool have_memo = UsesLogitsMemo(a) && logits_memo_.Get(cache_.PromptKey(a.tokens(), a.req.salt, a.keys), &memo);
  Result<std::unique_ptr<CachedSequence>> seq = cache_.Start(a.progress, a.req.salt, a.req.use_cache, a.keys, have_memo);
  if (!seq.ok()) {
    // No block for a full-hit copy: others hold the pool; wait for them.
    if (scheduler_.NumStarted() > 0) return Requeue(a, /*preempted=*/false);
    Finish(a, FinishReason::kError, now_ns, seq.status().message());
    return;
  }
  a.seq = std::move(*seq);
  if (have_memo && a.seq->num_computed() == a.tokens().size()) {
    a.memo_logits = std::move(memo);
    memo_ready_.push_back(a.id);
    metrics_.Add("promptcache_prefix_cache_logits_hits_total", "", 1);
  }
  if (a.num_preemptions > 0) {  // resumed: its first admission was reported
    metrics_.Add("promptcache_resumed_cached_tokens_total", "", static_cast<double>(a.seq->num_cached_tokens()));
    scheduler_.Started(a.id);  // with what the cache adopted (the record's count)
    RefreshPoolSnapshot();
    return;
  }
  a.timings.queue_ms = NsToMs(now_ns - a.arrival_ns);
  metrics_.Observe("promptcache_queue_seconds", "", a.timings.queue_ms / 1e3);
  a.num_cached = a.seq->num_cached_tokens();
  // Attribute cached tokens to tiers; the pool supplied the rest.
  size_t left = a.num_cached;
  for (const auto& [tier, n] : loaded_tokens) {
    const size_t take = std::min(n, left);
    a.cached_by_tier[tier] = take;
    left -= take;
  }
  a.cached_by_tier["pool"] = left;
  scheduler_.Started(a.id);
  RefreshPoolSnapshot();
  metrics_.Add("promptcache_prompt_tokens_total", "", static_cast<double>(a.req.prompt.size()));
  if (a.req.use_cache) {
    metrics_.Add("promptcache_prefix_cache_queried_tokens_total", "", static_cast<double>(a.req.prompt.size()));
    for (const auto& [tier, n] : a.cached_by_tier) {
      metrics_.Add("promptcache_prefix_cache_hit_tokens_total", fmt::format("tier=\"{}\"", tier), static_cast<double>(n));
    }
  }
}

void Engine::EmitFromMemo(std::vector<uint64_t> ids) {
  bool emitted = false;
  for (uint64_t id : ids) {
    Active* a = nullptr;
    {
      MutexLock lock(mu_);
      auto it = active_.find(id);
      if (it != active_.end()) a = it->second.get();
    }
    if (a == nullptr || a->memo_logits.empty()) continue;
    const std::vector<float> logits = std::move(a->memo_logits);  // `a` may finish (and go) below
    a->memo_logits.clear();
    SampleAndEmit(*a, logits, NowNs());
    emitted = true;
  }
  if (emitted) model_.pool().YieldCores();  // the threads woken to write them (RunStep)
}

// The grammar past a sampled token; true when its sentence is complete. A
// waiting grammar starts where its trigger appears in the output (the bytes
// from the trigger on are its first); if they do not fit, it is dropped and
// the reply stays free.
bool Engine::AdvanceGrammar(Active& a, int32_t token) {
  if (!a.req.grammar) return false;
  if (!masker_) masker_ = std::make_unique<GrammarMasker>(tok_);
  if (a.grammar) return masker_->Advance(a.grammar.get(), token);
  const std::string& trigger = a.req.grammar_trigger;
  if (trigger.empty()) return false;
  a.trigger_tail += masker_->Bytes(token);
  const size_t at = a.trigger_tail.find(trigger);
  if (at == std::string::npos) {
    if (a.trigger_tail.size() > trigger.size()) a.trigger_tail.erase(0, a.trigger_tail.size() - trigger.size());
    return false;
  }
  a.grammar = std::make_unique<structured::SeqMatcher>(a.req.grammar.get());
  const bool fits = a.grammar->Consume(std::string_view(a.trigger_tail).substr(at));
  a.req.grammar_trigger.clear();  // once: triggered or given up
  if (!fits) {
    a.grammar.reset();
    a.req.grammar.reset();
    return false;
  }
  return a.grammar->Complete();
}

int32_t Engine::SampleAndEmit(Active& a, std::span<const float> logits, int64_t now_ns) {
  StreamEvent ev;
  const bool early = a.num_generated() < static_cast<size_t>(std::max(a.req.min_tokens, 0));
  if (a.req.adjust.active() || early) {
    adjusted_logits_.assign(logits.begin(), logits.end());
    AdjustLogits(a.req.adjust, a.tokens(), a.num_generated(), adjusted_logits_);
    if (early) {
      for (int32_t id : tok_.vocab().end_of_generation)
        if (static_cast<size_t>(id) < adjusted_logits_.size()) adjusted_logits_[static_cast<size_t>(id)] = -INFINITY;
      for (int32_t id : a.req.stop_token_ids)
        if (static_cast<size_t>(id) < adjusted_logits_.size()) adjusted_logits_[static_cast<size_t>(id)] = -INFINITY;
    }
    logits = adjusted_logits_;
  }
  if (a.grammar) {
    if (!masker_) masker_ = std::make_unique<GrammarMasker>(tok_);
    if (!masker_->Mask(*a.grammar, logits, &masked_logits_)) {
      MutexLock lock(mu_);
      Finish(a, FinishReason::kError, now_ns, "no token of the vocabulary can continue the constrained output");
      return -1;
    }
    logits = masked_logits_;
  }
  ev.token = a.sampler.Sample(logits);
  if (a.req.ignore_eos && tok_.IsEndOfGeneration(ev.token)) {
    // As llama.cpp's server (and the references recorded with it): an
    // end-of-generation token is never chosen, while the reported logprobs
    // keep the model's own distribution, as its n_probs do. Drawn again
    // without those tokens only when one came up (no copy per step
    // otherwise): the argmax of the rest, or a draw from the distribution
    // conditioned on not ending, as masking them would give.
    sampled_logits_.assign(logits.begin(), logits.end());
    for (int32_t id : tok_.vocab().end_of_generation)
      if (static_cast<size_t>(id) < sampled_logits_.size()) sampled_logits_[static_cast<size_t>(id)] = -INFINITY;
    ev.token = a.sampler.Sample(sampled_logits_);
  }
  if (a.req.want_logprobs) ev.logprob = TokenLogprob(logits, ev.token);
  if (a.req.top_logprobs > 0) ev.top = TopLogprobs(logits, a.req.top_logprobs);
  if (a.num_generated() == 0) {
    a.timings.ttft_ms = NsToMs(now_ns - a.arrival_ns);
    a.timings.prefill_ms = NsToMs(now_ns - a.admit_ns);
    metrics_.Observe("promptcache_ttft_seconds", "", a.timings.ttft_ms / 1e3);
  } else {
    const double gap_ms = NsToMs(now_ns - a.last_token_ns);
    a.timings.itl_ms.push_back(gap_ms);
    metrics_.Observe("promptcache_itl_seconds", "", gap_ms / 1e3);
  }
  a.last_token_ns = now_ns;
  a.last_token = ev.token;
  a.tokens().push_back(ev.token);
  const bool eos = (tok_.IsEndOfGeneration(ev.token) && !a.req.ignore_eos) ||
                   std::find(a.req.stop_token_ids.begin(), a.req.stop_token_ids.end(), ev.token) != a.req.stop_token_ids.end();
  // A constrained value that closed ends the request (finish "stop").
  const bool complete = !eos && AdvanceGrammar(a, ev.token);
  const bool length = a.num_generated() >= static_cast<size_t>(a.req.max_tokens);
  std::string text = eos                                                     ? a.decoder.Flush()
                     : a.req.control_text && tok_.vocab().IsControl(ev.token) ? a.decoder.Flush() + tok_.vocab().text[size_t(ev.token)]
                                                                              : a.decoder.Push(ev.token);
  if (length || complete) text += a.decoder.Flush();
  ev.text = a.stop.Push(text);
  const bool stopped = a.stop.stopped();
  if ((eos || length || complete) && !stopped) ev.text += a.stop.Flush();
  if (!eos || !ev.text.empty()) a.stream->Push(std::move(ev));
  if (stopped || eos || length || complete) {
    MutexLock lock(mu_);
    Finish(a, stopped || eos || complete ? FinishReason::kStop : FinishReason::kLength, now_ns);
    return -1;
  }
  return a.last_token;
}

// Requires mu_. Puts a running sequence back at the head of the queue. Its
// full blocks stay indexed (cached, or spilled to a tier when evicted), so
// resuming prefills only what was lost; the tokens it generated are part of
// what it prefills then, and its sampler keeps its state.
void Engine::Requeue(Active& a, bool preempted) {
  a.seq.reset();
  a.keys = a.req.use_cache || request_log_ ? cache_.BlockHashes(a.tokens(), a.req.salt) : std::vector<Hash128>{};
  const size_t left = static_cast<size_t>(a.req.max_tokens) - a.num_generated();
  std::vector<Hash128> sched_keys = a.req.use_cache ? a.keys : std::vector<Hash128>{};
  scheduler_.Preempt(a.id, SchedRequest{a.id, a.tokens().size(), left, std::move(sched_keys), a.arrival_ns,
                                        TenantId(a.req.tenant), a.progress});
  if (preempted) {
    ++a.num_preemptions;
    metrics_.Add("promptcache_preemptions_total", "", 1);
  }
  RefreshPoolSnapshot();
}

// Requires mu_. The step's work with a block for every token in it: while
// the pool runs short, the most recently admitted sequence is preempted and
// the step planned again (the oldest sequences always make progress).
std::vector<WorkItem> Engine::PlanWithBlocks() {
  for (;;) {
    std::vector<WorkItem> work = scheduler_.PlanStep(step_budget_);
    KeepExpedited(work);
    bool short_of_blocks = false;
    for (const WorkItem& w : work) {
      CachedSequence& seq = *active_.at(w.id)->seq;
      if (!seq.Reserve(seq.num_computed() + w.num_tokens).ok()) {
        short_of_blocks = true;
        break;
      }
    }
    if (!short_of_blocks) return work;
    const std::optional<uint64_t> victim = scheduler_.NewestStarted();
    PC_CHECK(victim.has_value());
    Active& a = *active_.at(*victim);
    if (scheduler_.NumStarted() == 1) {  // alone and still short: blocks held outside any sequence
      Finish(a, FinishReason::kError, NowNs(), "KV pool exhausted");
      continue;
    }
    Requeue(a, /*preempted=*/true);
  }
}

bool Engine::Step() {
  DropCancelled();
  FlushRequestLog();
  std::vector<WorkItem> work;
  std::vector<Active*> acts;
  bool lone = false;
  size_t prefill_depth = 0;  // what sized the step (Scheduler::PrefillDepth)
  std::vector<uint64_t> memo_ids;
  // Requests that arrive after this admission pass are looked at between
  // the layers of this step's forward pass (KeepStep), however long the
  // planning in between takes.
  arrivals_admitted_ = arrivals_.load(std::memory_order_acquire);
  {
    MutexLock lock(mu_);
    InstallLoads(NowNs());
    StartAdmitted(NowNs());
    memo_ids = std::exchange(memo_ready_, {});
  }
  EmitFromMemo(std::move(memo_ids));
  {
    MutexLock lock(mu_);
    work = PlanWithBlocks();
    lone = scheduler_.LonePrefill();
    prefill_depth = scheduler_.PrefillDepth();
    for (const WorkItem& w : work) acts.push_back(active_.at(w.id).get());
  }
  if (work.empty()) {
    FlushRequestLog();
    return false;
  }
  const StepShape shape = ShapeOf(work, acts);
  NotePlannedStep(shape, lone, prefill_depth);
  const std::string items = StepItems(work, acts);
  StepInFlight watch = Watch(work, shape);
  const int64_t t0 = watch.t0_ns;
  const std::optional<StepShape> done = RunStep(work, acts, shape, &watch);  // with the drafts it verified
  // Its own time: the steps run inside it, if any, were counted apart.
  const double ms = NsToMs(NowNs() - t0) - watch.paused_ms;
  if (!done) {
    metrics_.Add("promptcache_steps_dropped_total", "", 1);
    metrics_.Add("promptcache_dropped_step_seconds_total", "", ms / 1e3);
    undroppable_steps_ = 2;  // the arrivals' step, then the dropped work again
    return true;
  }
  if (undroppable_steps_ > 0) --undroppable_steps_;
  AfterStep(items, shape, *done, t0, ms);
  {
    MutexLock lock(mu_);
    RefreshPoolSnapshot(/*between_steps=*/true);
  }
  FlushRequestLog();
  return true;
}

void Engine::AfterStep(const std::string& items, const StepShape& planned, const StepShape& ran, int64_t t0_ns,
                       double ms) {
  LogStep(items, ran, t0_ns, ms);  // before Observe: the prediction it was planned with
  step_budget_.Observe(ran, ms);
  metrics_.Observe("promptcache_step_seconds", "", ms / 1e3);
  metrics_.Add("promptcache_step_tokens_total", "kind=\"decode\"", static_cast<double>(ran.n_decode));
  metrics_.Add("promptcache_step_tokens_total", "kind=\"prefill\"", static_cast<double>(planned.n_prefill));
  metrics_.Add("promptcache_step_tokens_total", "kind=\"draft\"", static_cast<double>(ran.n_prefill - planned.n_prefill));
}

// What the step holds, as the step budget prices it: decodes with their
// cached positions, prompt tokens with theirs.
StepShape Engine::ShapeOf(const std::vector<WorkItem>& work, const std::vector<Active*>& acts) {
  StepShape s;
  for (size_t i = 0; i < work.size(); ++i) {
    const size_t pos = acts[i]->seq->num_computed();
    if (work[i].decode) s.AddDecode(pos);
    else s.AddChunk(pos, work[i].num_tokens);
  }
  return s;
}

std::optional<StepShape> Engine::RunStep(const std::vector<WorkItem>& work, const std::vector<Active*>& acts,
                                         StepShape shape, StepInFlight* watch) {
  // Blocks first: a Reserve may grow a block table, which the batch points into.
  std::vector<std::vector<int32_t>> chunks(work.size());
  for (size_t i = 0; i < work.size(); ++i) {
    Active& a = *acts[i];
    const size_t start = a.seq->num_computed();
    if (work[i].decode) chunks[i] = {a.last_token};
    else chunks[i].assign(a.tokens().begin() + static_cast<std::ptrdiff_t>(start),
                          a.tokens().begin() + static_cast<std::ptrdiff_t>(start + work[i].num_tokens));
    const Status st = a.seq->Reserve(start + chunks[i].size());
    PC_CHECK(st.ok());  // PlanWithBlocks reserved them
  }
  const std::vector<size_t> drafted = AddDrafts(work, acts, chunks, shape);
  std::vector<BatchToken> batch;
  for (size_t i = 0; i < work.size(); ++i) {
    const size_t start = acts[i]->seq->num_computed();
    for (size_t j = 0; j < chunks[i].size(); ++j) {
      const bool logits = work[i].decode || (j + 1 == chunks[i].size() && work[i].last_prompt_chunk);
      batch.push_back({chunks[i][j], static_cast<int32_t>(start + j), acts[i]->seq->block_table(), logits,
                       acts[i]->seq->local_block_table()});
    }
  }
  std::vector<float>& logits = watch ? step_logits_ : inside_logits_;
  if (!watch) {
    model_.Forward(batch, cache_.store(), &logits);
  } else if (!model_.Forward(batch, cache_.store(), &logits, [&] { return KeepStep(*watch); }, &arrivals_)) {
    return std::nullopt;
  }
  const int64_t now = NowNs();
  const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab);
  size_t row = 0;
  bool emitted = false;
  for (size_t i = 0; i < work.size(); ++i) {
    Active& a = *acts[i];
    if (drafted[i] > 0) {
      VerifyDecode(a, chunks[i], std::span<const float>(logits).subspan(row * n_vocab, chunks[i].size() * n_vocab), now);
      row += chunks[i].size();
      emitted = true;
      continue;
    }
    {
      MutexLock lock(mu_);
      scheduler_.Advanced(a.id, chunks[i].size());  // counts them in the shared record
    }
    a.seq->IndexComputed();
    if (work[i].decode || work[i].last_prompt_chunk) {
      const std::span<const float> row_logits = std::span<const float>(logits).subspan(row * n_vocab, n_vocab);
      if (work[i].last_prompt_chunk && UsesLogitsMemo(a)) {
        logits_memo_.Put(cache_.PromptKey(a.tokens(), a.req.salt, a.keys), row_logits);
      }
      SampleAndEmit(a, row_logits, now);
      ++row;
      emitted = true;
    }
  }
  // The request threads woken to write these tokens get a core now, not at
  // the pool's next paced yield (up to 1 ms later: thread_pool.h).
  if (emitted) model_.pool().YieldCores();
  return shape;
}

}  // namespace pc
