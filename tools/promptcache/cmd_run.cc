// promptcache run: stream a completion for a prompt.
#include <nlohmann/json.hpp>

#include <cstdio>

#include "base/clock.h"
#include <sstream>

#include "commands.h"
#include "kvcache/prefix_cache.h"

namespace pc::cli {
namespace {

struct RunFlags {
  std::string model, prompt, prompt_file, prompt_tokens, kv_type = "f16", numerics = "ggml", salt;
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

void PrintToken(const RunFlags& f, const Tokenizer& t, const TokenEvent& ev) {
  if (f.json) {
    nlohmann::json j = {{"id", ev.id}, {"text", t.Piece(ev.id)}};
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

int Run(const RunFlags& f) {
  const Numerics numerics = f.numerics == "ggml" ? Numerics::kGgmlCompat : Numerics::kPrecise;
  Result<std::unique_ptr<Model>> model = Model::Load(f.model, f.threads, numerics);
  if (!model.ok()) return Fail(model.status().message());
  Result<Tokenizer> tok = Tokenizer::FromGguf((*model)->gguf());
  if (!tok.ok()) return Fail(tok.status().message());
  std::vector<int32_t> prompt;
  if (!f.prompt_tokens.empty()) {
    Result<std::vector<int32_t>> ids = ParseIds(f.prompt_tokens);  // verbatim, no BOS
    if (!ids.ok()) return Fail(ids.status().message());
    prompt = *ids;
  } else {
    std::string text = f.prompt;
    if (!f.prompt_file.empty()) {
      Result<std::string> t = ReadFile(f.prompt_file);
      if (!t.ok()) return Fail(t.status().message());
      text = *t;
    }
    prompt = tok->Encode(text, {.add_special = true, .parse_special = true});
  }
  GenerateOptions opt;
  opt.max_tokens = f.n;
  opt.sampling = {f.temp, f.top_k, f.top_p, f.seed};
  opt.ignore_eos = f.ignore_eos;
  opt.logprobs = f.logprobs;
  CacheOptions co;
  co.block_size = f.block_size;
  co.dtype = f.kv_type == "f32" ? KvDtype::kF32 : KvDtype::kF16;
  co.mem_bytes = f.kv_mem > 0 ? f.kv_mem : DefaultKvCacheBytes((*model)->config(), co);
  PrefixCache cache((*model)->config(), (*model)->fingerprint(), co);
  {  // the pool size, always stated at start
    std::fprintf(stderr, "KV cache: %.1f MiB, %d blocks of %zu tokens (%s)\n", cache.store().bytes() / 1048576.0,
                 cache.pool().num_blocks(), co.block_size, f.kv_type.c_str());
  }
  for (int r = 0; r < f.repeat; ++r) {
    const int64_t t0 = NowNs();
    Result<std::unique_ptr<CachedSequence>> seq = cache.Start(prompt, f.salt, !f.no_cache);
    if (!seq.ok()) return Fail(seq.status().message());
    const double lookup_ms = NsToMs(NowNs() - t0);
    const Tokenizer& t = *tok;
    Result<GenerateStats> st = Generate(**model, t, **seq, prompt, opt, [&](const TokenEvent& ev) {
      if (r == 0) PrintToken(f, t, ev);
      return true;
    });
    if (!st.ok()) return Fail(st.status().message());
    if (r == 0 && !f.json) std::printf("\n");
    if (f.repeat > 1 || f.stats) {
      std::fprintf(stderr,
                   "run %d: prompt %zu tokens, cached %zu, prefilled %zu; lookup %.2f ms, prefill %.1f ms, "
                   "TTFT %.1f ms, first decode step %.2f ms, mean ITL %.2f ms over %zu gaps (%.1f tok/s)\n",
                   r + 1, st->num_prompt_tokens, st->num_cached_tokens, st->num_prefill_tokens, lookup_ms,
                   st->prefill_ms, st->ttft_ms, st->itl_ms.empty() ? 0.0 : st->itl_ms[0], st->mean_itl_ms(),
                   st->itl_ms.size(),
                   st->mean_itl_ms() > 0 ? 1e3 / st->mean_itl_ms() : 0.0);
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
  c->add_option("-n,--n-predict", f->n, "Tokens to generate")->check(CLI::Range(0, 1 << 20));
  c->add_option("--temp", f->temp, "Temperature (0: greedy)")->check(CLI::Range(0.0f, 100.0f));
  c->add_option("--top-k", f->top_k, "Top-k (0: off)")->check(CLI::Range(0, 1 << 24));
  c->add_option("--top-p", f->top_p, "Top-p (1: off)")->check(CLI::Range(0.0f, 1.0f));
  c->add_option("--seed", f->seed, "Sampling seed");
  c->add_option("--logprobs", f->logprobs, "Report the K most likely tokens per step")->check(CLI::Range(0, 1000));
  c->add_option("-t,--threads", f->threads, "Threads (default: physical cores)")->check(CLI::Range(0, 1024));
  c->add_option("--kv-type", f->kv_type, "KV cache element type")->check(CLI::IsMember({"f16", "f32"}));
  c->add_option("--numerics", f->numerics,
                 "ggml (default: llama.cpp's CPU arithmetic, bit for bit) or precise (our F32-accumulating "
                 "kernels, as serve uses: faster, not the reference's roundings)")
      ->check(CLI::IsMember({"precise", "ggml"}));
  c->add_flag("--ignore-eos", f->ignore_eos, "Keep generating past end-of-sequence");
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
