// Regex pre-tokenizers for byte-level BPE, selected by tokenizer.ggml.pre.
// Each variant is a sequence of Unicode regexes (PCRE2, UTF + UCP); every
// regex splits each current piece into its matches and the text between them.
// Thread-safety: a built PreTokenizer is immutable; Split may run concurrently.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace pc {

class PreTokenizer {
 public:
  // Error for an unknown variant name (never a silent fallback).
  static Result<std::shared_ptr<const PreTokenizer>> ForName(const std::string& name);
  std::vector<std::string> Split(const std::string& text) const;
  ~PreTokenizer();

  struct Compiled;

 private:
  std::vector<std::unique_ptr<Compiled>> regexes_;
};

// The variant names ForName accepts.
std::vector<std::string> KnownPreTokenizers();

// Conventions that go with a pre-tokenizer name in GGUF files: the llama3
// family and tekken take a whole pre-token that is itself a vocabulary entry
// without merging ("ignore_merges" in their tokenizer.json) and add BOS when
// tokenizer.ggml.add_bos_token is absent.
struct PreTokenizerConventions {
  bool ignore_merges = false;
  bool add_bos_by_default = false;
};
PreTokenizerConventions ConventionsFor(const std::string& name);

}  // namespace pc
