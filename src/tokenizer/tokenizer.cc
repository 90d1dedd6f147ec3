#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "tokenizer/bpe.h"
#include "tokenizer/spm.h"

namespace pc {

namespace {
const char kSpmSpace[] = "\xe2\x96\x81";  // U+2581, SentencePiece's visible space

std::string ReplaceAll(const std::string& s, const std::string& from, const std::string& to) {
  std::string out;
  size_t pos = 0;
  for (size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out += to;
  }
  out.append(s, pos, std::string::npos);
  return out;
}
}  // namespace

Result<Tokenizer> Tokenizer::FromGguf(const GgufFile& gguf) {
  PC_ASSIGN_OR_RETURN(Vocab vocab, LoadVocab(gguf));
  return FromVocab(std::move(vocab));
}

Result<Tokenizer> Tokenizer::FromVocab(Vocab vocab) {
  Tokenizer t;
  if (vocab.end_of_generation.empty()) vocab.end_of_generation = EndOfGenerationSet(vocab, -1);
  if (vocab.model == VocabModel::kBpe) {
    PC_ASSIGN_OR_RETURN(t.pre_, PreTokenizer::ForName(vocab.pre));
  }
  for (int32_t id = 0; id < vocab.size(); ++id) {
    const TokenKind k = vocab.kind[id];
    if (k == TokenKind::kControl || k == TokenKind::kUserDefined) t.specials_.Add(vocab.text[id], id);
  }
  t.vocab_ = std::move(vocab);
  for (int32_t id = 0; id < t.vocab_.size(); ++id) {
    // Control tokens render as nothing but match their text when parsed;
    // SPM pieces spell spaces in 3 bytes, so count the larger.
    t.max_token_bytes_ = std::max({t.max_token_bytes_, t.Piece(id).size(), t.vocab_.text[id].size()});
  }
  return t;
}

void Tokenizer::EncodeText(const std::string& text, bool first_fragment, std::vector<int32_t>* out) const {
  if (vocab_.model == VocabModel::kSpm) {
    // SentencePiece marks word starts with U+2581 and prefixes the text with
    // one, so "Hello" and " Hello" at the start tokenize alike.
    std::string escaped = (vocab_.add_space_prefix && first_fragment) ? " " + text : text;
    SpmEncode(vocab_, ReplaceAll(escaped, " ", kSpmSpace), out);
    return;
  }
  for (const std::string& word : pre_->Split(text)) BpeEncodeWord(vocab_, word, out);
}

std::vector<int32_t> Tokenizer::Encode(const std::string& text, const EncodeOptions& opt) const {
  std::vector<int32_t> out;
  if (opt.add_special && vocab_.add_bos) out.push_back(vocab_.bos);
  // Partition into special-token matches and plain text: the earliest match,
  // the longest there. User-defined tokens always match; control tokens only
  // when parse_special is set.
  auto allowed = [&](int32_t id, size_t at, size_t len) {
    if (!opt.parse_special && vocab_.kind[id] != TokenKind::kUserDefined) return false;
    const auto b = std::upper_bound(opt.no_special_across.begin(), opt.no_special_across.end(), at);
    return b == opt.no_special_across.end() || *b >= at + len;
  };
  size_t pos = 0;
  bool first = true;
  while (pos < text.size()) {
    const SpecialTrie::Match m = specials_.Find(text, pos, allowed);
    const size_t end = m.id < 0 ? text.size() : m.pos;
    if (end > pos) EncodeText(text.substr(pos, end - pos), first, &out);
    first = false;
    if (m.id < 0) break;
    out.push_back(m.id);
    pos = m.pos + m.len;
  }
  if (opt.add_special && vocab_.add_eos) out.push_back(vocab_.eos);
  return out;
}

std::vector<std::pair<size_t, size_t>> Tokenizer::FindSpecialTokens(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  auto any = [](int32_t, size_t, size_t) { return true; };
  for (size_t pos = 0; pos < text.size();) {
    const SpecialTrie::Match m = specials_.Find(text, pos, any);
    if (m.id < 0) break;
    out.emplace_back(m.pos, m.len);
    pos = m.pos + m.len;
  }
  return out;
}

std::string Tokenizer::Piece(int32_t id) const {
  if (id < 0 || id >= vocab_.size()) return "";
  const std::string& t = vocab_.text[id];
  switch (vocab_.kind[id]) {
    case TokenKind::kControl:
    case TokenKind::kUnused: return "";
    case TokenKind::kUserDefined: return t;
    case TokenKind::kByte:
      for (int b = 0; b < 256; ++b) {
        if (vocab_.byte_token[b] == id) return std::string(1, static_cast<char>(b));
      }
      return t;
    case TokenKind::kUnknown:
    case TokenKind::kNormal: break;
  }
  if (vocab_.model == VocabModel::kSpm) return ReplaceAll(t, kSpmSpace, " ");
  std::string out;
  for (size_t pos = 0; pos < t.size();) {
    size_t n = 0;
    const uint32_t cp = DecodeUtf8At(t, pos, &n);
    const int b = ByteFromUnicode(cp);
    if (b >= 0) out += static_cast<char>(b);
    else out.append(t, pos, n);
    pos += n;
  }
  return out;
}

std::string Tokenizer::Decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += Piece(id);
  return out;
}

}  // namespace pc
