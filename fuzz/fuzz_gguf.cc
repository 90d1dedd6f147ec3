// The GGUF reader and everything a load derives from the file before
// inference: hyperparameters, weight binding (every tensor accounted for)
// and the tokenizer. Any bytes must load or fail with a message.
#include <cstddef>
#include <cstdint>
#include <span>

#include "gguf/gguf.h"
#include "model/config.h"
#include "model/weights.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto g = pc::GgufFile::Parse(std::span<const uint8_t>(data, size));
  if (!g.ok()) {
    if (g.status().message().empty()) __builtin_trap();
    return 0;
  }
  (void)pc::Tokenizer::FromGguf(*g);
  auto c = pc::ReadModelConfig(*g);
  if (c.ok()) (void)pc::BindWeights(*g, *c);
  return 0;
}
