// promptcache bench: the load generator against any OpenAI-compatible server.
#include <cstdio>

#include "bench_driver.h"
#include "commands.h"

namespace pc::cli {
namespace {

struct BenchFlags {
  BenchConfig cfg;
  std::string url = "http://127.0.0.1:8080", api_key, model, token_range = "1000:9000";
  std::string extra_body;
  size_t requests = 0, docs = 0, doc_tokens = 0, prompt_tokens = 0, output_tokens = 0, system_tokens = 0, turns = 0;
  double rate = 0;
  int prefix_key_tokens = 0;
  bool new_connections = false;
};

int Bench(BenchFlags f) {
  Result<loadgen::Target> target = loadgen::ParseUrl(f.url);
  if (!target.ok()) return Fail(target.status().message());
  target->api_key = f.api_key;
  target->model = f.model;
  target->prefix_key_tokens = f.prefix_key_tokens;
  target->keep_alive = !f.new_connections;
  if (!f.extra_body.empty()) {
    nlohmann::json extra = nlohmann::json::parse(f.extra_body, nullptr, false);
    if (!extra.is_object()) return Fail("--extra-body: expected a JSON object");
    target->extra_body = f.extra_body;
  }
  BenchConfig& cfg = f.cfg;
  loadgen::TokenRange range;
  if (std::sscanf(f.token_range.c_str(), "%d:%d", &range.lo, &range.hi) != 2 || range.lo < 0 || range.hi <= range.lo) {
    return Fail("--token-range must be LO:HI with 0 <= LO < HI");
  }
  if (cfg.workload != "trace") {
    Result<loadgen::ShapeParams> shape = loadgen::DefaultShape(cfg.workload);
    if (!shape.ok()) return Fail(shape.status().message());
    const uint64_t seed = cfg.shape.seed;
    cfg.shape = *shape;
    cfg.shape.seed = seed;
    if (f.requests) cfg.shape.num_requests = f.requests;
    if (f.docs) cfg.shape.num_docs = f.docs;
    if (f.doc_tokens) cfg.shape.doc_tokens = f.doc_tokens;
    if (f.prompt_tokens) cfg.shape.prompt_tokens = f.prompt_tokens;
    if (f.output_tokens) cfg.shape.output_tokens = f.output_tokens;
    if (f.system_tokens) cfg.shape.system_tokens = f.system_tokens;
    if (f.turns) cfg.shape.turns = f.turns;
  } else {
    if (cfg.trace.path.empty()) return Fail("--workload trace needs --trace FILE");
    if (f.requests) cfg.trace.max_requests = f.requests;
  }
  cfg.shape.range = cfg.trace.range = range;
  if (f.rate > 0) {
    cfg.run.arrival = loadgen::Arrival::kPoisson;
    cfg.run.rate_per_s = f.rate;
  }
  Result<BenchOutcome> out = RunBench(*target, cfg);
  if (!out.ok()) return Fail(out.status().message());
  PrintBench(cfg, *out);
  for (const loadgen::RequestRecord& r : out->records) {
    if (!r.ok) return 1;
  }
  return 0;
}

}  // namespace

void RegisterBench(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<BenchFlags>();
  CLI::App* c = app.add_subcommand("bench", "Load generator for any OpenAI-compatible server: TTFT and ITL by cache outcome, A/B");
  c->add_option("--url", f->url, "Server base URL");
  c->add_option("--api-key", f->api_key, "Bearer key");
  c->add_option("--extra-body", f->extra_body, "JSON object merged into every request body (e.g. a response_format)");
  c->add_option("--model", f->model, "Model name to send");
  c->add_option("--prefix-key-tokens", f->prefix_key_tokens,
                "X-Prefix-Key header: a hash of the prompt's first N tokens (0: the trace's block size, else 64; "
                "-1: no header), for prefix-affinity routers");
  c->add_flag("--new-connections", f->new_connections,
              "A new TCP connection per request (default: keep-alive connections reused, as SDK clients do)");
  c->add_option("-w,--workload", f->cfg.workload, "rag, quote, chat, multiturn, sysprompt or trace")
      ->check(CLI::IsMember({"rag", "quote", "chat", "multiturn", "sysprompt", "trace"}));
  c->add_option("--requests", f->requests, "Requests (shapes) or at most this many trace lines");
  c->add_option("--docs", f->docs, "rag: shared documents");
  c->add_option("--doc-tokens", f->doc_tokens, "rag: tokens per document");
  c->add_option("--prompt-tokens", f->prompt_tokens, "chat prompt / rag and sysprompt question / multiturn message tokens");
  c->add_option("--output-tokens", f->output_tokens, "Answer tokens (max_tokens with ignore_eos)");
  c->add_option("--system-tokens", f->system_tokens, "sysprompt: shared system prompt tokens");
  c->add_option("--turns", f->turns, "multiturn: turns per conversation");
  c->add_option("--seed", f->cfg.shape.seed, "Workload seed (a new seed: new documents, nothing cached)");
  c->add_option("--token-range", f->token_range, "Token ids to draw prompts from, LO:HI");
  c->add_option("--trace", f->cfg.trace.path, "JSON Lines trace (t_ms, input_tokens, output_tokens, prefix_blocks, block_size)");
  c->add_option("--trace-sample", f->cfg.trace.sample_every, "trace: replay every k-th request");
  c->add_option("--trace-skip", f->cfg.trace.skip_lines, "trace: start after this many lines");
  c->add_option("--token-scale", f->cfg.trace.token_scale, "trace: multiply input tokens and block size by this");
  c->add_option("--time-scale", f->cfg.trace.time_scale, "trace: multiply arrival offsets by this");
  c->add_option("--output-scale", f->cfg.trace.output_scale, "trace: multiply output tokens by this");
  c->add_option("--max-output-tokens", f->cfg.trace.max_output_tokens, "trace: cap on output tokens");
  c->add_option("--cache-capacity-tokens", f->cfg.cache_capacity_tokens,
                "trace: cache capacity for the ideal simulation (default: from the server's /metrics)");
  c->add_option("-c,--concurrency", f->cfg.run.concurrency, "Closed loop: requests in flight");
  c->add_option("--rate", f->rate, "Poisson arrivals per second (open loop)");
  c->add_option("--speed", f->cfg.run.speed, "trace: replay speed factor");
  c->add_option("--duration", f->cfg.run.max_seconds, "Stop starting requests after this many seconds");
  c->add_flag("--ab", f->cfg.ab, "Send every request twice, cache on and off, interleaved, and judge the difference");
  c->add_option("--warmup", f->cfg.warmup_requests, "Warm-up requests (random prompts, cache bypassed)");
  c->add_option("--slo-ttft-ms", f->cfg.slo.ttft_ms, "Goodput: TTFT objective");
  c->add_option("--slo-tpot-ms", f->cfg.slo.tpot_ms, "Goodput: time-per-output-token objective");
  c->add_option("--json", f->cfg.json_path, "Write every request and the aggregates as JSON");
  c->add_option("--html", f->cfg.html_path, "Write a self-contained HTML report");
  c->add_flag("!--no-progress", f->cfg.run.progress, "No progress bar");
  c->callback([f, exit_code] { *exit_code = Bench(*f); });
}

}  // namespace pc::cli
