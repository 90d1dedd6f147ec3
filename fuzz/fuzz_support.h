// Shared set-up for the libFuzzer targets: a small model file made once per
// process (our own make-model, SentencePiece vocabulary), so the targets
// need nothing from ../shared.
#pragma once
#include <memory>
#include <string>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace pc::fuzz {

// Path of a tiny random-weight GGUF (made on first use in $TMPDIR).
const std::string& TinyModelPath();
// Its tokenizer.
const Tokenizer& TinyTokenizer();

}  // namespace pc::fuzz
