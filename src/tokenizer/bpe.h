// Byte-level BPE (tokenizer.ggml.model = gpt2): each pre-tokenized word is
// mapped byte-by-byte to printable code points, then adjacent symbols are
// merged by lowest merge rank until no ranked pair remains.
#pragma once
#include <string>
#include <vector>

#include "tokenizer/vocab.h"

namespace pc {

// Appends the ids of one pre-tokenized word (raw bytes) to out.
void BpeEncodeWord(const Vocab& vocab, const std::string& word, std::vector<int32_t>* out);

}  // namespace pc
