// promptcache run: stream a completion for a prompt, through the same
// engine (scheduler, prefix cache, decode loop) that serves requests: one
// sequence at a time, whole 512-token prefill chunks, no step-time target.
#include <nlohmann/json.hpp>

#include <cstdio>

#include "base/clock.h"
#include <sstream>

#include "commands.h"
#include "engine/engine.h"
#include "kernels/ggml_compat.h"

namespace pc::cli {
namespace {

struct RunFlags {
  // numerics "": ggml, or precise with --draft (ggml's roundings differ by batch shape)
  std::string model, prompt, prompt_file, prompt_tokens, kv_type = "f16", numerics, salt, draft = "none";
  std::string ggml_target = "auto";
  int n = 64, top_k = 40, logprobs = 0, threads = 0, repeat = 1;
  size_t kv_mem = 0, block_size = 16;
  bool no_cache = false;
  float temp = 0.8f, top_p = 0.95f;
  uint64_t seed = 0;
  bool ignore_eos = false, json = false, stats = false;
};

Result<std::vector<int32_t>> ParseIds(const std::string& s) {
  std::vector<int32_t> ids;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      const long v = std::stol(item, &used);
      if (used != item.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(item);
      ids.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      return Errorf("--prompt-tokens: '{}' is not a token id", item);
    }
  }
  return ids;
}

Result<std::string> ReadFile(const std::string& path) {
  std::FILE* fp = std::fopen(path.c_str(), "rb");
  if (fp == nullptr) return Errorf("cannot read prompt file '{}'", path);
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), fp)) > 0) text.append(buf, n);
  std::fclose(fp);
  return text;
}

void PrintToken(const RunFlags& f, const Tokenizer& t, const StreamEvent& ev) {
  if (f.json) {
    nlohmann::json j = {{"id", ev.token}, {"text", t.Piece(ev.token)}};
    if (f.logprobs > 0) {
      nlohmann::json top = nlohmann::json::array();
      for (const auto& [id, lp] : ev.top) top.push_back({id, lp});
      j["top"] = top;
    }
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::fwrite(ev.text.data(), 1, ev.text.size(), stdout);
  }
  std::fflush(stdout);
}

Result<std::vector<int32_t>> Prompt(const RunFlags& f, const Tokenizer& tok) {
  if (!f.prompt_tokens.empty()) return ParseIds(f.prompt_tokens);  // verbatim, no BOS
  std::string text = f.prompt;
  if (!f.prompt_file.empty()) {
    PC_ASSIGN_OR_RETURN(text, ReadFile(f.prompt_file));
  }
  return tok.Encode(text, {.add_special = true, .parse_special = true});
}

// One request through the engine: tokens printed as they come (first
// repetition only), the done event's figures returned.
Result<StreamEvent> RunOnce(Engine& engine, const RunFlags& f, const Tokenizer& tok, const std::vector<int32_t>& prompt,
                            bool print) {
  EngineRequest req;
  req.prompt = prompt;
  req.max_tokens = f.n;
  req.sampling = {f.temp, f.top_k, f.top_p, f.seed};
  req.ignore_eos = f.ignore_eos;
  req.top_logprobs = f.logprobs;
  req.salt = f.salt;
  req.use_cache = !f.no_cache;
  req.draft_tokens = -1;  // the engine's (--draft)
  SubmitOutcome sub = engine.Submit(std::move(req));
  if (sub.error != SubmitError::kNone) return Status::Error(sub.message);
  for (;;) {
    std::optional<StreamEvent> ev = sub.stream->Next(1000);
    if (!ev) continue;
    if (!ev->done) {
      if (print) PrintToken(f, tok, *ev);
      continue;
    }
    if (ev->finish == FinishReason::kError || ev->finish == FinishReason::kCancelled) {
      return Status::Error(ev->error.empty() ? "the request was cancelled" : ev->error);
    }
    return std::move(*ev);
  }
}

int Run(const RunFlags& f) {
  Result<DraftOptions> draft = ParseDraftSpec(f.draft);
  if (!draft.ok()) return Fail(draft.status().message());
  if (draft->max_tokens > 0 && f.numerics == "ggml") {
    return Fail("--draft needs --numerics precise: ggml's roundings differ between a one-token and a several-token pass");
  }
  const bool ggml = f.numerics == "ggml" || (f.numerics.empty() && draft->max_tokens == 0);
  const Numerics numerics = ggml ? Numerics::kGgmlCompat : Numerics::kPrecise;
  if (f.ggml_target != "auto") {
    Result<GgmlTarget> target = ParseGgmlTarget(f.ggml_target);
    if (!target.ok()) return Fail(target.status().message());
    SetGgmlTarget(*target);
  }
  Result<std::unique_ptr<Model>> model = Model::Load(f.model, f.threads, numerics);
  if (!model.ok()) return Fail(model.status().message());
  Result<Tokenizer> tok = Tokenizer::FromGguf((*model)->gguf());
  if (!tok.ok()) return Fail(tok.status().message());
  Result<std::vector<int32_t>> prompt = Prompt(f, *tok);
  if (!prompt.ok()) return Fail(prompt.status().message());
  if (const std::string problem = KvMemoryProblem(f.kv_mem); !problem.empty()) return Fail(problem);
  EngineOptions eo;
  eo.cache.block_size = f.block_size;
  Result<KvDtype> kv_type = ParseKvDtype(f.kv_type, static_cast<size_t>((*model)->config().head_dim));
  if (!kv_type.ok()) return Fail(kv_type.status().message());
  eo.cache.dtype = *kv_type;
  eo.cache.mem_bytes = f.kv_mem;  // 0: the default for the model's context
  eo.max_batch_tokens = kPrefillChunkTokens;
  eo.max_running = 1;
  eo.logits_memo_bytes = 0;  // one prompt: nothing repeats (the memo's rows are made at start)
  eo.draft_tokens = draft->max_tokens;
  Engine engine(**model, *tok, eo);
  {  // the pool size, always stated at start
    const EngineSnapshot s = engine.Snapshot();
    std::fprintf(stderr, "KV cache: %.1f MiB, %zu blocks of %zu tokens (%s)", s.kv_bytes / 1048576.0, s.num_blocks,
                 s.block_size, f.kv_type.c_str());
    if (s.num_local_blocks > 0) {
      std::fprintf(stderr, "; sliding-window layers: %zu blocks of their own, a sequence keeps its last %zu positions there",
                   s.num_local_blocks, s.window_tokens);
    }
    std::fprintf(stderr, "\n");
  }
  for (int r = 0; r < f.repeat; ++r) {
    Result<StreamEvent> done = RunOnce(engine, f, *tok, *prompt, r == 0);
    if (!done.ok()) return Fail(done.status().message());
    if (r == 0 && !f.json) std::printf("\n");
    if (f.repeat > 1 || f.stats) {
      const RequestTimings& t = done->timings;
      const double itl = t.mean_itl_ms();
      std::fprintf(stderr,
                   "run %d: prompt %zu tokens, cached %zu, prefilled %zu; queue %.2f ms, prefill %.1f ms, "
                   "TTFT %.1f ms, first decode step %.2f ms, mean ITL %.2f ms over %zu gaps (%.1f tok/s)\n",
                   r + 1, done->num_prompt_tokens, done->num_cached_tokens,
                   done->num_prompt_tokens - done->num_cached_tokens, t.queue_ms, t.prefill_ms, t.ttft_ms,
                   t.itl_ms.empty() ? 0.0 : t.itl_ms[0], itl, t.itl_ms.size(), itl > 0 ? 1e3 / itl : 0.0);
      if (draft->max_tokens > 0) {
        std::fprintf(stderr, "run %d: drafts: %zu drafted, %zu accepted (%.0f%%)\n", r + 1, done->num_draft_tokens,
                     done->num_accepted_draft_tokens,
                     done->num_draft_tokens ? 100.0 * done->num_accepted_draft_tokens / done->num_draft_tokens : 0.0);
      }
    }
  }
  return 0;
}

}  // namespace

void RegisterRun(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<RunFlags>();
  CLI::App* c = app.add_subcommand("run", "Generate a completion for a prompt");
  c->add_option("-m,--model", f->model, "GGUF model file")->required();
  auto* p = c->add_option("-p,--prompt", f->prompt, "Prompt text (BOS added when the model asks for it)");
  auto* pt = c->add_option("--prompt-tokens", f->prompt_tokens, "Comma-separated token ids, used verbatim (no BOS added)");
  auto* pf = c->add_option("--prompt-file", f->prompt_file, "Read the prompt text from a file");
  p->excludes(pt);
  pf->excludes(p);
  pf->excludes(pt);
  c->add_option("--repeat", f->repeat, "Run the same prompt K times in this process (the cache's effect)")
      ->check(CLI::Range(1, 100000));
  c->add_option("--kv-cache-mem", f->kv_mem, "KV pool bytes (default: a quarter of free RAM, at most 8 contexts)");
  c->add_option("--block-size", f->block_size, "Tokens per KV block")->check(CLI::Range(1, 4096));
  c->add_option("--cache-salt", f->salt, "Cache namespace (tenant): different salts never share blocks");
  c->add_flag("--no-cache", f->no_cache, "Neither reuse nor store cached prefixes");
  c->add_option("-n,--n-predict", f->n, "Tokens to generate")->check(CLI::Range(1, 1 << 20));
  c->add_option("--temp", f->temp, "Temperature (0: greedy)")->check(CLI::Range(0.0f, 100.0f));
  c->add_option("--top-k", f->top_k, "Top-k (0: off)")->check(CLI::Range(0, 1 << 24));
  c->add_option("--top-p", f->top_p, "Top-p (1: off)")->check(CLI::Range(0.0f, 1.0f));
  c->add_option("--seed", f->seed, "Sampling seed");
  c->add_option("--logprobs", f->logprobs, "Report the K most likely tokens per step")->check(CLI::Range(0, 1000));
  c->add_option("-t,--threads", f->threads, "Threads (default: physical cores)")->check(CLI::Range(0, 1024));
  c->add_option("--kv-type", f->kv_type, "KV cache element type (q8_0: half the bytes of f16)")
      ->check(CLI::IsMember({"f16", "f32", "q8_0"}));
  c->add_option("--numerics", f->numerics,
                 "ggml (default without --draft: llama.cpp's CPU arithmetic, bit for bit) or precise (our "
                 "F32-accumulating kernels, as serve uses: faster, not the reference's roundings; the default with --draft)")
      ->check(CLI::IsMember({"precise", "ggml"}));
  c->add_option("--ggml-target", f->ggml_target,
                "Which build of llama.cpp --numerics ggml reproduces: avx2, avx512 or avx512fp16 (its F16/F32 loop "
                "widths and exp differ by build); auto (default): the one it would run on this CPU")
      ->check(CLI::IsMember({"auto", "avx2", "avx512", "avx512fp16"}));
  c->add_option("--draft", f->draft,
                 "Prompt-lookup drafts: 'lookup[:N]' verifies up to N (default 8) tokens copied from the prompt or "
                 "output per step (output unchanged), 'none' (default)");
  c->add_flag("--ignore-eos", f->ignore_eos, "Never sample an end-of-generation token (generate all -n tokens); logprobs still show it");
  c->add_flag("--json", f->json, "One JSON object per generated token");
  c->add_flag("--stats", f->stats, "Print prefill and decode speed to stderr");
  c->callback([f, exit_code] {
    if (f->prompt.empty() && f->prompt_tokens.empty() && f->prompt_file.empty()) {
      *exit_code = Fail("give a prompt with -p, --prompt-file or --prompt-tokens");
      return;
    }
    *exit_code = Run(*f);
  });
}

}  // namespace pc::cli
