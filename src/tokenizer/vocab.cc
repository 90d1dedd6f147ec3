#include "tokenizer/vocab.h"

#include <set>

#include "tokenizer/pretokenizer.h"

namespace pc {

int32_t Vocab::MergeRank(const std::string& left, const std::string& right) const {
  auto it = merge_rank.find(left + '\n' + right);
  return it == merge_rank.end() ? -1 : it->second;
}

size_t Utf8Len(uint8_t lead) {
  if (lead < 0x80) return 1;
  if ((lead & 0xe0) == 0xc0) return 2;
  if ((lead & 0xf0) == 0xe0) return 3;
  if ((lead & 0xf8) == 0xf0) return 4;
  return 1;
}

std::string CodepointToUtf8(uint32_t cp) {
  std::string out;
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return out;
}

uint32_t DecodeUtf8At(const std::string& s, size_t pos, size_t* len) {
  const auto lead = static_cast<uint8_t>(s[pos]);
  size_t n = Utf8Len(lead);
  if (pos + n > s.size()) n = 1;
  *len = n;
  if (n == 1) return lead;
  uint32_t cp = lead & (0x7f >> n);
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<uint8_t>(s[pos + i]) & 0x3f);
  return cp;
}

namespace {
// Bytes that GPT-2 keeps as themselves; the rest map to 256, 257, ... in order.
bool IsPrintableByte(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); }

std::array<uint32_t, 256> ByteCodepoints() {
  std::array<uint32_t, 256> cps{};
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) cps[b] = IsPrintableByte(b) ? static_cast<uint32_t>(b) : next++;
  return cps;
}
}  // namespace

const std::array<std::string, 256>& ByteToUnicode() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    const auto cps = ByteCodepoints();
    for (int b = 0; b < 256; ++b) t[b] = CodepointToUtf8(cps[b]);
    return t;
  }();
  return table;
}

int ByteFromUnicode(uint32_t codepoint) {
  static const std::unordered_map<uint32_t, int> inverse = [] {
    std::unordered_map<uint32_t, int> m;
    const auto cps = ByteCodepoints();
    for (int b = 0; b < 256; ++b) m[cps[b]] = b;
    return m;
  }();
  auto it = inverse.find(codepoint);
  return it == inverse.end() ? -1 : it->second;
}

namespace {
int32_t OptionalId(const GgufFile& g, const std::string& key, int32_t n_vocab) {
  Result<int64_t> v = g.GetInt(key);
  if (!v.ok() || *v < 0 || *v >= n_vocab) return -1;
  return static_cast<int32_t>(*v);
}
bool OptionalBool(const GgufFile& g, const std::string& key, bool fallback) {
  Result<bool> v = g.GetBool(key);
  return v.ok() ? *v : fallback;
}

// eos, eot and eom, and every token whose text closes a turn or a message
// in the common chat formats: converters do not always record these as
// eot/eom (a Qwen file names only <|endoftext|> as eos, yet its chats end
// with <|im_end|>). In a vocabulary with <|return|> and <|call|> (the
// harmony format) <|end|> ends a message inside a turn, not the turn.
}  // namespace

std::vector<int32_t> EndOfGenerationSet(const Vocab& v, int32_t eom) {
  static const char* const kTurnEnds[] = {
      "<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>",
      "<|endoftext|>", "<|end_of_text|>", "<EOT>", "<end_of_utterance>", "<｜end▁of▁sentence｜>",
  };
  std::set<int32_t> ids;
  for (int32_t id : {v.eos, v.eot, eom}) {
    if (id >= 0) ids.insert(id);
  }
  for (const char* t : kTurnEnds) {
    if (auto it = v.id_of.find(t); it != v.id_of.end()) ids.insert(it->second);
  }
  const auto has = [&](const char* t) { return v.id_of.count(t) != 0; };
  if (has("<|return|>") && has("<|call|>") && has("<|end|>")) {
    const int32_t end = v.id_of.at("<|end|>");
    if (end != v.eos && end != v.eot && end != eom) ids.erase(end);
  }
  return {ids.begin(), ids.end()};
}

Result<Vocab> LoadVocab(const GgufFile& g) {
  Vocab v;
  PC_ASSIGN_OR_RETURN(std::string model, g.GetString("tokenizer.ggml.model"));
  if (model == "llama") {
    v.model = VocabModel::kSpm;
  } else if (model == "gpt2") {
    v.model = VocabModel::kBpe;
  } else {
    return Errorf("unsupported tokenizer model '{}' (supported: llama, gpt2)", model);
  }
  PC_ASSIGN_OR_RETURN(v.text, g.GetStringArray("tokenizer.ggml.tokens"));
  const auto n = static_cast<int32_t>(v.text.size());
  if (n == 0) return Status::Error("tokenizer.ggml.tokens is empty");
  v.score.assign(n, 0.0f);
  if (g.Find("tokenizer.ggml.scores") != nullptr) {
    PC_ASSIGN_OR_RETURN(std::vector<double> scores, g.GetFloatArray("tokenizer.ggml.scores"));
    if (static_cast<int32_t>(scores.size()) != n) return Status::Error("tokenizer.ggml.scores length differs from tokens");
    for (int32_t i = 0; i < n; ++i) v.score[i] = static_cast<float>(scores[i]);
  }
  v.kind.assign(n, TokenKind::kNormal);
  if (g.Find("tokenizer.ggml.token_type") != nullptr) {
    PC_ASSIGN_OR_RETURN(std::vector<int64_t> types, g.GetIntArray("tokenizer.ggml.token_type"));
    if (static_cast<int32_t>(types.size()) != n) return Status::Error("tokenizer.ggml.token_type length differs from tokens");
    for (int32_t i = 0; i < n; ++i) {
      if (types[i] < 1 || types[i] > 6) return Errorf("token {} has invalid type {}", i, types[i]);
      v.kind[i] = static_cast<TokenKind>(types[i]);
    }
  }
  for (int32_t i = 0; i < n; ++i) v.id_of.emplace(v.text[i], i);
  if (v.model == VocabModel::kBpe) {
    v.pre = g.GetString("tokenizer.ggml.pre").ok() ? *g.GetString("tokenizer.ggml.pre") : "default";
    PC_ASSIGN_OR_RETURN(std::vector<std::string> merges, g.GetStringArray("tokenizer.ggml.merges"));
    for (size_t r = 0; r < merges.size(); ++r) {
      const size_t sp = merges[r].find(' ', 1);
      if (sp == std::string::npos) return Errorf("BPE merge {} ('{}') has no separator", r, merges[r]);
      v.merge_rank.emplace(merges[r].substr(0, sp) + '\n' + merges[r].substr(sp + 1), static_cast<int32_t>(r));
    }
  }
  for (int b = 0; b < 256; ++b) {
    const std::string key = v.model == VocabModel::kSpm ? fmt::format("<0x{:02X}>", b) : ByteToUnicode()[b];
    auto it = v.id_of.find(key);
    v.byte_token[b] = it == v.id_of.end() ? -1 : it->second;
  }
  const bool spm = v.model == VocabModel::kSpm;
  v.bos = OptionalId(g, "tokenizer.ggml.bos_token_id", n);
  v.eos = OptionalId(g, "tokenizer.ggml.eos_token_id", n);
  v.eot = OptionalId(g, "tokenizer.ggml.eot_token_id", n);
  v.unk = OptionalId(g, "tokenizer.ggml.unknown_token_id", n);
  v.pad = OptionalId(g, "tokenizer.ggml.padding_token_id", n);
  const PreTokenizerConventions conv = ConventionsFor(v.pre);
  v.ignore_merges = v.model == VocabModel::kBpe && conv.ignore_merges;
  v.add_bos = OptionalBool(g, "tokenizer.ggml.add_bos_token", spm || (v.model == VocabModel::kBpe && conv.add_bos_by_default)) &&
              v.bos >= 0;
  v.add_eos = OptionalBool(g, "tokenizer.ggml.add_eos_token", false) && v.eos >= 0;
  v.add_space_prefix = OptionalBool(g, "tokenizer.ggml.add_space_prefix", spm);
  v.end_of_generation = EndOfGenerationSet(v, OptionalId(g, "tokenizer.ggml.eom_token_id", n));
  return v;
}

}  // namespace pc
