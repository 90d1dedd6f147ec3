// promptcache make-model: write a random-weight model (llama, or the bench-moe
// and bench-gemma3 shapes' qwen3moe and gemma3).
#include <cstdio>
#include <fstream>
#include <iterator>

#include "base/clock.h"
#include "commands.h"
#include "model/make_model.h"

namespace pc::cli {
namespace {

struct MakeFlags {
  std::string shape, type = "q8_0", vocab, out, chat_template_file;
  std::vector<std::string> control_tokens;
  int n_embd = 0, n_layer = 0, n_head = 0, n_kv_head = 0, n_ff = 0, vocab_size = 32000, n_ctx = 8192;
  bool untied = false, copy = false;
  uint64_t seed = 1;
};

int Make(const MakeFlags& f) {
  MakeModelOptions opt;
  if (!f.shape.empty()) {
    Result<ModelShape> s = BuiltinShape(f.shape);
    if (!s.ok()) return Fail(s.status().message());
    opt.shape = *s;
  } else {
    if (f.n_embd <= 0 || f.n_layer <= 0 || f.n_head <= 0 || f.n_ff <= 0) {
      return Fail("give --shape NAME, or --n-embd, --n-layer, --n-head and --n-ff");
    }
    opt.shape = {"custom", f.n_embd, f.n_layer, f.n_head, f.n_kv_head > 0 ? f.n_kv_head : f.n_head,
                 f.n_ff, !f.untied, f.n_ctx};
  }
  Result<ModelFileType> type = ParseModelFileType(f.type);
  if (!type.ok()) return Fail(type.status().message());
  opt.type = type->type;
  opt.k_mix = type->k_mix;
  opt.vocab_path = f.vocab;
  opt.vocab_size = f.vocab_size;
  opt.seed = f.seed;
  opt.copy = f.copy;
  opt.control_tokens = f.control_tokens;
  if (!f.chat_template_file.empty()) {
    std::ifstream in(f.chat_template_file, std::ios::binary);
    if (!in) return Fail("cannot read the chat template file '" + f.chat_template_file + "'");
    opt.chat_template.assign(std::istreambuf_iterator<char>(in), {});
  }
  const int64_t t0 = NowNs();
  Status s = MakeModel(opt, f.out);
  if (!s.ok()) return Fail(s.message());
  std::fprintf(stderr, "wrote %s (%s, %s) in %.1f s\n", f.out.c_str(), opt.shape.name.c_str(), type->name.c_str(),
               NsToMs(NowNs() - t0) / 1e3);
  return 0;
}

}  // namespace

void RegisterMakeModel(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<MakeFlags>();
  CLI::App* c = app.add_subcommand("make-model", "Write a random-weight model (GGUF): llama, or the qwen3moe and gemma3 bench shapes");
  c->add_option("--shape", f->shape, "Built-in shape: " + fmt::format("{}", fmt::join(BuiltinShapeNames(), ", ")));
  c->add_option("--n-embd", f->n_embd, "Embedding width");
  c->add_option("--n-layer", f->n_layer, "Layers");
  c->add_option("--n-head", f->n_head, "Attention heads");
  c->add_option("--n-kv-head", f->n_kv_head, "KV heads (default: --n-head)");
  c->add_option("--n-ff", f->n_ff, "Feed-forward width");
  c->add_option("--n-ctx", f->n_ctx, "Context length");
  c->add_flag("--untied", f->untied, "Separate output matrix");
  c->add_flag("--copy", f->copy,
              "Layers 0-1 written to copy: each next token is what followed the current token's earlier occurrence "
              "(an induction head, as real models quote their prompt); for copy-heavy benchmarks");
  c->add_option("--type", f->type,
                "Weight type: " + fmt::format("{}", fmt::join(ModelFileTypeNames(), ", ")) +
                    " (_m: K-quant mixes; matrices whose rows do not fit 256-element blocks take the reference "
                    "tools' fallback type)");
  c->add_option("--vocab", f->vocab, "Copy the tokenizer from this GGUF (default: built-in word vocabulary)");
  c->add_option("--vocab-size", f->vocab_size, "Built-in vocabulary size")->check(CLI::Range(512, 1 << 20));
  c->add_option("--seed", f->seed, "Random seed");
  c->add_option("--control-tokens", f->control_tokens,
                "Control tokens for the built-in vocabulary (a chat format's markers), comma-separated")
      ->delimiter(',');
  c->add_option("--chat-template-file", f->chat_template_file, "Store this Jinja chat template in the file");
  c->add_option("-o,--output", f->out, "Output GGUF path")->required();
  c->callback([f, exit_code] { *exit_code = Make(*f); });
}

}  // namespace pc::cli
