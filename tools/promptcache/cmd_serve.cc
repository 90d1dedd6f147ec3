// promptcache serve: the OpenAI-compatible server.
#include <optional>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <cmath>
#include <cstdio>
#include <thread>

#include "base/clock.h"
#include "commands.h"
#include "engine/calibrate.h"
#include "kernels/ggml_compat.h"
#include "kvcache/disk_tier.h"
#include "kvcache/redis_tier.h"
#include "server/server.h"

namespace pc::cli {
namespace {

struct ServeFlags {
  std::string numerics = "precise";
  std::string ggml_target = "auto";
  std::string model, host = "127.0.0.1", api_key, api_key_file, chat_template, chat_template_file, alias, kv_type = "f16";
  int port = 8080, threads = 0;
  size_t kv_mem = 0, ctx_size = 0, block_size = 16, batch_tokens = 256, max_running = 32, max_queue = 256;
  double max_step_ms = 25;
  std::string admission = "cache-aware";
  bool no_step_drop = false;
  double idle_spin_ms = 50;
  double drain_timeout_s = 30;
  size_t host_cache_mem = 0, disk_cache_size = size_t{8} << 30;
  std::string disk_cache, redis, redis_ns = "promptcache";
  int redis_ttl_s = 3600;
  std::string tier_secret_file;
  bool tier_trust_unauthenticated = false;
  std::string request_log;
  std::string step_log;
  std::string draft = "none";
};

// The spill tiers the flags ask for, fastest first; null when none.
Result<std::unique_ptr<TierStack>> MakeTiers(const ServeFlags& f, Model& model, const CacheOptions& co) {
  std::vector<std::unique_ptr<KvTier>> tiers;
  PrefixCache probe(model.config().kv_shape(), model.fingerprint(), CacheOptions{co.block_size, co.dtype, 1});
  const Hash128 fp = probe.layout_fingerprint();
  const size_t payload = probe.payload_bytes();
  PayloadSeal seal;
  if (!f.tier_secret_file.empty()) {
    PC_ASSIGN_OR_RETURN(seal, PayloadSeal::FromSecretFile(f.tier_secret_file));
  }
  if (f.host_cache_mem > 0) tiers.push_back(std::make_unique<HostTier>(f.host_cache_mem));
  if (!f.disk_cache.empty()) {
    DiskTierOptions d = DiskOptionsFor(probe, f.disk_cache, f.disk_cache_size);
    d.seal = seal;  // a directory shared between hosts needs the secret as Redis does
    tiers.push_back(std::make_unique<DiskTier>(d));
  }
  if (!f.redis.empty()) {
    // Anyone who can write to the shared store could otherwise plant K/V
    // for any prompt and tenant.
    if (!seal.keyed() && !f.tier_trust_unauthenticated) {
      return Status::Error(
          "--redis is a shared tier: give --tier-secret-file (entries are then authenticated with HMAC-SHA256), or "
          "--tier-trust-unauthenticated to accept whatever the Redis server returns");
    }
    RedisTierOptions r;
    PC_RETURN_IF_ERROR(ParseRedisAddress(f.redis, &r));
    r.ns = f.redis_ns;
    r.ttl_s = f.redis_ttl_s;
    r.fingerprint = fp;
    r.seal = seal;
    tiers.push_back(std::make_unique<RedisTier>(r));
  }
  if (tiers.empty()) return std::unique_ptr<TierStack>();
  auto stack = std::make_unique<TierStack>(std::move(tiers));
  stack->Calibrate(CalibratePrefill(model, co), payload);
  for (const auto& t : stack->tiers()) {
    const CostModel costs = stack->costs();
    const std::optional<TierCost> c = costs.tier_cost(t->name());
    if (!c || std::isinf(c->latency_ms)) {
      std::fprintf(stderr, "promptcache: tier %-5s unavailable at start (could not store test blocks); re-measured later\n",
                   t->name().c_str());
      continue;
    }
    const size_t min_tokens = costs.MinUsefulMatchTokens(t->name(), co.block_size, static_cast<size_t>(model.config().n_ctx));
    std::fprintf(stderr, "promptcache: tier %-5s load %.3f ms + %.3f ms/block (%zu bytes); recompute 1 block at 0 = %.2f ms; "
                 "min useful match %s\n", t->name().c_str(), c->latency_ms, c->ms_per_block, payload,
                 costs.RecomputeMs(0, co.block_size),
                 min_tokens ? fmt::format("{} tokens", min_tokens).c_str() : "never (recompute is cheaper)");
  }
  return stack;
}

// Waits for SIGTERM/SIGINT on this thread (the signals are blocked in every
// other thread), then drains: refuse new work (503), let in-flight requests
// finish until the deadline, cancel the rest, then stop listening.
void DrainOnSignal(const sigset_t& set, Engine& engine, Server& server, double timeout_s) {
  int sig = 0;
  sigwait(&set, &sig);
  std::fprintf(stderr, "promptcache: signal %d: draining (up to %.0f s)\n", sig, timeout_s);
  server.set_draining();
  engine.BeginDrain();
  auto busy = [&] { return !engine.Idle() || server.num_inflight() > 0; };
  const int64_t deadline = NowNs() + static_cast<int64_t>(timeout_s * 1e9);
  while (busy() && NowNs() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (busy()) {
    std::fprintf(stderr, "promptcache: drain deadline passed; cancelling what is left\n");
    engine.CancelAll();
    // Cancelled streams end with an error event; give them a moment to be sent.
    const int64_t grace = NowNs() + 2'000'000'000;
    while (busy() && NowNs() < grace) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  server.Stop();
}

int Serve(const ServeFlags& f) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any thread starts: all inherit the mask

  const Numerics numerics = f.numerics == "ggml" ? Numerics::kGgmlCompat : Numerics::kPrecise;
  if (f.ggml_target != "auto") {
    Result<GgmlTarget> target = ParseGgmlTarget(f.ggml_target);
    if (!target.ok()) return Fail(target.status().message());
    SetGgmlTarget(*target);
  }
  Result<std::unique_ptr<Model>> model = Model::Load(f.model, f.threads, numerics);
  if (!model.ok()) return Fail(model.status().message());
  Result<Tokenizer> tok = Tokenizer::FromGguf((*model)->gguf());
  if (!tok.ok()) return Fail(tok.status().message());

  ServerOptions so;
  so.host = f.host;
  so.port = f.port;
  Result<std::string> general_name = (*model)->gguf().GetString("general.name");
  so.model_name = !f.alias.empty() ? f.alias : general_name.ok() && !general_name->empty() ? *general_name : "promptcache";
  Result<ChatTemplate> chat = ChatTemplateForModel((*model)->gguf(), *tok);
  if (!f.chat_template_file.empty()) {
    std::ifstream in(f.chat_template_file);
    if (!in) return Fail("cannot read the chat template file '" + f.chat_template_file + "'");
    const std::string src((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Result<ChatTemplate> from_file = ChatTemplate::FromSource(src, f.chat_template_file);
    if (!from_file.ok()) return Fail(from_file.status().message());
    if (chat.ok()) {  // keep the model's BOS/EOS texts and tokenizer
      from_file->set_bos_token(chat->bos_token());
      from_file->set_eos_token(chat->eos_token());
    }
    from_file->set_tokenizer(&*tok);
    chat = std::move(from_file);
  } else if (!f.chat_template.empty()) {
    Result<ChatTemplate> builtin = ChatTemplate::Builtin(f.chat_template);
    if (!builtin.ok()) return Fail(builtin.status().message());
    builtin->set_tokenizer(&*tok);
    chat = std::move(builtin);
  }
  if (!chat.ok()) return Fail(chat.status().message() + " (give --chat-template-file or --chat-template NAME)");
  so.chat_template = std::make_shared<const ChatTemplate>(std::move(*chat));
  if (!f.api_key.empty()) so.api_keys[f.api_key] = "default";
  if (!f.api_key_file.empty()) {
    Result<std::map<std::string, std::string>> keys = LoadApiKeyFile(f.api_key_file);
    if (!keys.ok()) return Fail(keys.status().message());
    so.api_keys.insert(keys->begin(), keys->end());
  }

  if (const std::string problem = KvMemoryProblem(f.kv_mem); !problem.empty()) return Fail(problem);
  EngineOptions eo;
  eo.cache.block_size = f.block_size;
  Result<KvDtype> kv_type = ParseKvDtype(f.kv_type, static_cast<size_t>((*model)->config().head_dim));
  if (!kv_type.ok()) return Fail(kv_type.status().message());
  eo.cache.dtype = *kv_type;
  eo.cache.mem_bytes = f.kv_mem;
  eo.ctx_tokens = f.ctx_size;
  if (f.ctx_size > static_cast<size_t>((*model)->config().n_ctx)) {
    std::fprintf(stderr, "promptcache: warning: -c %zu is beyond the model's trained context of %d tokens\n", f.ctx_size,
                 (*model)->config().n_ctx);
  }
  eo.max_batch_tokens = f.batch_tokens;
  eo.max_step_ms = f.max_step_ms;
  eo.max_running = f.max_running;
  eo.max_waiting = f.max_queue;
  eo.request_log_path = f.request_log;
  eo.step_log_path = f.step_log;
  Result<DraftOptions> draft = ParseDraftSpec(f.draft);
  if (!draft.ok()) return Fail(draft.status().message());
  eo.draft_tokens = draft->max_tokens;
  if (eo.draft_tokens > 0 && f.numerics == "ggml") {
    fmt::print(stderr, "promptcache: --draft is off under --numerics ggml (its roundings differ between a one-token and "
                       "a several-token pass, so drafts would change outputs)\n");
  }
  so.num_http_threads = f.max_running + f.max_queue + 16;
  Result<std::unique_ptr<TierStack>> tiers = MakeTiers(f, **model, eo.cache);
  if (!tiers.ok()) return Fail(tiers.status().message());
  eo.tiers = tiers->get();  // declared before the engine: destroyed (and flushed) after it
  eo.admission = f.admission == "fifo" ? Admission::kFifo : Admission::kCacheAware;
  eo.drop_steps_for_hits = !f.no_step_drop;
  eo.idle_spin_ms = f.idle_spin_ms;
  std::optional<CostModel> costs;
  if (eo.tiers) {
    costs = eo.tiers->costs();
  } else if (f.max_step_ms > 0) {
    // The step budget's first prices for deep chunks (its learned costs
    // refine them): about a second on a small model.
    costs = CalibratePrefill(**model, eo.cache);
  }
  // A cache hit's step may run inside a paused one: its pass's buffers are
  // made now, not in its step (WarmNestedPass).
  if (f.max_step_ms > 0 && !f.no_step_drop) WarmNestedPass(**model, eo.cache, eo.max_batch_tokens);
  if (costs) {
    eo.prefill_profile = costs->prefill_samples();
    eo.kv_pass_ms_per_position = costs->kv_pass_ms_per_position();
    eo.prefill_profile_chunk = costs->sample_chunk_tokens();
  }
  if (!eo.prefill_profile.empty()) {
    std::string curve;
    for (const auto& [pos, ms] : eo.prefill_profile) curve += fmt::format(" {:.2f} ms at {:.0f},", ms, pos);
    curve.pop_back();
    std::fprintf(stderr, "promptcache: prefill per token:%s; a chunk's K/V pass %.2f ms per 1k positions\n", curve.c_str(),
                 1000 * eo.kv_pass_ms_per_position);
  }
  Engine engine(**model, *tok, eo);
  Server server(engine, *tok, so);
  Result<int> port = server.Bind();
  if (!port.ok()) return Fail(port.status().message());
  const EngineSnapshot snap = engine.Snapshot();
  const std::string windows =
      snap.num_local_blocks == 0 ? ""
                                 : fmt::format(" (sliding-window layers: {} blocks of their own, {} positions kept per sequence)",
                                               snap.num_local_blocks, snap.window_tokens);
  std::fprintf(stderr, "promptcache: model %s, chat template %s, context %zu tokens, KV pool %zu blocks of %zu tokens%s%s\n",
               so.model_name.c_str(), so.chat_template->name().c_str(), engine.context_length(), snap.num_blocks,
               snap.block_size, windows.c_str(), so.api_keys.empty() ? "" : ", API keys required");
  std::fprintf(stderr, "promptcache: listening on http://%s:%d\n", f.host.c_str(), *port);
  std::thread drainer([&] { DrainOnSignal(set, engine, server, f.drain_timeout_s); });
  server.Run();
  // Run returns when Stop was called and every handler finished. If it ended
  // for another reason, wake the drainer so it can finish.
  if (!server.draining()) kill(getpid(), SIGTERM);
  drainer.join();
  if (*tiers) (*tiers)->Flush();  // every computed block has reached disk/Redis
  std::fprintf(stderr, "promptcache: stopped\n");
  return 0;
}

}  // namespace

void RegisterServe(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* c = app.add_subcommand("serve", "OpenAI-compatible HTTP server with continuous batching and prefix caching");
  c->add_option("-m,--model", f->model, "GGUF model file")->required();
  c->add_option("--host", f->host, "Address to listen on");
  c->add_option("--port", f->port, "Port (0: any free port, printed at start)")->check(CLI::Range(0, 65535));
  c->add_option("--alias", f->alias, "Model name reported by /v1/models (default: general.name)");
  c->add_option("--api-key", f->api_key, "Require this key (tenant 'default')");
  c->add_option("--api-key-file", f->api_key_file, "File of 'KEY TENANT' lines; each tenant gets its own cache namespace");
  c->add_option("--chat-template-file", f->chat_template_file, "Render chats with this Jinja template instead of the model's");
  c->add_option("--chat-template", f->chat_template, "Use a built-in chat template instead of the model's")
      ->check(CLI::IsMember({"chatml", "llama2", "llama3", "mistral", "zephyr"}));
  c->add_option("--numerics", f->numerics,
                "precise: our kernels (fast); ggml: llama.cpp's CPU arithmetic where we reproduce it (for comparisons; "
                "its F16 and attention loops are scalar)")
      ->check(CLI::IsMember({"precise", "ggml"}));
  c->add_option("--ggml-target", f->ggml_target,
                "Which build of llama.cpp --numerics ggml reproduces: avx2, avx512 or avx512fp16; auto (default): "
                "the one it would run on this CPU")
      ->check(CLI::IsMember({"auto", "avx2", "avx512", "avx512fp16"}));
  c->add_option("-t,--threads", f->threads, "Compute threads (default: physical cores)")->check(CLI::Range(0, 1024));
  c->add_option("-c,--ctx-size", f->ctx_size,
                "Tokens per request, prompt and output (default: the model's trained length); capped by the KV pool")
      ->check(CLI::Range(size_t{1}, size_t{1} << 24));
  c->add_option("--kv-cache-mem", f->kv_mem, "KV pool bytes (default: a quarter of free RAM, at most 8 contexts)");
  c->add_option("--block-size", f->block_size, "Tokens per KV block")->check(CLI::Range(1, 4096));
  c->add_option("--kv-type", f->kv_type, "KV cache element type (q8_0: half the bytes of f16, twice the cached tokens)")
      ->check(CLI::IsMember({"f16", "f32", "q8_0"}));
  c->add_option("--batch-tokens", f->batch_tokens, "Tokens per engine step (decode + prefill chunks)")->check(CLI::Range(1, 1 << 16));
  c->add_option("--max-step-ms", f->max_step_ms,
                "Step-time target while streams decode: prefill chunks are sized to keep each step (the "
                "inter-token gap) near it; 0: off")
      ->check(CLI::Range(0.0, 60000.0));
  c->add_option("--admission", f->admission,
                "Who goes first among waiting requests and prompts: cache-aware (arrival plus predicted prefill "
                "still to do: a mostly cached prompt is not queued behind misses, none starves) or fifo")
      ->check(CLI::IsMember({"cache-aware", "fifo"}));
  c->add_flag("--no-step-drop", f->no_step_drop,
              "Cache-aware admission without hits ahead of the step in progress (neither paused nor dropped for "
              "them): a mostly cached prompt that arrives then waits for the step and rides a step of other "
              "prompts' chunks");
  c->add_option("--idle-spin-ms", f->idle_spin_ms,
                "Once the last request has ended, the step loop and compute threads spin this long (yielding "
                "their cores every 50 us) before sleeping, so the next request finds them awake; 0: sleep at once")
      ->check(CLI::Range(0.0, 60000.0));
  c->add_option("--max-running", f->max_running, "Sequences decoded together")->check(CLI::Range(1, 4096));
  c->add_option("--max-queue", f->max_queue, "Waiting requests before answering 429")->check(CLI::Range(0, 1 << 20));
  c->add_option("--host-cache-mem", f->host_cache_mem, "Host-RAM tier bytes for blocks evicted from the pool (0: off)");
  c->add_option("--disk-cache", f->disk_cache, "Disk tier directory (survives restarts)");
  c->add_option("--disk-cache-size", f->disk_cache_size, "Disk tier byte budget");
  c->add_option("--redis", f->redis, "Redis tier HOST:PORT (shared between servers)");
  c->add_option("--redis-ns", f->redis_ns, "Redis key namespace");
  c->add_option("--tier-secret-file", f->tier_secret_file,
                "File holding a secret (16+ bytes): disk and Redis entries are authenticated with HMAC-SHA256 under it");
  c->add_flag("--tier-trust-unauthenticated", f->tier_trust_unauthenticated,
              "Use --redis without a secret (entries then only carry a checksum against accidental corruption)");
  c->add_option("--redis-ttl", f->redis_ttl_s, "Redis entry TTL in seconds")->check(CLI::Range(1, 1 << 30));
  c->add_option("--request-log", f->request_log,
                "Append one JSON line per request (arrival, token counts, prefix block ids; never text) for `advise`");
  c->add_option("--step-log", f->step_log,
                "Append one JSON line per engine step (decode positions, prompt chunks, predicted and measured ms), "
                "comparable with `advise --step-log`");
  c->add_option("--draft", f->draft,
                "Prompt-lookup drafts: 'lookup[:N]' verifies up to N (default 8) tokens copied from the request's own "
                "tokens per step (greedy output unchanged; per request: speculative.n_max), 'none' (default)");
  c->add_option("--drain-timeout", f->drain_timeout_s, "Seconds in-flight requests get after SIGTERM")->check(CLI::Range(0.0, 3600.0));
  c->callback([f, exit_code] { *exit_code = Serve(*f); });
}

}  // namespace pc::cli
