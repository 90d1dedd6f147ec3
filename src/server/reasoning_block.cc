#include "server/reasoning_block.h"

#include <cctype>

namespace pc {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kSpace = " \t\r\n";
constexpr size_t kMaxMarker = 48;  // bytes: longer "tags" are prose, not markers

bool OnlySpace(std::string_view s) { return s.find_first_not_of(kSpace) == std::string_view::npos; }

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && kSpace.find(s.back()) != std::string_view::npos) s.remove_suffix(1);
  return s;
}

std::string_view TrimLeft(std::string_view s) {
  while (!s.empty() && kSpace.find(s.front()) != std::string_view::npos) s.remove_prefix(1);
  return s;
}

// The marker s ends with: from its last '<' or '[' (a tag, or a tag and a
// word as in "<|channel>thought"); "" when there is none close by.
std::string_view MarkerAtEnd(std::string_view s) {
  s = TrimRight(s);
  const size_t at = s.find_last_of("<[");
  if (at == std::string_view::npos || s.size() - at > kMaxMarker) return {};
  const std::string_view m = s.substr(at);
  return m.find_first_of(kSpace) == std::string_view::npos ? m : std::string_view{};
}

// The marker s starts with: a tag up to its '>' or ']'.
std::string_view MarkerAtStart(std::string_view s) {
  s = TrimLeft(s);
  if (s.empty() || (s[0] != '<' && s[0] != '[')) return {};
  const size_t end = s.find(s[0] == '<' ? '>' : ']');
  if (end == std::string_view::npos || end + 1 > kMaxMarker) return {};
  const std::string_view m = s.substr(0, end + 1);
  return m.find_first_of(kSpace) == std::string_view::npos ? m : std::string_view{};
}

bool Repeats(std::string_view text, std::string_view m) {
  const size_t first = text.find(m);
  return first != std::string_view::npos && text.find(m, first + 1) != std::string_view::npos;
}

// The marker that ends at `end` in text: a tag (from its '<' or '['),
// grown back over the tags and words written right before it while it
// repeats elsewhere in text (Kimi K3's `<|sep|>` ends every header; its
// block opens with `<|open|>think<|sep|>`).
std::string_view UniqueMarkerBefore(std::string_view text, size_t end) {
  std::string_view m = MarkerAtEnd(text.substr(0, end));
  while (!m.empty() && Repeats(text, m)) {
    const std::string_view head = text.substr(0, end - m.size());
    if (head.empty() || kSpace.find(head.back()) != std::string_view::npos) break;
    const std::string_view longer = MarkerAtEnd(head);
    if (longer.empty() || m.size() + longer.size() > kMaxMarker) break;
    m = text.substr(end - m.size() - longer.size(), m.size() + longer.size());
  }
  return m;
}

// The marker that starts at `begin`: a tag, grown forward over the words and
// tags right after it while it repeats elsewhere.
std::string_view UniqueMarkerAfter(std::string_view text, size_t begin) {
  std::string_view m = MarkerAtStart(text.substr(begin));
  while (!m.empty() && Repeats(text, m)) {
    const std::string_view rest = text.substr(begin + m.size());
    const size_t next = rest.find_first_of("<[");
    if (next == std::string_view::npos || rest.substr(0, next).find_first_of(kSpace) != std::string_view::npos) break;
    const std::string_view tag = MarkerAtStart(rest.substr(next));
    if (tag.empty() || m.size() + next + tag.size() > kMaxMarker) break;
    m = text.substr(begin, m.size() + next + tag.size());
  }
  return m;
}

// `<x>` -> `</x>`, `[X]` -> `[/X]`; "" for anything else.
std::string ClosingTwin(std::string_view tag) {
  if (tag.size() < 3 || tag[1] == '/' || (tag.front() == '<') != (tag.back() == '>') ||
      (tag.front() == '[') != (tag.back() == ']') || (tag.front() != '<' && tag.front() != '[')) {
    return "";
  }
  return std::string(tag.substr(0, 1)) + "/" + std::string(tag.substr(1));
}

bool NamedForReasoning(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* w : {"think", "thought", "reason"}) {
    if (lower.find(w) != std::string::npos) return true;
  }
  return false;
}

ReasoningStyle WithBlock(std::string open, std::string close, std::string block = "") {
  ReasoningStyle s;
  s.open = std::move(open);
  s.close = std::move(close);
  s.empty_block = block.empty() ? s.open + s.close : std::move(block);
  s.split_close = s.close;
  return s;
}

// What a plain assistant turn (content only) writes between the end of the
// generation prompt and its content: functionary's `all\n`, gpt-oss's
// `<|channel|>final<|message|>`, Command R7B's `<|START_RESPONSE|>`; "" when
// the turn does not start with the generation prompt.
std::string ReplyHeader(const TemplateRender& render, const std::string& gen) {
  constexpr std::string_view kContent = "PCCONTENTPROBE";
  const ojson conv = {{{"role", "user"}, {"content", "U"}}, {{"role", "assistant"}, {"content", kContent}}};
  Result<std::string> r = render(conv, false, ojson::object());
  if (gen.empty() || !r.ok() || !r->starts_with(gen)) return "";
  const size_t content = r->find(kContent, gen.size());
  if (content == std::string::npos) return "";
  return std::string(TrimLeft(std::string_view(*r).substr(gen.size(), content - gen.size())));
}

// Rule A. conv: one user turn and an assistant turn whose reasoning is the
// probe; gen: the generation prompt after that user turn.
bool FromRenderedField(const TemplateRender& render, const std::string& gen, ReasoningStyle* out) {
  constexpr std::string_view kContent = "PCCONTENTPROBE";
  for (const bool thinking_only : {false, true}) {
    ojson a = {{"role", "assistant"}, {"content", kContent}};
    a[thinking_only ? "thinking" : "reasoning_content"] = kReasoningProbe;
    const ojson conv = {{{"role", "user"}, {"content", "U"}}, a};
    Result<std::string> r = render(conv, false, ojson::object());
    if (!r.ok()) continue;
    const std::string_view text = *r;
    const size_t probe = text.find(kReasoningProbe);
    const size_t content = text.rfind(kContent);
    if (probe == std::string_view::npos || content == std::string_view::npos || content < probe) continue;
    const std::string_view before = text.substr(0, probe);
    const std::string_view after = text.substr(probe + kReasoningProbe.size(), content - probe - kReasoningProbe.size());
    ReasoningStyle s;
    s.open = std::string(UniqueMarkerBefore(text, TrimRight(before).size()));
    s.close = std::string(UniqueMarkerAfter(text, content - TrimLeft(after).size()));
    if (s.open.empty() || s.close.empty()) continue;
    s.rendered = true;
    s.via_thinking_field = thinking_only;
    s.empty_block = s.open + s.close;
    const std::string_view block_end = TrimLeft(after);  // the close, then what leads to the content
    s.split_close = std::string(MarkerAtStart(block_end));
    s.trail = std::string(TrimRight(TrimLeft(block_end.substr(s.split_close.size()))));
    // Whitespace the turn puts between its header (where the generation
    // prompt ends) and the block.
    size_t k = 0;
    while (k < gen.size() && k < text.size() && gen[k] == text[k]) ++k;
    const size_t open_at = TrimRight(before).size() - s.open.size();
    s.drop_space_before = k == gen.size() && k < open_at && OnlySpace(text.substr(k, open_at - k));
    *out = std::move(s);
    return true;
  }
  return false;
}

// Rule C: the first closing tag in the source named for reasoning whose
// opening twin the source also spells.
bool FromSourceTags(std::string_view src, ReasoningStyle* out) {
  for (size_t at = 0; (at = src.find('/', at)) != std::string_view::npos; ++at) {
    if (at == 0 || (src[at - 1] != '<' && src[at - 1] != '[')) continue;
    const std::string_view tag = MarkerAtStart(src.substr(at - 1));
    if (tag.empty() || !NamedForReasoning(tag)) continue;
    const std::string open = std::string(tag.substr(0, 1)) + std::string(tag.substr(2));
    if (src.find(open) == std::string_view::npos) continue;
    *out = WithBlock(open, std::string(tag));
    return true;
  }
  return false;
}

// Rule D: what the thinking-off generation prompt adds after the header the
// default one ends with, when that is an empty block (two markers).
bool FromThinkingOff(const TemplateRender& render, const ojson& conv, const std::string& gen, ReasoningStyle* out) {
  Result<std::string> off = render(conv, true, ojson{{"enable_thinking", false}});
  if (!off.ok() || gen.empty()) return false;
  const std::string header(TrimRight(gen).substr(TrimRight(gen).size() - std::min<size_t>(TrimRight(gen).size(), 16)));
  const size_t at = off->rfind(header);
  if (at == std::string::npos) return false;
  const std::string_view added = TrimRight(TrimLeft(std::string_view(*off).substr(at + header.size())));
  const std::string_view close = MarkerAtEnd(added);
  if (added.empty() || close.empty() || close.size() >= added.size()) return false;
  const std::string_view open = TrimRight(added.substr(0, added.size() - close.size()));
  if (open.empty() || open.size() > kMaxMarker || open.find_first_of(kSpace) != std::string_view::npos ||
      (open.front() != '<' && open.front() != '[')) {
    return false;
  }
  *out = WithBlock(std::string(open), std::string(close), std::string(added));
  return true;
}

}  // namespace

ReasoningStyle DeriveReasoningStyle(std::string_view source, const TemplateRender& render) {
  const ojson user = {{{"role", "user"}, {"content", "U"}}};
  Result<std::string> gen = render(user, true, ojson::object());
  const std::string g = gen.ok() ? *gen : "";
  ReasoningStyle s;
  const std::string_view last = MarkerAtEnd(g);
  const std::string twin = ClosingTwin(last);
  if (FromRenderedField(render, g, &s)) {
  } else if (!twin.empty() && MarkerAtStart(last) == last &&
             (source.find(twin) != std::string_view::npos || NamedForReasoning(last))) {
    s = WithBlock(std::string(last), twin);  // rule B: the generation prompt opens a block the source closes
  } else if (!FromSourceTags(source, &s) && !FromThinkingOff(render, user, g, &s)) {
    s = {};
  }
  s.direct = ReplyHeader(render, g);
  return s;
}

bool BringsOwnReasoning(const ojson& m, const ReasoningStyle& style) {
  for (const char* key : {"reasoning_content", "thinking"}) {
    if (m.contains(key) && m[key].is_string() && !m[key].get<std::string>().empty()) return true;
  }
  const auto c = m.find("content");
  return c != m.end() && c->is_string() && !style.close.empty() &&
         c->get<std::string>().find(style.close) != std::string::npos;
}

std::string EraseReasoningProbe(std::string text, const ReasoningStyle& style) {
  const size_t probe = text.rfind(kReasoningProbe);
  if (probe == std::string::npos) return "";
  text.erase(probe, kReasoningProbe.size());
  if (style.drop_space_before) {
    size_t open = text.rfind(style.open, probe);
    while (open != std::string::npos && open > 0 && kSpace.find(text[open - 1]) != std::string_view::npos) {
      text.erase(--open, 1);
    }
  }
  return text;
}

std::string CloseReasoningBlock(std::string head, const ReasoningStyle& style) {
  if (style.open.empty()) return head;
  const size_t open = head.rfind(style.open);
  if (open != std::string::npos) {
    const std::string_view after = std::string_view(head).substr(open + style.open.size());
    // The header opened a block the template leaves open: close it.
    if (OnlySpace(after)) return head + style.close;
    // The template rendered an empty block of its own: replaced below.
    const size_t close = after.find(style.close);
    if (close != std::string_view::npos && OnlySpace(after.substr(0, close)) &&
        OnlySpace(after.substr(close + style.close.size()))) {
      head.erase(open);
    }
  }
  return head + style.empty_block;
}

}  // namespace pc
