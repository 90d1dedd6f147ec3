// promptcache run: stream a completion for a prompt.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <sstream>

#include "commands.h"
#include "model/generate.h"

namespace pc::cli {
namespace {

struct RunFlags {
  std::string model, prompt, prompt_tokens, kv_type = "f16", numerics = "precise";
  int n = 64, top_k = 40, logprobs = 0, threads = 0;
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

int Run(const RunFlags& f) {
  Result<std::unique_ptr<Model>> model = Model::Load(f.model, f.threads);
  if (!model.ok()) return Fail(model.status().message());
  (*model)->set_numerics(f.numerics == "ggml" ? Numerics::kGgmlCompat : Numerics::kPrecise);
  Result<Tokenizer> tok = Tokenizer::FromGguf((*model)->gguf());
  if (!tok.ok()) return Fail(tok.status().message());
  std::vector<int32_t> prompt;
  if (!f.prompt_tokens.empty()) {
    Result<std::vector<int32_t>> ids = ParseIds(f.prompt_tokens);  // verbatim, no BOS
    if (!ids.ok()) return Fail(ids.status().message());
    prompt = *ids;
  } else {
    prompt = tok->Encode(f.prompt, {.add_special = true, .parse_special = true});
  }
  GenerateOptions opt;
  opt.max_tokens = f.n;
  opt.sampling = {f.temp, f.top_k, f.top_p, f.seed};
  opt.ignore_eos = f.ignore_eos;
  opt.logprobs = f.logprobs;
  opt.kv_dtype = f.kv_type == "f32" ? KvDtype::kF32 : KvDtype::kF16;
  const Tokenizer& t = *tok;
  Result<GenerateStats> stats = Generate(**model, t, prompt, opt, [&](const TokenEvent& ev) {
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
    return true;
  });
  if (!stats.ok()) return Fail(stats.status().message());
  if (!f.json) std::printf("\n");
  if (f.stats) {
    const double decode_tps = stats->num_generated_tokens > 1
        ? (stats->num_generated_tokens - 1) / (stats->decode_ms / 1e3) : 0;
    std::fprintf(stderr, "prompt %zu tokens, prefill %.1f ms (%.1f tok/s); generated %zu tokens, decode %.1f tok/s\n",
                 stats->num_prompt_tokens, stats->prefill_ms,
                 stats->num_prompt_tokens / (stats->prefill_ms / 1e3), stats->num_generated_tokens, decode_tps);
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
  p->excludes(pt);
  c->add_option("-n,--n-predict", f->n, "Tokens to generate")->check(CLI::Range(0, 1 << 20));
  c->add_option("--temp", f->temp, "Temperature (0: greedy)")->check(CLI::Range(0.0f, 100.0f));
  c->add_option("--top-k", f->top_k, "Top-k (0: off)")->check(CLI::Range(0, 1 << 24));
  c->add_option("--top-p", f->top_p, "Top-p (1: off)")->check(CLI::Range(0.0f, 1.0f));
  c->add_option("--seed", f->seed, "Sampling seed");
  c->add_option("--logprobs", f->logprobs, "Report the K most likely tokens per step")->check(CLI::Range(0, 1000));
  c->add_option("-t,--threads", f->threads, "Threads (default: physical cores)")->check(CLI::Range(0, 1024));
  c->add_option("--kv-type", f->kv_type, "KV cache element type")->check(CLI::IsMember({"f16", "f32"}));
  c->add_option("--numerics", f->numerics,
                 "precise (F32 accumulation) or ggml (llama.cpp CPU attention rounding, for comparisons)")
      ->check(CLI::IsMember({"precise", "ggml"}));
  c->add_flag("--ignore-eos", f->ignore_eos, "Keep generating past end-of-sequence");
  c->add_flag("--json", f->json, "One JSON object per generated token");
  c->add_flag("--stats", f->stats, "Print prefill and decode speed to stderr");
  c->callback([f, exit_code] {
    if (f->prompt.empty() && f->prompt_tokens.empty()) {
      *exit_code = Fail("give a prompt with -p or --prompt-tokens");
      return;
    }
    *exit_code = Run(*f);
  });
}

}  // namespace pc::cli
