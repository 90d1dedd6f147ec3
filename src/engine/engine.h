// The engine loop: one thread that owns the model, the prefix cache and the
// scheduler, and runs continuous batching. Every step decodes one token for
// each running sequence and fills the rest of the token budget with prefill
// chunks; one Model::Forward runs them all (the kernels are batch-invariant,
// so a request's output does not depend on what it was batched with).
//
// Blocks are taken as sequences grow; when the pool runs short the most
// recently admitted sequence is preempted and resumed later from the prefix
// cache (scheduler.h), so outputs do not depend on memory pressure.
//
// Clients Submit a request and read its RequestStream: token events, then one
// done event with timings and usage. Cancel() (a client that went away) ends
// the sequence at the next step and frees its blocks.
// Thread-safety: Engine's public methods may be called from any thread.
// RequestStream: one reader thread, the engine writes.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>

#include "base/mutex.h"
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/grammar_masker.h"
#include "engine/lookup_draft.h"
#include "engine/metrics.h"
#include "sched/scheduler.h"
#include "sched/step_budget.h"
#include "kvcache/logits_memo.h"
#include "kvcache/prefix_cache.h"
#include "kvcache/tier_stack.h"
#include "model/sampler.h"
#include "model/sequence.h"
#include "tokenizer/tokenizer.h"

namespace pc {

struct EngineOptions {
  CacheOptions cache;               // KV pool (mem_bytes 0: DefaultKvCacheBytes for the context below)
  // Tokens one sequence may hold (prompt + generated); 0: the model's
  // trained length. Either way capped by the KV pool's capacity.
  size_t ctx_tokens = 0;
  size_t max_batch_tokens = 256;    // tokens per step
  // Step-time target: while streams are decoding, each step prefills only
  // as many prompt tokens as keep it near this many milliseconds, so the
  // inter-token gap stays near it however long the queued prompts are
  // (step_budget.h). 0: no target (steps take max_batch_tokens).
  double max_step_ms = 0;
  // The calibrated prefill curve (position, ms per token; CalibratePrefill):
  // the step budget's first prices for chunks deep in a prompt. Empty: learned
  // from the steps alone.
  std::vector<std::pair<double, double>> prefill_profile;
  // What a prefill chunk pays per cached position before it, ms, and the
  // chunk length of prefill_profile's samples (CostModel); 0: not priced.
  double kv_pass_ms_per_position = 0;
  size_t prefill_profile_chunk = 0;
  // Who goes first among waiting requests and prompts (scheduler.h).
  Admission admission = Admission::kCacheAware;
  size_t max_running = 32;
  size_t max_waiting = 256;
  TierStack* tiers = nullptr;  // spill tiers below the pool (not owned; outlives the engine)
  // The last prompt token's logits kept for repeated prompts (LogitsMemo):
  // a prompt whose K/V are all cached then needs no forward pass for its
  // first token. 0: none kept.
  size_t logits_memo_bytes = size_t{32} << 20;
  // Opt-in request log, JSON Lines in the ../shared/traces format (arrival
  // t_ms, token counts, prefix block ids, block_size): never prompt text.
  std::string request_log_path;
  // Opt-in step log, JSON Lines: each step's items (decode positions,
  // prompt chunks as [position, tokens]), predicted and measured ms; what
  // `advise --step-log` writes for its simulated steps, to compare the two.
  std::string step_log_path;
  // Prompt-lookup drafts per step for requests that do not say (0: off;
  // --draft lookup[:N]). Off under Numerics::kGgmlCompat, whose roundings
  // differ between a one-token and a several-token pass, so drafts would
  // change its outputs.
  size_t draft_tokens = 0;
  // A step in progress is paused or dropped, between two stages of a layer, for cache
  // hits that arrive meanwhile when that pays (ForHitArrival: with a step
  // target, under the precise numerics): paused, the step runs theirs
  // inside it and goes on (when they gain more than its decodes and ending
  // prompts wait, or its decodes' next token, the pause included, still
  // comes within twice the target); else one with decodes may be dropped, and they run in a
  // step with the decodes alone. Cache-aware admission only (first come,
  // first served keeps arrival order in steps too). false: an arriving hit
  // waits for the step in progress and rides a step of other prompts'
  // chunks (--no-step-drop).
  bool drop_steps_for_hits = true;
  // Once the last request has ended, the step loop and the pool's threads
  // spin this long (giving their cores away every 50 us) before they sleep,
  // so a request arriving meanwhile finds every thread and core awake. Why:
  // on a 2-vCPU Zen 5 guest a 25-token step at depth 448 after 200 ms idle
  // took 27 ms against 14 ms with the threads awake, and hits arrive in the
  // gaps between bursts (docs/BENCHMARKS.md). It costs the cores' idle
  // time: promptcache_idle_spin_seconds_total. 0: sleep at once.
  double idle_spin_ms = 0;
};

struct EngineRequest {
  std::vector<int32_t> prompt;
  int max_tokens = 16;
  SamplingParams sampling;
  bool ignore_eos = false;  // end-of-generation tokens never sampled (llama.cpp's meaning): runs to max_tokens
  int top_logprobs = 0;        // alternatives per token
  bool want_logprobs = false;  // the sampled token's logprob
  std::vector<std::string> stop;
  std::string salt;  // cache namespace (tenant and user salt)
  std::string tenant;  // API-key tenant: tenants share steps fairly (scheduler.h); "" without keys
  bool use_cache = true;
  // Constrained output: every token keeps the text a prefix of a sentence
  // of this grammar (a JSON schema's value, a tool call); the request stops
  // when the sentence is complete. With a trigger, the grammar waits: the
  // output is free until its bytes contain the trigger (a tool-call marker),
  // and from there on it is constrained (the trigger is the grammar's start).
  std::shared_ptr<const structured::SeqGrammar> grammar;
  std::string grammar_trigger;
  // Control tokens (other than the end of generation) go out as their text,
  // so a call marker that is one can be parsed from the reply.
  bool control_text = false;
  LogitAdjust adjust;       // bias and penalties (sampler.h: the order of stages)
  int min_tokens = 0;       // end of generation (and stop_token_ids) barred before this many tokens
  std::vector<int32_t> stop_token_ids;  // these end the request like end of generation
  // Prompt-lookup drafts (lookup_draft.h): at most this many drafted tokens
  // verified per step; 0: plain decoding; -1: EngineOptions::draft_tokens.
  int draft_tokens = -1;
};

enum class FinishReason { kStop, kLength, kCancelled, kError };
const char* FinishReasonName(FinishReason r);

struct RequestTimings {
  double queue_ms = 0;    // arrival to admission
  double prefill_ms = 0;  // admission to the first token's logits
  double ttft_ms = 0;     // arrival to the first token
  double e2e_ms = 0;      // arrival to the last token
  std::vector<double> itl_ms;  // gaps between consecutive tokens
  double mean_itl_ms() const;
};

struct StreamEvent {
  bool done = false;
  // Token events.
  int32_t token = -1;
  std::string text;  // text released by this token (UTF-8 complete, stop strings removed)
  float logprob = 0;
  std::vector<std::pair<int32_t, float>> top;
  // The done event.
  FinishReason finish = FinishReason::kStop;
  std::string error;
  size_t num_prompt_tokens = 0, num_cached_tokens = 0, num_generated_tokens = 0;
  size_t num_draft_tokens = 0, num_accepted_draft_tokens = 0;  // lookup drafts verified / accepted
  RequestTimings timings;
  std::map<std::string, size_t> cached_by_tier;  // every tier incl. "pool"; sums to num_cached_tokens
  std::map<std::string, double> tier_load_ms;
};

class RequestStream {
 public:
  // Waits up to timeout_ms for the next event; nullopt on timeout.
  std::optional<StreamEvent> Next(int timeout_ms);
  void Cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

 private:
  friend class Engine;
  void Push(StreamEvent ev);
  Mutex mu_;
  std::condition_variable cv_;
  std::deque<StreamEvent> events_ PC_GUARDED_BY(mu_);
  std::atomic<bool> cancelled_{false};
};

enum class SubmitError { kNone, kInvalid, kQueueFull, kDraining };
struct SubmitOutcome {
  std::shared_ptr<RequestStream> stream;  // set when accepted
  SubmitError error = SubmitError::kNone;
  std::string message;
};

struct EngineSnapshot {
  size_t num_running = 0, num_waiting = 0;
  size_t num_blocks = 0, num_used_blocks = 0, num_cached_blocks = 0, block_size = 0;
  size_t kv_bytes = 0;  // the pool's K/V store
  // Sliding-window models (a split cache, prefix_cache.h): the local layers'
  // pool, and the most K/V bytes one sequence has held between steps since
  // start, by the global and by the local layers, against the window's bound.
  size_t num_local_blocks = 0, num_used_local_blocks = 0, num_cached_local_blocks = 0, window_tokens = 0;
  size_t peak_sequence_global_bytes = 0, peak_sequence_local_bytes = 0, local_bound_bytes = 0;
};

class Engine {
 public:
  Engine(Model& model, const Tokenizer& tok, const EngineOptions& opt);
  ~Engine();  // cancels what is left and joins the loop

  SubmitOutcome Submit(EngineRequest req);
  // Stop admitting new requests (Submit answers kDraining).
  void BeginDrain();
  // Cancels every waiting and running request.
  void CancelAll();
  // No request waiting or running.
  bool Idle() const;
  EngineSnapshot Snapshot() const;
  MetricsRegistry& metrics() { return metrics_; }
  // Prometheus text with the gauges refreshed.
  std::string RenderMetrics();
  const Model& model() const { return model_; }
  size_t context_length() const;

 private:
  struct Active;
  void Loop();
  // With nothing to run, spins up to opt_.idle_spin_ms until a request
  // arrives or the engine stops (EngineOptions::idle_spin_ms). Loop thread.
  void IdleSpin();
  bool Step();  // false when there was nothing to do
  static StepShape ShapeOf(const std::vector<WorkItem>& work, const std::vector<Active*>& acts);
  void NotePlannedStep(const StepShape& shape, bool lone, size_t prefill_depth);
  struct StepInFlight;
  // Runs the planned step (shape: what it holds) and returns what it ran,
  // drafts included. watch: the step as KeepStep sees it between layer stages
  // (null: a step run inside a paused one, not watched).
  // nullopt: the step was dropped for an arrival (KeepStep), nothing of it kept.
  std::optional<StepShape> RunStep(const std::vector<WorkItem>& work, const std::vector<Active*>& acts,
                                   StepShape shape, StepInFlight* watch);
  // What follows a step that ran: its log line, the budget's measurement,
  // the step metrics (items: StepItems before it ran; ms: its own time).
  void AfterStep(const std::string& items, const StepShape& planned, const StepShape& ran, int64_t t0_ns, double ms);
  // A cache hit is not kept waiting for the step in progress nor for other
  // prompts' chunks (engine_drop.cc). A request "expedites" a step when its
  // prompt's remainder is its first chunk, ends the prompt and is no longer
  // than what the cache gave it; a step with one holds the decodes and such
  // chunks only. The forward asks KeepStep between layer stages; when requests
  // arrived since it last looked, they are admitted then (a fully cached
  // prompt with kept logits gets its first token there), and, when an
  // expediting one's step pays (ForHitArrival), the step in progress is
  // paused for it (a step of those chunks alone runs there, the paused
  // forward pass on its own buffers) or dropped.
  struct StepInFlight {
    int64_t t0_ns = 0;
    double predicted_ms = 0;
    uint64_t arrivals = 0;  // arrivals_ when last looked
    bool watched = false;   // hits may pause or drop it (the engine's settings and numerics allow)
    bool droppable = false;
    size_t decodes = 0, prompts_ending = 0;  // its decode rows; its prompts that end in it
    double paused_ms = 0;  // time spent in the steps run inside it
    std::vector<uint64_t> ids;  // the step's requests
  };
  bool Expediting() const;
  bool KeepStep(StepInFlight& f);
  // What to do for the expediting chunks the step in progress lacks; for a
  // pause, their work (blocks reserved) in *paused_work.
  HitArrival ArrivalAction(const StepInFlight& f, std::vector<WorkItem>* paused_work) PC_REQUIRES(mu_);
  // Runs that work as a step of its own, inside the step in progress.
  void RunInside(StepInFlight& f, const std::vector<WorkItem>& work);
  bool Expedites(const WorkItem& w) const PC_REQUIRES(mu_);
  void KeepExpedited(std::vector<WorkItem>& work) const PC_REQUIRES(mu_);
  StepInFlight Watch(const std::vector<WorkItem>& work, const StepShape& shape) const;
  // between_steps: after a step's sequences slid their windows (the per-
  // sequence peaks are sampled only then: a step being planned holds its
  // chunks' blocks too).
  void RefreshPoolSnapshot(bool between_steps = false) PC_REQUIRES(mu_);
  void StartAdmitted(int64_t now_ns) PC_REQUIRES(mu_);
  void StartSequence(Active& a, int64_t now_ns, const std::map<std::string, size_t>& loaded_tokens) PC_REQUIRES(mu_);
  void InstallLoads(int64_t now_ns) PC_REQUIRES(mu_);
  void DropCancelled();
  void Requeue(Active& a, bool preempted) PC_REQUIRES(mu_);
  std::vector<WorkItem> PlanWithBlocks() PC_REQUIRES(mu_);
  // Samples a's next token from logits and sends it; returns it, or -1 when
  // the request ended (then `a` is gone).
  int32_t SampleAndEmit(Active& a, std::span<const float> logits, int64_t now_ns);
  // Appends lookup drafts to decode chunks ({last token} -> {last, d1..dk})
  // as far as the step's token and time budgets allow; returns the counts.
  std::vector<size_t> AddDrafts(const std::vector<WorkItem>& work, const std::vector<Active*>& acts,
                                std::vector<std::vector<int32_t>>& chunks, StepShape& shape);
  // A decode chunk's rows in order: each token reported computed, the next
  // one sampled from its row, until a sampled token differs from the draft.
  void VerifyDecode(Active& a, std::span<const int32_t> chunk, std::span<const float> logits, int64_t now_ns);
  bool AdvanceGrammar(Active& a, int32_t token);
  std::unique_ptr<GrammarMasker> masker_;  // loop thread; built at the first constrained request
  std::vector<float> masked_logits_, adjusted_logits_, sampled_logits_;
  // Emits the first token of sequences that started with their whole prompt
  // cached and its last logits kept (no forward pass); without mu_.
  void EmitFromMemo(std::vector<uint64_t> ids) PC_EXCLUDES(mu_);
  bool UsesLogitsMemo(const Active& a) const;
  void Finish(Active& a, FinishReason reason, int64_t now_ns, const std::string& error = "") PC_REQUIRES(mu_);
  void DescribeMetrics();
  void LogRequest(const Active& a);
  void FlushRequestLog();
  // The step's items before it runs ("decodes":[...],"chunks":[...]); empty without a step log.
  std::string StepItems(const std::vector<WorkItem>& work, const std::vector<Active*>& acts) const;
  void LogStep(const std::string& items, const StepShape& ran, int64_t t0_ns, double ms);
  // An opt-in log opened for appending; null (and said on stderr) when the path is empty or unwritable.
  static std::unique_ptr<std::ofstream> OpenLog(const std::string& path, const char* what);

  Model& model_;
  const Tokenizer& tok_;
  EngineOptions opt_;
  PrefixCache cache_;
  LogitsMemo logits_memo_;  // loop thread only
  std::vector<float> step_logits_;  // loop thread only: a step's logits, its buffer kept between steps
  std::vector<float> inside_logits_;  // loop thread only: the same for a step run inside a paused one
  MetricsRegistry metrics_;

  mutable Mutex mu_;
  std::condition_variable wake_;
  Scheduler scheduler_ PC_GUARDED_BY(mu_);
  StepBudget step_budget_;  // loop thread only
  std::unordered_map<uint64_t, std::unique_ptr<Active>> active_ PC_GUARDED_BY(mu_);
  std::vector<uint64_t> memo_ready_ PC_GUARDED_BY(mu_);  // started from LogitsMemo, first token not yet emitted
  uint64_t next_id_ PC_GUARDED_BY(mu_) = 1;
  bool draining_ PC_GUARDED_BY(mu_) = false;
  bool stop_ PC_GUARDED_BY(mu_) = false;
  std::atomic<bool> stopping_{false};  // stop_, for the idle spin (no mu_ held)
  EngineSnapshot pool_snapshot_ PC_GUARDED_BY(mu_);
  std::unique_ptr<std::ofstream> request_log_;
  std::vector<std::string> pending_log_;  // loop thread only
  std::unique_ptr<std::ofstream> step_log_;  // loop thread only
  int64_t start_ns_ = 0;
  std::atomic<uint64_t> arrivals_{0};  // Submit counts requests; KeepStep compares
  uint64_t arrivals_admitted_ = 0;     // loop thread only: arrivals_ before the step's admission pass
  int undroppable_steps_ = 0;          // loop thread only: steps after a drop are not dropped
  std::thread loop_;
};

}  // namespace pc
