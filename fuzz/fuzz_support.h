// Shared set-up for the libFuzzer targets: a small model file made once per
// process (our own make-model, SentencePiece vocabulary), so the targets
// need nothing from ../shared.
#pragma once
#include <memory>
#include <string>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace pc::fuzz {

// The tokenizer of a tiny random-weight GGUF, made on first use in $TMPDIR
// and deleted once read (a fuzzer's run would otherwise leave one file per
// process behind).
const Tokenizer& TinyTokenizer();

}  // namespace pc::fuzz
