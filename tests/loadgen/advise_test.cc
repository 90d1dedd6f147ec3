// The advisor's simulator on hand-built traces with known answers, and the
// advice on the shared traces.
#include <algorithm>
#include <numeric>
#include <sstream>

#include "advise.h"
#include "test_support.h"

namespace pc::loadgen {
namespace {

CostProfile Profile() {
  CostProfile p;
  p.block_size = 16;
  p.prefill_ms_per_token = {{0, 1.0}, {4096, 1.0}};  // 1 ms per token anywhere
  p.decode_ms_per_token = {{0, 10}, {4096, 20}};
  p.tiers["host"] = {0.1, 0.01};
  p.tiers["redis"] = {1.0, 0.1};
  p.tiers["slow"] = {1e6, 0};
  return p;
}

SimRequest Req(double t, std::vector<uint64_t> keys, size_t input = 0, size_t output = 10) {
  SimRequest r;
  r.arrival_s = t;
  r.input_tokens = input ? input : keys.size() * 16;
  r.output_tokens = output;
  r.keys = std::move(keys);
  r.tokens_per_key = 16;
  return r;
}

// A pool of that many tokens; no step-time target (serve --max-step-ms 0:
// steps fill the token budget), so step costs are easy to add up by hand.
SimConfig Pool(size_t tokens) {
  SimConfig c;
  c.tiers = {{"pool", tokens, 0}};
  c.step_ms = 0;
  return c;
}

TEST(AdviseSim, DistinctPromptsNeverHit) {
  std::vector<SimRequest> rs;
  for (uint64_t i = 0; i < 50; ++i) rs.push_back(Req(i, {i * 10, i * 10 + 1, i * 10 + 2}));
  EXPECT_EQ(Simulate(rs, Profile(), Pool(1 << 20)).cached_fraction, 0);
}

// The pool holds what the server's does: a reply's blocks are registered
// too (for the next turn), so they take room beside the prompts. Pool of 8
// blocks: A's 4 prompt blocks, then B's 2 prompt blocks; a short B leaves A
// whole for its repeat, a B generating 64 tokens (4 more blocks) evicts A's
// oldest blocks, and the repeat finds nothing.
TEST(AdviseSim, RepliesTakeRoomInThePool) {
  for (size_t b_output : {size_t{1}, size_t{65}}) {
    const std::vector<SimRequest> rs = {Req(0, {1, 2, 3, 4}, 64, 1), Req(10, {7, 8}, 32, b_output),
                                        Req(100, {1, 2, 3, 4}, 64, 1)};
    const SimResult r = Simulate(rs, Profile(), Pool(8 * 16));
    EXPECT_EQ(r.requests[2].cached_tokens, b_output == 1 ? 63u : 0u) << "B generating " << b_output;
  }
}

// A step after the engine idled pays the profile's wake-up extras (the
// first step most), interpolated over the pause; steps back to back none.
TEST(AdviseSim, StepsAfterAPausePayTheWakeUp) {
  CostProfile p = Profile();
  p.idle_wake_ms = {{200, {3.0, 1.0}}};
  EXPECT_DOUBLE_EQ(p.WakeMs(0, 0), 0);
  EXPECT_DOUBLE_EQ(p.WakeMs(100, 0), 1.5);
  EXPECT_DOUBLE_EQ(p.WakeMs(5000, 0), 3.0);
  EXPECT_DOUBLE_EQ(p.WakeMs(200, 1), 1.0);
  EXPECT_DOUBLE_EQ(p.WakeMs(200, 2), 0);
  const std::vector<SimRequest> rs = {Req(0, {}, 16, 3)};
  const SimResult woken = Simulate(rs, p, Pool(1 << 20));
  const SimResult warm = Simulate(rs, Profile(), Pool(1 << 20));
  EXPECT_NEAR(woken.requests[0].ttft_ms, warm.requests[0].ttft_ms + 3.0, 1e-9);  // the engine starts idle
  ASSERT_EQ(woken.requests[0].gaps_ms.size(), 2u);
  EXPECT_NEAR(woken.requests[0].gaps_ms[0], warm.requests[0].gaps_ms[0] + 1.0, 1e-9);
  EXPECT_NEAR(woken.requests[0].gaps_ms[1], warm.requests[0].gaps_ms[1], 1e-9);
  Result<CostProfile> back = CostProfile::FromJson(p.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_DOUBLE_EQ(back->WakeMs(100, 0), 1.5);
  // A profile file is untrusted: malformed wake-up entries and step scales
  // are refused with a message, never used.
  for (const char* bad : {R"([[200, [-1.0]]])", R"([[0, [1.0]]])", R"([[200, "x"]])", R"({"a": 1})"}) {
    nlohmann::json j = p.ToJson();
    j["idle_wake_ms"] = nlohmann::json::parse(bad);
    const Result<CostProfile> r = CostProfile::FromJson(j);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("not a cost profile"), std::string::npos) << bad;
  }
  for (const char* bad : {"[1, 1]", "[1, 0, 1]", "[1, -2, 1]", R"("x")"}) {
    nlohmann::json j = p.ToJson();
    j["step_scale"] = nlohmann::json::parse(bad);
    EXPECT_FALSE(CostProfile::FromJson(j).ok()) << bad;
  }
}

TEST(AdviseSim, IdenticalPromptsHitAllButTheFirst) {
  std::vector<SimRequest> rs;
  for (int i = 0; i < 10; ++i) rs.push_back(Req(i * 100.0, {1, 2, 3, 4}, 64));
  const SimResult r = Simulate(rs, Profile(), Pool(1 << 20));
  EXPECT_EQ(r.requests[0].cached_tokens, 0u);
  for (int i = 1; i < 10; ++i) EXPECT_EQ(r.requests[static_cast<size_t>(i)].cached_tokens, 63u);  // the last token is computed
  EXPECT_NEAR(r.cached_fraction, 9 * 63 / 640.0, 1e-12);
  // 64 tokens at 1 ms: TTFT 64 ms cold, 1 ms warm; no queueing at these gaps.
  EXPECT_NEAR(r.requests[0].ttft_ms, 64, 1e-9);
  EXPECT_NEAR(r.requests[5].ttft_ms, 1, 1e-9);
  // Decode steps alone cost the calibrated single-token step at their context
  // (tokens 2..10 feed the tokens at positions 64..72: mean 68).
  EXPECT_NEAR(r.requests[5].itl_ms, 10 + 10.0 * 68 / 4096, 1e-6);
  EXPECT_NEAR(r.requests[5].e2e_ms, 1 + 9 * r.requests[5].itl_ms, 1e-6);
}

TEST(AdviseSim, CapacityBelowOnePromptGivesNoHits) {
  std::vector<SimRequest> rs;
  for (int i = 0; i < 10; ++i) rs.push_back(Req(i, {1, 2, 3, 4}));
  EXPECT_EQ(Simulate(rs, Profile(), Pool(48)).cached_fraction, 0);  // 3 blocks < 4
  EXPECT_GT(Simulate(rs, Profile(), Pool(64)).cached_fraction, 0);
}

TEST(AdviseSim, StepsShareTheTokenBudgetOldestFirst) {
  // Both prompts fit one 256-token step: both first tokens after 64 ms.
  SimResult r = Simulate({Req(0, {1, 2}), Req(0, {3, 4})}, Profile(), Pool(0));
  EXPECT_NEAR(r.requests[0].ttft_ms, 64, 1e-9);
  EXPECT_NEAR(r.requests[1].ttft_ms, 64, 1e-9);
  // A 32-token budget: step 1 the older 32-token prompt; step 2 the older
  // one's decode token + 31 of the newer prompt (32 ms); step 3 the last
  // prompt token + a decode token, costing one decode step at context 33.
  SimConfig small = Pool(0);
  small.batch_tokens = 32;
  r = Simulate({Req(0, {1, 2}), Req(0, {3, 4})}, Profile(), small);
  EXPECT_NEAR(r.requests[0].ttft_ms, 32, 1e-9);
  EXPECT_NEAR(r.requests[1].ttft_ms, 32 + 32 + (10 + 10.0 * 33 / 4096), 1e-6);
  // One running slot: the second waits for the first to finish entirely.
  SimConfig one = Pool(0);
  one.max_running = 1;
  r = Simulate({Req(0, {1, 2}, 0, 2), Req(0, {3, 4}, 0, 2)}, Profile(), one);
  EXPECT_NEAR(r.requests[1].ttft_ms, r.requests[0].e2e_ms + 32, 1e-6);
}

// The simulation runs the server's own Scheduler (src/sched): its admission
// order decides here. Three misses queue behind one running slot, then a
// prompt whose 64 leading blocks the pool holds arrives: cache-aware
// admission runs it right after the miss in progress, FIFO after all three.
// (A simulator with a scheduler of its own would not see --admission.)
TEST(AdviseSim, AdmissionIsTheServersScheduler) {
  std::vector<uint64_t> shared;
  for (uint64_t k = 1; k <= 64; ++k) shared.push_back(k);
  std::vector<SimRequest> rs = {Req(0, shared, 1024, 1)};
  for (uint64_t m = 0; m < 3; ++m) {
    std::vector<uint64_t> keys;
    for (uint64_t k = 0; k < 128; ++k) keys.push_back(1000 * (m + 1) + k);
    rs.push_back(Req(2.0 + 0.001 * static_cast<double>(m), keys, 2048, 1));
  }
  std::vector<uint64_t> hit = shared;
  hit.push_back(999);
  rs.push_back(Req(2.003, hit, 1040, 1));
  SimConfig c = Pool(1 << 20);
  c.max_running = 1;
  c.admission = Admission::kFifo;
  const double fifo_ms = Simulate(rs, Profile(), c).requests[4].ttft_ms;
  c.admission = Admission::kCacheAware;
  const SimResult aware = Simulate(rs, Profile(), c);
  EXPECT_EQ(aware.requests[4].cached_tokens, 1024u);
  EXPECT_NEAR(fifo_ms, 3 * 2048 + 16 - 3, 1.0);       // behind all three misses
  EXPECT_NEAR(aware.requests[4].ttft_ms, 2048 + 16 - 3, 1.0);  // behind the one in progress
  EXPECT_GT(aware.requests[3].ttft_ms, aware.requests[2].ttft_ms);  // the misses keep their order
}

// The step-time target is the server's StepBudget: a stream decoding while
// a 4,000-token prompt prefills keeps short gaps with it (the prompt goes in
// chunks beside the decodes) and long ones without (255 tokens a step).
// The simulation plans with the server's Scheduler and StepBudget, not a
// copy: driving those classes from src/sched by hand with the same
// arrivals and the step durations the simulation reported gives the very
// steps it ran, item for item. A simulator with a scheduler of its own (the
// drift issue 31 found: -46% TTFT) fails here as soon as the two plan one
// step differently, whichever side changes.
TEST(AdviseSim, PlansEveryStepWithTheServersScheduler) {
  std::vector<SimRequest> rs;
  for (uint64_t i = 0; i < 24; ++i) rs.push_back(Req(0.004 * double(i * i % 7) + 0.01 * double(i), {}, 40 + 37 * (i % 5), 3 + i % 6));
  std::sort(rs.begin(), rs.end(), [](const SimRequest& a, const SimRequest& b) { return a.arrival_s < b.arrival_s; });
  CostProfile p = Profile();
  p.step_ms_by_tokens = {{1, 2.0}, {256, 40.0}};
  SimConfig c = Pool(1 << 20);
  c.caching = false;
  c.max_running = 6;
  c.batch_tokens = 96;
  c.step_ms = 12;
  c.admission = Admission::kFifo;
  std::vector<SimStep> steps;
  c.on_step = [&](const SimStep& s) { steps.push_back(s); };
  const SimResult r = Simulate(rs, p, c);
  ASSERT_GT(steps.size(), 40u);

  SchedulerOptions so;
  so.max_batch_tokens = c.batch_tokens, so.max_running = c.max_running, so.max_waiting = SIZE_MAX / 4;
  so.num_blocks = SIZE_MAX / 4, so.block_size = 16, so.admission = c.admission;
  Scheduler sched(so);
  StepBudget budget(StepBudgetOptions{c.step_ms, so.max_batch_tokens, 16});
  budget.SetKvPass(p.kv_pass_ms_per_position, p.prefill_chunk_tokens);
  budget.SetPrefillProfile(p.prefill_ms_per_token);
  std::vector<std::shared_ptr<RequestProgress>> rec(rs.size());
  std::vector<size_t> generated(rs.size(), 0);
  size_t next = 0, mixed = 0;
  for (const SimStep& st : steps) {
    for (; next < rs.size() && rs[next].arrival_s * 1e3 <= st.start_ms; ++next) {
      rec[next] = std::make_shared<RequestProgress>();
      sched.Submit(SchedRequest{next, rs[next].input_tokens, rs[next].output_tokens, {}, static_cast<int64_t>(rs[next].arrival_s * 1e9), 0, rec[next]});
    }
    for (uint64_t id : sched.Admit(static_cast<int64_t>(st.start_ms * 1e6))) sched.Started(id, 0);
    const std::vector<WorkItem> planned = sched.PlanStep(budget);
    ASSERT_EQ(planned.size(), st.work.size()) << "at " << st.start_ms << " ms";
    StepShape shape;
    for (size_t i = 0; i < planned.size(); ++i) {
      const WorkItem &a = planned[i], &b = st.work[i];
      ASSERT_TRUE(a.id == b.id && a.num_tokens == b.num_tokens && a.decode == b.decode && a.last_prompt_chunk == b.last_prompt_chunk)
          << "step at " << st.start_ms << " ms, item " << i;
      ASSERT_EQ(st.positions.at(i), rec[a.id]->num_computed);  // what --step-log writes
      if (a.decode) shape.AddDecode(rec[a.id]->num_computed);
      else shape.AddChunk(rec[a.id]->num_computed, a.num_tokens);
    }
    mixed += shape.n_decode > 0 && shape.n_prefill > 0;
    budget.Observe(shape, st.duration_ms);
    for (const WorkItem& w : planned) {
      sched.Advanced(w.id, w.num_tokens);
      if ((w.decode || w.last_prompt_chunk) && ++generated[w.id] == rs[w.id].output_tokens) sched.Finish(w.id);
    }
  }
  EXPECT_GT(mixed, 5u);  // decodes and prefill chunks shared steps: the budget decided their split
  EXPECT_EQ(sched.num_running() + sched.num_waiting(), 0u);
  EXPECT_GT(r.ttft_ms.p50, 0);
}

// advise --step-log: a simulated step in the server's step-log format.
TEST(AdviseSim, StepLogLineMatchesTheServersFormat) {
  SimStep st{12.5, 4.25, {WorkItem{3, 1, true, false}, WorkItem{7, 16, false, true}}, {70, 32}};
  const nlohmann::json j = nlohmann::json::parse(StepLogLine(st));
  EXPECT_EQ(j["decodes"], nlohmann::json::parse("[70]"));
  EXPECT_EQ(j["chunks"], nlohmann::json::parse("[[32,16]]"));
  EXPECT_EQ(j["tokens"], 17);
  EXPECT_DOUBLE_EQ(j["t_ms"].get<double>(), 12.5);
  EXPECT_DOUBLE_EQ(j["ms"].get<double>(), 4.25);
}

TEST(AdviseSim, TheStepTargetIsTheServersBudget) {
  // The stream's first 13 gaps come before the prompt arrives, the other 16
  // beside it.
  const std::vector<SimRequest> rs = {Req(0, {1, 2, 3, 4}, 64, 30), Req(0.2, {}, 4000, 1)};
  SimConfig c = Pool(1 << 20);
  c.step_ms = 0;
  const double gaps_off = Simulate(rs, Profile(), c).requests[0].itl_ms;
  c.step_ms = 25;
  const SimResult on = Simulate(rs, Profile(), c);
  EXPECT_GT(gaps_off, 100);
  EXPECT_LT(on.requests[0].itl_ms, 30);
  // The prompt is not starved meanwhile: beside the decodes it gets what
  // the target leaves (about 24 of every 25 ms here).
  EXPECT_GT(on.requests[1].ttft_ms, 4000 - 200);
  EXPECT_LT(on.requests[1].ttft_ms, 4000 * 1.25 - 200);
}

TEST(AdviseSim, EvictedBlocksComeBackFromTheHostTier) {
  std::vector<SimRequest> rs = {Req(0, {1, 2, 3, 4}), Req(1, {5, 6, 7, 8}), Req(2, {1, 2, 3, 4})};
  SimConfig cfg;
  cfg.tiers = {{"pool", 64, 0}, {"host", 1 << 20, 0}};
  const SimResult r = Simulate(rs, Profile(), cfg);
  EXPECT_EQ(r.requests[2].cached_tokens, 63u);
  EXPECT_EQ(r.requests[2].cached_by_tier.at("host"), 63u);
  EXPECT_NEAR(r.requests[2].ttft_ms, 1 + 0.1 + 0.04, 1e-9);  // load 4 blocks + 1 token
  cfg.tiers[1].name = "slow";  // loading slower than recomputing: not used
  EXPECT_EQ(Simulate(rs, Profile(), cfg).requests[2].cached_tokens, 0u);
}

TEST(AdviseSim, TtlExpiresRedisEntries) {
  // The pool holds one 2-block prompt; Redis keeps entries for 10 s.
  std::vector<SimRequest> rs = {Req(0, {1, 2}), Req(1, {3, 4}), Req(5, {1, 2}), Req(50, {3, 4}), Req(100, {1, 2})};
  SimConfig cfg;
  cfg.tiers = {{"pool", 32, 0}, {"redis", 1 << 20, 10}};
  const SimResult r = Simulate(rs, Profile(), cfg);
  EXPECT_EQ(r.requests[2].cached_by_tier.at("redis"), 31u);  // written at 0, read at 5
  EXPECT_EQ(r.requests[3].cached_tokens, 0u);                // written at 1, expired by 50
  EXPECT_EQ(r.requests[4].cached_tokens, 0u);                // written at 0, expired by 100
}

TEST(AdviseSim, ProfileJsonRoundTrip) {
  const CostProfile p = Profile();
  Result<CostProfile> q = CostProfile::FromJson(p.ToJson());
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->ToJson(), p.ToJson());
  EXPECT_FALSE(CostProfile::FromJson(nlohmann::json{{"block_size", "x"}}).ok());
  EXPECT_FALSE(CostProfile::FromJson(nlohmann::json::array()).ok());
}

// A chunk's K/V pass is paid once per chunk: a chunk of the calibration's
// size costs what the samples say, a one-token chunk deep in a prompt pays
// the whole pass (not a 32nd of it), and without a pass the samples are
// per-token prices as they are.
TEST(AdviseSim, ChunksPayOneKvPassEach) {
  CostProfile p = Profile();
  p.kv_pass_ms_per_position = 0.001;  // 1 ms per 1,000 positions
  p.prefill_chunk_tokens = 32;
  EXPECT_NEAR(p.ChunkMs(4000, 32), p.PrefillMs(4000, 4032), 1e-9);
  const double per_token_pass = 0.001 * 4000 / 32;
  EXPECT_NEAR(p.ChunkMs(4000, 1), p.PrefillMs(4000, 4001) - per_token_pass + 4.0, 1e-9);
  EXPECT_NEAR(p.ChunkMs(0, 1), p.PrefillMs(0, 1), 1e-12);
  Result<CostProfile> q = CostProfile::FromJson(p.ToJson());
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->prefill_chunk_tokens, 32u);
  p.prefill_chunk_tokens = 0;
  EXPECT_NEAR(p.ChunkMs(4000, 1), p.PrefillMs(4000, 4001), 1e-12);
}

// With calibrate's batch curve a step costs what a step of its size cost
// at depth 0, plus a draw per row of logits and a row of logits per decode
// past the first: a lone 40-token prompt's TTFT is the curve at 40 tokens
// and a draw (not 40 one-token prices), its decode gaps the curve at one
// token and a draw; ITL is over every gap of every request, as bench
// reports it. A profile whose curve holds a negative time is refused.
TEST(AdviseSim, StepsCostTheBatchCurve) {
  CostProfile p = Profile();
  p.step_ms_by_tokens = {{1, 4.0}, {64, 35.5}};  // 4 ms + 0.5 ms per token past the first
  p.sample_ms_per_row = 0.25;
  p.logits_ms_per_row = 0.1;
  EXPECT_NEAR(p.BatchMs(40, 1), 4.0 + 39 * 0.5 + 0.25, 1e-9);
  EXPECT_NEAR(p.BatchMs(8, 8), 4.0 + 7 * 0.5 + 7 * 0.1 + 8 * 0.25, 1e-9);
  SimConfig c = Pool(1 << 16);
  const SimResult r = Simulate({Req(0, {}, 40, 3), Req(100, {}, 40, 5)}, p, c);
  ASSERT_EQ(r.requests.size(), 2u);
  EXPECT_NEAR(r.requests[0].ttft_ms, 4.0 + 39 * 0.5 + 0.25, 1e-6);
  // Depth adds the decode curve's slope: 10 ms more per 4,096 positions.
  const double gap_ms = 4.25 + 10.0 * 40 / 4096;
  EXPECT_NEAR(r.requests[0].itl_ms, gap_ms + 10.0 * 0.5 / 4096, 1e-6);
  EXPECT_EQ(r.requests[0].gaps_ms.size(), 2u);
  EXPECT_EQ(r.requests[1].gaps_ms.size(), 4u);
  EXPECT_NEAR(r.itl_ms.p50, r.requests[1].gaps_ms[1], 1e-6);  // the 4th smallest of 6 gaps
  nlohmann::json j = p.ToJson();
  Result<CostProfile> q = CostProfile::FromJson(j);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->step_ms_by_tokens, p.step_ms_by_tokens);
  EXPECT_EQ(q->sample_ms_per_row, 0.25);
  j["step_ms_by_tokens"] = {{1, -4.0}};
  EXPECT_FALSE(CostProfile::FromJson(j).ok());
}

// advise --steps: a server's step log scales the profile's prices by the
// least-squares ratio of measured to priced step times, per kind of step
// (decodes only, decodes and prompt tokens, prompt tokens only). Steps that
// verified drafts (more tokens than their items) are left out; a line that
// is not a step-log line is an error naming it; a kind the log lacks takes
// the fit over all steps.
TEST(AdviseSim, StepLogScalesThePrices) {
  CostProfile p = Profile();
  p.step_ms_by_tokens = {{1, 4.0}, {256, 131.5}};
  p.logits_ms_per_row = 0.05, p.greedy_ms_per_row = 0.01;
  using Chunks = std::vector<std::pair<size_t, size_t>>;
  const std::vector<std::pair<std::vector<size_t>, Chunks>> steps = {
      {{100}, {}}, {{100, 900, 2000}, {}}, {{}, {{0, 256}}}, {{512}, {{1024, 40}}}, {{}, {{3000, 16}, {0, 5}}}};
  auto log_of = [&](double decode_k, double mixed_k, double prefill_k) {
    std::string log;
    double t_ms = 0;
    for (const auto& [d, c] : steps) {
      const double k = c.empty() ? decode_k : d.empty() ? prefill_k : mixed_k;
      const double ms = k * p.StepMs(d, c, d.size(), true);
      nlohmann::json j = {{"t_ms", t_ms}, {"decodes", d}, {"chunks", c}, {"ms", ms}};
      j["tokens"] = d.size() + std::accumulate(c.begin(), c.end(), size_t{0}, [](size_t n, const auto& x) { return n + x.second; });
      log += j.dump() + "\n";
      t_ms += ms;  // back to back: no idle pause
    }
    return log;
  };
  std::istringstream in(log_of(0.9, 1.1, 1.25) + R"({"t_ms":1e6,"decodes":[7],"chunks":[],"tokens":5,"ms":1000})" "\n");  // 4 drafts
  Result<StepFit> fit = FitStepLog(in, p, true);
  ASSERT_TRUE(fit.ok()) << fit.status().message();
  EXPECT_EQ(fit->steps, steps.size());
  EXPECT_EQ(fit->kind_steps[CostProfile::kDecodeStep], 2u);
  EXPECT_EQ(fit->kind_steps[CostProfile::kMixedStep], 1u);
  EXPECT_NEAR(fit->scale[CostProfile::kDecodeStep], 0.9, 1e-9);
  EXPECT_NEAR(fit->scale[CostProfile::kMixedStep], 1.1, 1e-9);
  EXPECT_NEAR(fit->scale[CostProfile::kPrefillStep], 1.25, 1e-9);

  CostProfile q = p;
  fit->ApplyTo(&q);
  const std::vector<size_t> d = {300, 700};
  const Chunks c = {{2048, 32}};
  EXPECT_NEAR(q.StepMs(d, c, 2, false), 1.1 * p.StepMs(d, c, 2, false), 1e-9);
  EXPECT_NEAR(q.StepMs({}, c, 1, false), 1.25 * p.StepMs({}, c, 1, false), 1e-9);
  EXPECT_NEAR(q.StepMs(d, {}, 2, false), 0.9 * p.StepMs(d, {}, 2, false), 1e-9);
  Result<CostProfile> back = CostProfile::FromJson(q.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_NEAR(back->StepMs(d, c, 2, false), q.StepMs(d, c, 2, false), 1e-9);

  std::istringstream decodes_only(R"({"t_ms":0,"decodes":[10],"chunks":[],"tokens":1,"ms":)" +
                                  std::to_string(2 * p.StepMs(std::vector<size_t>{10}, {}, 1, true)) + "}\n");
  Result<StepFit> one = FitStepLog(decodes_only, p, true);
  ASSERT_TRUE(one.ok());
  EXPECT_NEAR(one->scale[CostProfile::kPrefillStep], 2.0, 1e-6);
  std::istringstream bad("{\"t_ms\":0,\"decodes\":[1]}\n");
  Result<StepFit> b = FitStepLog(bad, p, true);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("line 1"), std::string::npos);
  std::istringstream empty("");
  EXPECT_FALSE(FitStepLog(empty, p, true).ok());
}

TEST(Advise, VerdictsFollowTheTraffic) {
  // Long shared documents, short answers vs short distinct prompts, long answers.
  std::vector<SimRequest> rag, chat;
  for (int i = 0; i < 200; ++i) {
    std::vector<uint64_t> doc;
    for (uint64_t b = 0; b < 100; ++b) doc.push_back(static_cast<uint64_t>(i % 4) * 1000 + b);
    rag.push_back(Req(i * 2.0, doc, 1610, 16));
    chat.push_back(Req(i * 2.0, {static_cast<uint64_t>(i) * 1000 + 7}, 20, 400));
  }
  AdviceOptions opt;
  opt.tiers = {{"pool", 1 << 20, 0}};
  const Advice a = Advise(rag, Profile(), opt), b = Advise(chat, Profile(), opt);
  EXPECT_GT(a.with_cache.cached_fraction, 0.9);
  EXPECT_NE(a.verdict.find("caching pays"), std::string::npos) << a.verdict;
  EXPECT_NE(b.verdict.find("barely matters"), std::string::npos) << b.verdict;
  // 4 documents of 100 blocks: 90% of the gain needs about all 400 blocks.
  EXPECT_GE(a.capacity_for_90pct.at("pool"), 4 * 100 * 16 * 3 / 4);
  EXPECT_LE(a.capacity_for_90pct.at("pool"), 2 * 4 * 100 * 16);
  ASSERT_FALSE(a.hit_curve.at("pool").empty());
  EXPECT_LT(a.hit_curve.at("pool").front().second, a.hit_curve.at("pool").back().second);
  const std::string html = AdviceHtml("t", a, {});
  EXPECT_NE(html.find("id=\"hit-curve\""), std::string::npos);
}

TEST(Advise, SharedTracesGetDifferentVerdicts) {
  PC_SHARED_OR_SKIP(mooncake, "traces/mooncake_synthetic.jsonl");
  PC_SHARED_OR_SKIP(azure, "traces/azure_code_2023.jsonl");
  AdviceOptions opt;
  opt.tiers = {{"pool", 1 << 20, 0}, {"host", 4 << 20, 0}};
  // Steps of the whole token budget (no step-time target): 61M prompt
  // tokens in 25 ms steps are millions of simulated steps per curve point,
  // and the verdicts are about the traffic, not the step size.
  opt.step_ms = 0;
  std::vector<std::string> verdicts;
  for (const std::string& path : {mooncake, azure}) {
    TraceParams tp;
    tp.path = path;
    tp.token_scale = 1;
    tp.max_requests = 1 << 30;
    tp.max_output_tokens = 1 << 20;
    std::vector<SimRequest> rs = ToSimRequests(*LoadTrace(tp));
    EXPECT_GT(rs.size(), 3000u);
    // As `promptcache advise` does unless given --time-scale: arrivals
    // spread until one server would be 70% busy.
    const double util = Utilization(rs, Profile());
    if (util > 0.9) {
      for (SimRequest& r : rs) r.arrival_s *= util / 0.7;
    }
    const Advice a = Advise(rs, Profile(), opt);
    verdicts.push_back(a.verdict);
    EXPECT_EQ(a.has_prefix_info, path == mooncake);
  }
  EXPECT_NE(verdicts[0], verdicts[1]);
  EXPECT_NE(verdicts[1].find("no prefix information"), std::string::npos);
}

}  // namespace
}  // namespace pc::loadgen
