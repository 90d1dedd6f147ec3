// ToolSyntax's header words (tool_syntax.h): the literal between a call's
// name and its arguments, when it ends in a tag, read as words a reply may
// place before the name or among other tags (gpt-oss's channel header).
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_syntax.h"

namespace pc {

void ToolSyntax::DeriveHeaderWords() {
  for (size_t k = 0; k + 1 < unit_holes_.size(); ++k) {
    if (unit_holes_[k] != Hole::kName || unit_holes_[k + 1] != Hole::kArgs || args_) continue;
    const std::string& lit = unit_lits_[k + 1];
    const size_t tag = lit.rfind('<');
    if (lit.empty() || lit.back() != '>' || tag == std::string::npos || tag == 0) return;
    std::vector<std::string> words;
    std::string word;
    for (char c : lit.substr(0, tag) + " ") {
      if (!IsToolSpace(c)) {
        word += c;
      } else if (!word.empty()) {
        words.push_back(std::move(word));
        word.clear();
      }
    }
    if (words.empty()) return;
    loose_lit_ = k + 1;
    loose_tag_ = lit.substr(tag);
    lead_words_ = std::move(words);
    return;
  }
}

// After a call's name: the header up to loose_tag_ (on the same line, at
// most 64 bytes, starting with a tag); the position after loose_tag_, or
// npos (*short_text when the text ends before it could be decided).
size_t ToolSyntax::MatchLooseHeader(std::string_view text, size_t pos, bool* short_text) const {
  constexpr size_t kMaxHeader = 64;
  *short_text = false;
  // A header goes on with a tag (" <|constrain|>json"), never with words:
  // "to=functions.x please" is prose.
  size_t first = pos;
  while (first < text.size() && text[first] == ' ') ++first;
  if (first < text.size() && text[first] != '<') return std::string_view::npos;
  const size_t end = std::min(text.size(), pos + kMaxHeader + loose_tag_.size());
  const size_t at = text.substr(0, end).find(loose_tag_, pos);
  const size_t line = text.find('\n', pos);
  if (at != std::string_view::npos && (line == std::string_view::npos || line > at)) return at + loose_tag_.size();
  *short_text = end == text.size() && line == std::string_view::npos;
  return std::string_view::npos;
}

size_t ToolSyntax::CallStart(std::string_view text, size_t trigger_at) const {
  size_t start = trigger_at;
  for (bool moved = true; moved && !lead_words_.empty();) {
    moved = false;
    size_t before = start;
    while (before > 0 && IsToolSpace(text[before - 1])) --before;
    for (const std::string& w : lead_words_) {
      if (before >= w.size() && text.substr(before - w.size(), w.size()) == w) {
        start = before - w.size();
        moved = true;
        break;
      }
    }
  }
  return start;
}

size_t ToolSyntax::HoldFrom(std::string_view text) const {
  // A suffix that could begin the trigger, then header words before it.
  size_t hold = text.size();
  for (size_t k = std::min(trigger_.size() - 1, text.size()); k > 0; --k) {
    if (text.compare(text.size() - k, k, trigger_, 0, k) == 0) {
      hold = text.size() - k;
      break;
    }
  }
  for (const std::string& w : lead_words_) {  // or a header word
    for (size_t k = std::min(w.size() - 1, text.size()); k > 0; --k) {
      if (text.compare(text.size() - k, k, w, 0, k) == 0) {
        hold = std::min(hold, text.size() - k);
        break;
      }
    }
  }
  hold = CallStart(text, hold);
  while (hold > 0 && IsToolSpace(text[hold - 1])) --hold;
  return hold;
}

}  // namespace pc
