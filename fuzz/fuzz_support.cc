#include "fuzz_support.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "model/make_model.h"

namespace pc::fuzz {

namespace {

std::string MakeTinyModel() {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = tmp != nullptr ? tmp : "/tmp";
  const std::string words = dir + "/pc-fuzz-words-" + std::to_string(getpid());
  std::ofstream(words) << "the\nquick\nbrown\nfox\n<s>\nhello\nworld\n";
  MakeModelOptions opt;
  opt.shape = ModelShape{"fuzz", 32, 1, 2, 1, 32, true, 256};
  opt.vocab_size = 512;
  opt.words_path = words;
  opt.type = TensorType::kQ8_0;
  const std::string p = dir + "/pc-fuzz-model-" + std::to_string(getpid()) + ".gguf";
  if (!MakeModel(opt, p).ok()) std::abort();
  std::remove(words.c_str());
  return p;
}

}  // namespace

const Tokenizer& TinyTokenizer() {
  static const Tokenizer* tok = [] {
    const std::string path = MakeTinyModel();
    auto g = GgufFile::Open(path);
    std::remove(path.c_str());  // the open file stays readable
    if (!g.ok()) std::abort();
    auto t = Tokenizer::FromGguf(*g);
    if (!t.ok()) std::abort();
    return new Tokenizer(std::move(*t));
  }();
  return *tok;
}

}  // namespace pc::fuzz
