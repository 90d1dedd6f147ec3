#include "engine/grammar_masker.h"

#include <cmath>

namespace pc {
namespace {

std::vector<std::string> Pieces(const Tokenizer& tok) {
  std::vector<std::string> out(size_t(tok.n_vocab()));
  for (int32_t id = 0; id < tok.n_vocab(); ++id) out[size_t(id)] = tok.Piece(id);
  return out;
}

// Control tokens other than the end of generation, with their texts.
std::vector<std::pair<int32_t, std::string>> ControlTexts(const Tokenizer& tok) {
  std::vector<std::pair<int32_t, std::string>> out;
  const auto& v = tok.vocab();
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    if (v.kind[size_t(id)] != TokenKind::kControl || tok.IsEndOfGeneration(id)) continue;
    if (!v.text[size_t(id)].empty()) out.emplace_back(id, v.text[size_t(id)]);
  }
  return out;
}

}  // namespace

GrammarMasker::GrammarMasker(const Tokenizer& tok)
    : tok_(tok), index_(Pieces(tok)), masks_(&index_, ControlTexts(tok)) {}

bool GrammarMasker::Mask(const structured::SeqMatcher& state, std::span<const float> logits, std::vector<float>* out) {
  masks_.Compute(state, &mask_);
  out->assign(logits.size(), -INFINITY);
  bool any = false;
  const size_t n = std::min(logits.size(), size_t(index_.n_tokens()));
  for (size_t w = 0; w < mask_.size(); ++w) {
    uint64_t bits = mask_[w];
    while (bits) {
      const size_t id = w * 64 + size_t(__builtin_ctzll(bits));
      bits &= bits - 1;
      if (id < n) {
        (*out)[id] = logits[id];
        any = true;
      }
    }
  }
  if (state.CanEnd()) {
    for (int32_t id : tok_.vocab().end_of_generation) {
      if (size_t(id) < logits.size()) {
        (*out)[size_t(id)] = logits[size_t(id)];
        any = true;
      }
    }
  }
  return any;
}

bool GrammarMasker::Advance(structured::SeqMatcher* state, int32_t token) const {
  const std::string_view bytes = Bytes(token);
  if (bytes.empty()) return false;
  state->Consume(bytes);
  return state->Complete();
}

}  // namespace pc
