// SentencePiece-style BPE over a scored vocabulary (tokenizer.ggml.model =
// llama): repeatedly merge the adjacent pair whose merged text is the
// highest-scoring token; characters left unknown fall back to byte tokens.
#pragma once
#include <string>
#include <vector>

#include "tokenizer/vocab.h"

namespace pc {

// Appends the ids for `text` (already space-escaped with U+2581) to out.
void SpmEncode(const Vocab& vocab, const std::string& text, std::vector<int32_t>* out);

}  // namespace pc
