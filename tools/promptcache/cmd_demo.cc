// promptcache demo: the README's main job. Makes the default benchmark model
// once (cached), then runs a short generation and prints prefill and decode
// speed.
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "base/clock.h"
#include "commands.h"
#include "model/generate.h"
#include "model/make_model.h"

namespace pc::cli {
namespace {

struct DemoFlags {
  std::string model, cache_dir;
  int n = 64, threads = 0;
};

std::string DefaultCacheDir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/promptcache";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/promptcache";
  return ".promptcache-cache";
}

Result<std::string> EnsureDefaultModel(const std::string& dir) {
  const std::string path = dir + "/bench-135m-q8_0.gguf";
  if (std::filesystem::exists(path)) return path;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Errorf("cannot create '{}': {}", dir, ec.message());
  std::fprintf(stderr, "making the default model %s (once)...\n", path.c_str());
  MakeModelOptions opt;
  PC_ASSIGN_OR_RETURN(opt.shape, BuiltinShape("bench-135m"));
  opt.type = TensorType::kQ8_0;
  PC_RETURN_IF_ERROR(MakeModel(opt, path));
  return path;
}

int Demo(const DemoFlags& f) {
  std::string path = f.model;
  if (path.empty()) {
    Result<std::string> p = EnsureDefaultModel(f.cache_dir.empty() ? DefaultCacheDir() : f.cache_dir);
    if (!p.ok()) return Fail(p.status().message());
    path = *p;
  }
  Result<std::unique_ptr<Model>> model = Model::Load(path, f.threads);
  if (!model.ok()) return Fail(model.status().message());
  Result<Tokenizer> tok = Tokenizer::FromGguf((*model)->gguf());
  if (!tok.ok()) return Fail(tok.status().message());
  const ModelConfig& c = (*model)->config();
  std::printf("model %s: %d layers, n_embd %d, %d heads (%d KV), vocab %d; ISA %s, %d threads\n",
              path.c_str(), c.n_layer, c.n_embd, c.n_head, c.n_kv_head, c.n_vocab,
              IsaName(*ActiveIsa()), (*model)->pool().num_threads());
  std::string text;
  for (int i = 0; i < 24; ++i) text += "the quick brown fox jumps over the lazy dog and ";
  const std::vector<int32_t> prompt = tok->Encode(text);
  GenerateOptions opt;
  opt.max_tokens = f.n;
  opt.sampling.temperature = 0;
  opt.ignore_eos = true;
  Result<GenerateStats> st = Generate(**model, *tok, prompt, opt, [](const TokenEvent&) { return true; });
  if (!st.ok()) return Fail(st.status().message());
  std::printf("prefill: %zu tokens in %.1f ms = %.1f tok/s\n", st->num_prompt_tokens, st->prefill_ms,
              st->num_prompt_tokens / (st->prefill_ms / 1e3));
  std::printf("decode:  %zu tokens in %.1f ms = %.1f tok/s\n", st->num_generated_tokens, st->decode_ms,
              st->num_generated_tokens / (st->decode_ms / 1e3));
  return 0;
}

}  // namespace

void RegisterDemo(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<DemoFlags>();
  CLI::App* c = app.add_subcommand("demo", "Make the default model (once) and show prefill/decode speed");
  c->add_option("-m,--model", f->model, "Use this model instead of the built-in default");
  c->add_option("--cache-dir", f->cache_dir, "Where the default model is kept (default ~/.cache/promptcache)");
  c->add_option("-n", f->n, "Tokens to generate");
  c->add_option("-t,--threads", f->threads, "Threads (default: physical cores)");
  c->callback([f, exit_code] { *exit_code = Demo(*f); });
}

}  // namespace pc::cli
