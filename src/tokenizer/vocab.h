// Vocabulary read from a GGUF file's tokenizer.* metadata.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "gguf/gguf.h"

namespace pc {

// Token kinds as numbered by tokenizer.ggml.token_type.
enum class TokenKind : int32_t {
  kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

enum class VocabModel { kSpm, kBpe };

struct Vocab {
  VocabModel model = VocabModel::kSpm;
  std::string pre;  // BPE pre-tokenizer name (tokenizer.ggml.pre)
  std::vector<std::string> text;
  std::vector<float> score;
  std::vector<TokenKind> kind;
  std::unordered_map<std::string, int32_t> id_of;
  // BPE merge ranks keyed by left + '\n' + right (neither side holds '\n').
  std::unordered_map<std::string, int32_t> merge_rank;
  // Token id for each byte: "<0xXX>" (SPM) or the byte-level char (BPE); -1 if none.
  std::array<int32_t, 256> byte_token{};
  int32_t bos = -1, eos = -1, eot = -1, unk = -1, pad = -1;
  bool add_bos = false, add_eos = false, add_space_prefix = true;
  bool ignore_merges = false;  // BPE: a pre-token that is a vocabulary entry is one token
  // Tokens that end generation: eos, eot, eom and the control tokens that
  // close a turn in the common chat formats (sorted, unique).
  std::vector<int32_t> end_of_generation;

  int32_t size() const { return static_cast<int32_t>(text.size()); }
  bool IsControl(int32_t id) const { return kind[id] == TokenKind::kControl; }
  int32_t MergeRank(const std::string& left, const std::string& right) const;
};

Result<Vocab> LoadVocab(const GgufFile& gguf);

// v's eos, eot, eom (-1: none) and its turn-closing tokens, sorted.
std::vector<int32_t> EndOfGenerationSet(const Vocab& v, int32_t eom);

// GPT-2 byte-level mapping between raw bytes and printable code points.
const std::array<std::string, 256>& ByteToUnicode();     // UTF-8 of the char for each byte
int ByteFromUnicode(uint32_t codepoint);                 // -1 if not a mapped char

// UTF-8 helpers (lenient: an invalid lead byte counts as one byte).
size_t Utf8Len(uint8_t lead);
std::string CodepointToUtf8(uint32_t cp);
uint32_t DecodeUtf8At(const std::string& s, size_t pos, size_t* len);

}  // namespace pc
