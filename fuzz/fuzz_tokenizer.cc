// Tokenization of arbitrary bytes (special tokens parsed or not) and the
// decode of the ids back: never a crash, ids always inside the vocabulary.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const pc::Tokenizer& tok = pc::fuzz::TinyTokenizer();
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  pc::EncodeOptions eo;
  eo.add_special = data[0] & 1;
  eo.parse_special = data[0] & 2;
  const std::vector<int32_t> ids = tok.Encode(text, eo);
  for (int32_t id : ids) {
    if (id < 0 || id >= tok.n_vocab()) __builtin_trap();
  }
  (void)tok.Decode(ids);
  return 0;
}
