#include "tokenizer/pretokenizer.h"

#include "tokenizer/vocab.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace pc {

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::~PreTokenizer() = default;

namespace {

// Regex sequences of the published pre-tokenizers, as the models'
// tokenizer.json files give them (PCRE2 takes them unchanged: \p{Lu},
// (?i:...) and look-aheads included).
const char* const kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
const char* const kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kSeedCoder =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kBailing =
    R"('(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
const char* const kDeepseek3 =
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kPoro = R"( ?[^(\s|.,!?…。，、।۔،)]+)";
const char* const kCjk = "[一-龥ࠀ-一가-퟿]+";

const std::map<std::string, std::vector<std::string>>& Variants() {
  static const std::map<std::string, std::vector<std::string>> variants = {
      {"default", {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
      {"gpt2", {kGpt2}},
      {"llama3", {kLlama3}},
      {"qwen2", {kQwen2}},
      {"qwen35", {kQwen35}},
      {"tekken", {kTekken}},
      {"gpt-4o", {kGpt4o}},
      {"seed-coder", {kSeedCoder}},
      {"bailingmoe", {kBailing}},
      {"deepseek-v3", {R"(\p{N}{1,3})", "[一-龥぀-ゟ゠-ヿ]+", kDeepseek3}},
      {"deepseek-llm",
       {"[\r\n]",
        "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\\x{1F7D}ᾀ-ᾴᾶ-"
        "ᾼιῂ-ῄῆ-ῌῐ-\\x{1FD3}ῖ-\\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\\x{2126}ℨ\\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-"
        "𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
        "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", kCjk, "\\p{N}+"}},
      {"deepseek-coder", {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", kCjk, "\\p{N}"}},
      {"falcon", {R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2, "[0-9][0-9][0-9]"}},
      {"starcoder", {R"(\p{N})", kGpt2}},
      {"poro-chat", {kPoro}},
      {"viking", {kPoro, R"(\p{N})"}},
      {"superbpe", {R"(\p{N}+)", R"((?=(\d{3})+(?!\d)))"}},
  };
  return variants;
}

// The names GGUF converters write for the same variants (the list the GGUF
// ecosystem's converter and loader share).
const std::map<std::string, std::string>& Aliases() {
  static const std::map<std::string, std::string> aliases = {
      // llama3's regex
      {"llama-v3", "llama3"}, {"llama-bpe", "llama3"}, {"falcon3", "llama3"}, {"falcon-h1", "llama3"},
      {"pixtral", "llama3"}, {"midm-2.0", "llama3"}, {"lfm2", "llama3"}, {"dbrx", "llama3"},
      {"smaug-bpe", "llama3"}, {"chatglm-bpe", "llama3"}, {"glm4", "llama3"},
      // GPT-2's regex
      {"gpt-2", "gpt2"}, {"phi-2", "gpt2"}, {"mpt", "gpt2"}, {"olmo", "gpt2"}, {"jais", "gpt2"},
      {"trillion", "gpt2"}, {"exaone4", "gpt2"}, {"jina-v1-en", "gpt2"}, {"jina-v2-code", "gpt2"},
      {"jina-es", "gpt2"}, {"jina-de", "gpt2"}, {"jina-v2-es", "gpt2"}, {"jina-v2-de", "gpt2"},
      {"roberta-bpe", "gpt2"}, {"gigachat", "gpt2"}, {"a.x-4.0", "gpt2"}, {"mellum", "gpt2"},
      {"granite-docling", "gpt2"},
      // single digits, then GPT-2's regex
      {"refact", "starcoder"}, {"command-r", "starcoder"}, {"smollm", "starcoder"},
      {"codeshell", "starcoder"}, {"exaone", "starcoder"}, {"minerva-7b", "starcoder"}, {"mellum2", "starcoder"},
      // Qwen2's regex
      {"deepseek-r1-qwen", "qwen2"}, {"megrez", "qwen2"}, {"stablelm2", "qwen2"}, {"hunyuan", "qwen2"},
      {"solar-open", "qwen2"}, {"grok-2", "qwen2"}, {"kormo", "qwen2"},
      // the others
      {"llama4", "gpt-4o"}, {"minimax-m2", "gpt-4o"}, {"kanana2", "gpt-4o"},
      {"hunyuan-dense", "deepseek-v3"}, {"joyai-llm", "deepseek-v3"},
      {"bailingmoe2", "bailingmoe"}, {"llada-moe", "bailingmoe"},
      {"bloom", "poro-chat"}, {"gpt3-finnish", "poro-chat"},
  };
  return aliases;
}

}  // namespace

PreTokenizerConventions ConventionsFor(const std::string& name) {
  static const std::set<std::string> whole_tokens = {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1",
                                                     "pixtral", "midm-2.0", "lfm2", "tekken"};
  const bool w = whole_tokens.count(name) != 0;
  return {.ignore_merges = w, .add_bos_by_default = w};
}

std::vector<std::string> KnownPreTokenizers() {
  std::vector<std::string> names;
  for (const auto& [name, regexes] : Variants()) names.push_back(name);
  for (const auto& [alias, target] : Aliases()) names.push_back(alias);
  return names;
}

Result<std::shared_ptr<const PreTokenizer>> PreTokenizer::ForName(const std::string& name) {
  std::string key = name;
  if (auto a = Aliases().find(name); a != Aliases().end()) key = a->second;
  auto it = Variants().find(key);
  if (it == Variants().end()) return Errorf("unknown BPE pre-tokenizer '{}'", name);
  auto pt = std::make_shared<PreTokenizer>();
  for (const std::string& pattern : it->second) {
    int err = 0;
    PCRE2_SIZE err_off = 0;
    auto c = std::make_unique<Compiled>();
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(),
                            PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
    if (c->code == nullptr) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(err, buf, sizeof(buf));
      return Errorf("pre-tokenizer '{}': regex error at {}: {}", name, err_off, reinterpret_cast<char*>(buf));
    }
    pt->regexes_.push_back(std::move(c));
  }
  return std::shared_ptr<const PreTokenizer>(std::move(pt));
}

std::vector<std::string> PreTokenizer::Split(const std::string& text) const {
  std::vector<std::string> pieces = {text};
  if (text.empty()) return {};
  pcre2_match_data* md = nullptr;
  for (const auto& re : regexes_) {
    md = pcre2_match_data_create_from_pattern(re->code, nullptr);
    std::vector<std::string> next;
    for (const std::string& piece : pieces) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      size_t last = 0, start = 0;
      // The first match validates the UTF-8 of the piece; invalid text stays
      // one piece. Later matches skip the check (offsets are on boundaries).
      uint32_t options = 0;
      while (start < piece.size()) {
        const int rc = pcre2_match(re->code, subject, piece.size(), start, options, md, nullptr);
        if (rc < 0) break;
        options = PCRE2_NO_UTF_CHECK;
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        if (ov[1] == ov[0]) {  // empty match: step one character forward
          start = ov[0] + std::max<size_t>(1, Utf8Len(static_cast<uint8_t>(piece[ov[0]])));
          continue;
        }
        if (ov[0] > last) next.push_back(piece.substr(last, ov[0] - last));
        next.push_back(piece.substr(ov[0], ov[1] - ov[0]));
        last = start = ov[1];
      }
      if (last < piece.size()) next.push_back(piece.substr(last));
    }
    pcre2_match_data_free(md);
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace pc
