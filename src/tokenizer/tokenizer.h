// Text <-> token ids for a model's vocabulary (SPM or byte-level BPE).
// Thread-safety: immutable after construction; all methods are const and may
// run concurrently.
#pragma once
#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/special_trie.h"
#include "tokenizer/vocab.h"

namespace pc {

struct EncodeOptions {
  bool add_special = true;    // BOS/EOS as the vocabulary's add_bos/add_eos flags ask
  bool parse_special = false; // recognise control-token text such as "<s>" in the input
  // Sorted byte positions no special-token match may cross (a match [p, p+n)
  // with p < b < p+n is plain text): chat message contents (chat_template.h).
  std::span<const size_t> no_special_across = {};
};

class Tokenizer {
 public:
  static Result<Tokenizer> FromGguf(const GgufFile& gguf);
  static Result<Tokenizer> FromVocab(Vocab vocab);

  std::vector<int32_t> Encode(const std::string& text, const EncodeOptions& opt = {}) const;
  // Every control or user-defined token text in text: (position, length),
  // earliest first, longest at a position, not overlapping.
  std::vector<std::pair<size_t, size_t>> FindSpecialTokens(std::string_view text) const;
  // Raw bytes of one token (control tokens render as nothing).
  std::string Piece(int32_t id) const;
  std::string Decode(std::span<const int32_t> ids) const;

  const Vocab& vocab() const { return vocab_; }
  // The most text bytes one token stands for: a text of more than
  // n * max_token_bytes() bytes cannot encode to n tokens or fewer, which
  // lets callers refuse an oversized prompt before tokenizing it.
  size_t max_token_bytes() const { return max_token_bytes_; }
  int32_t n_vocab() const { return vocab_.size(); }
  // eos, eot, eom and the turn-closing control tokens (Vocab::end_of_generation).
  bool IsEndOfGeneration(int32_t id) const {
    return std::binary_search(vocab_.end_of_generation.begin(), vocab_.end_of_generation.end(), id);
  }

 private:
  void EncodeText(const std::string& text, bool first_fragment, std::vector<int32_t>* out) const;

  Vocab vocab_;
  std::shared_ptr<const PreTokenizer> pre_;
  SpecialTrie specials_;  // control and user-defined token texts
  size_t max_token_bytes_ = 1;
};

}  // namespace pc
