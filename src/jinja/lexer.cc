// The lexer of Jinja templates (lexer.h): tags cut from the text with
// whitespace control, and tag contents cut into expression tokens.
#include "jinja/lexer.h"

#include <fmt/format.h>

#include <cstring>

#include "jinja/jinja.h"

namespace pc::jinja {
namespace {

// Finds the end of a tag whose content starts at i, skipping string literals.
// The tag's end outside strings and brackets: a dict literal's closing
// braces ({{ {'a': {'b': 1}} }}) close the dict first, as Jinja2's lexer
// balances them.
size_t FindTagEnd(std::string_view src, size_t i, std::string_view close) {
  char quote = 0;
  int depth = 0;
  for (; i < src.size(); ++i) {
    const char ch = src[i];
    if (quote) {
      if (ch == '\\') ++i;
      else if (ch == quote) quote = 0;
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
    } else if (depth == 0 && src.substr(i, close.size()) == close) {
      return i;
    } else if (ch == '(' || ch == '[' || ch == '{') {
      ++depth;
    } else if ((ch == ')' || ch == ']' || ch == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Whether a tag's text is the word w alone (spaces around it).
bool IsWord(std::string_view text, std::string_view w) {
  const size_t b = text.find_first_not_of(" \t\n\r");
  if (b == std::string_view::npos) return false;
  const size_t e = text.find_last_not_of(" \t\n\r");
  return text.substr(b, e + 1 - b) == w;
}

}  // namespace

Result<std::vector<Tag>> Lex(std::string_view src) {
  // Jinja (keep_trailing_newline off, as Hugging Face renders chat
  // templates) drops the source's final line break before anything else:
  // a template ending "{% endif %}\n\n" then ends with the trimmed block.
  if (src.ends_with("\r\n")) src.remove_suffix(2);
  else if (src.ends_with('\n') || src.ends_with('\r')) src.remove_suffix(1);
  std::vector<Tag> out;
  size_t pos = 0;
  int line = 1;
  bool strip_next = false, trim_next = false;  // what the previous tag asked of the following text
  auto count_lines = [&](size_t a, size_t b) {
    for (size_t k = a; k < b; ++k) line += src[k] == '\n';
  };
  while (pos <= src.size()) {
    size_t open = src.find('{', pos);
    while (open != std::string_view::npos && open + 1 < src.size() && !std::strchr("{%#", src[open + 1])) {
      open = src.find('{', open + 1);
    }
    if (open != std::string_view::npos && open + 1 >= src.size()) open = std::string_view::npos;
    std::string text(src.substr(pos, open == std::string_view::npos ? std::string_view::npos : open - pos));
    const int text_line = line;
    count_lines(pos, open == std::string_view::npos ? src.size() : open);
    // The previous tag's right side.
    if (strip_next) {
      size_t k = 0;
      while (k < text.size() && IsSpace(text[k])) ++k;
      text.erase(0, k);
    } else if (trim_next) {
      if (text.rfind("\r\n", 0) == 0) text.erase(0, 2);
      else if (!text.empty() && text[0] == '\n') text.erase(0, 1);
    }
    strip_next = trim_next = false;
    if (open == std::string_view::npos) {
      if (!text.empty()) out.push_back({'t', std::move(text), text_line});
      break;
    }
    const char kind = src[open + 1];
    size_t start = open + 2;
    char left = 0;
    if (start < src.size() && (src[start] == '-' || src[start] == '+')) left = src[start++];
    // This tag's left side.
    if (left == '-') {
      while (!text.empty() && IsSpace(text.back())) text.pop_back();
    } else if (left != '+' && kind != '{') {
      // lstrip_blocks: a block or comment tag with only spaces and tabs
      // before it on its line (in the source) takes them away.
      const std::string_view raw = src.substr(pos, open - pos);
      const size_t nl = raw.rfind('\n');
      const std::string_view tail = nl == std::string_view::npos ? raw : raw.substr(nl + 1);
      const bool line_start = nl != std::string_view::npos || pos == 0 || src[pos - 1] == '\n';
      if (line_start && tail.find_first_not_of(" \t") == std::string_view::npos) {
        size_t k = 0;
        while (k < tail.size() && !text.empty() && (text.back() == ' ' || text.back() == '\t')) {
          text.pop_back();
          ++k;
        }
      }
    }
    if (!text.empty()) out.push_back({'t', std::move(text), text_line});
    const std::string_view close = kind == '{' ? "}}" : (kind == '%' ? "%}" : "#}");
    const size_t end = kind == '#' ? src.find("#}", start) : FindTagEnd(src, start, close);
    if (end == std::string_view::npos) {
      return Errorf("line {}: unclosed '{}{}' tag", line, '{', kind);
    }
    size_t content_end = end;
    char right = 0;
    if (content_end > start && (src[content_end - 1] == '-' || src[content_end - 1] == '+')) {
      right = src[content_end - 1];
      --content_end;
    }
    const int tag_line = line;
    count_lines(open, end + 2);
    const std::string content(src.substr(start, content_end - start));
    strip_next = right == '-';
    trim_next = right != '+' && kind != '{';
    pos = end + 2;
    if (kind == '%' && IsWord(content, "raw")) {
      // {% raw %}...{% endraw %}: the text between is the template's text,
      // tags and all; whitespace control works on both tags as on others.
      size_t close_at = pos, body_end = std::string_view::npos;
      char end_left = 0, end_right = 0;
      while ((close_at = src.find("{%", close_at)) != std::string_view::npos) {
        size_t k = close_at + 2;
        char l = 0;
        if (k < src.size() && (src[k] == '-' || src[k] == '+')) l = src[k++];
        const size_t tag_end = src.find("%}", k);
        if (tag_end == std::string_view::npos) break;
        size_t ce = tag_end;
        char r = 0;
        if (ce > k && (src[ce - 1] == '-' || src[ce - 1] == '+')) r = src[--ce];
        if (IsWord(src.substr(k, ce - k), "endraw")) {
          body_end = close_at, end_left = l, end_right = r;
          close_at = tag_end + 2;
          break;
        }
        close_at += 2;
      }
      if (body_end == std::string_view::npos) return Errorf("line {}: missing '{{% endraw %}}'", tag_line);
      std::string body(src.substr(pos, body_end - pos));
      count_lines(pos, close_at);
      // Only a '-' strips the body's start (trim_blocks keeps the newline
      // after {% raw %}, as Jinja2 does).
      if (strip_next) body.erase(0, std::min(body.size(), body.find_first_not_of(" \t\n\r\v\f")));
      if (end_left == '-') {
        while (!body.empty() && IsSpace(body.back())) body.pop_back();
      }
      if (!body.empty()) out.push_back({'t', std::move(body), tag_line});
      strip_next = end_right == '-';
      trim_next = end_right != '+';
      pos = close_at;
      continue;
    }
    if (kind != '#') out.push_back({kind == '{' ? 'v' : 'b', content, tag_line});
  }
  return out;
}

// --- Expression tokens -------------------------------------------------------


namespace {

// A number at s[i]: digits with '_' separators, an optional fraction and
// exponent; *end is one past it.
Result<Tok> LexNumber(std::string_view s, size_t i, int line, size_t* end) {
  auto digit = [&](size_t k) { return k < s.size() && std::isdigit(static_cast<unsigned char>(s[k])); };
  size_t j = i;
  bool is_float = false;
  while (j < s.size() && (digit(j) || s[j] == '_')) ++j;
  if (j + 1 < s.size() && s[j] == '.' && digit(j + 1)) {
    is_float = true;
    ++j;
    while (digit(j)) ++j;
  }
  if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
    size_t k = j + 1;
    if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
    if (digit(k)) {
      is_float = true;
      j = k;
      while (digit(j)) ++j;
    }
  }
  std::string num(s.substr(i, j - i));
  num.erase(std::remove(num.begin(), num.end(), '_'), num.end());
  Tok t{is_float ? Tok::kFloat : Tok::kInt, num, {}};
  try {
    t.value = is_float ? Value(std::stod(num)) : Value(static_cast<int64_t>(std::stoll(num)));
  } catch (...) {
    return Errorf("line {}: bad number '{}'", line, num);
  }
  *end = j;
  return t;
}

void AppendUtf8(uint32_t cp, std::string* v) {
  if (cp < 0x80) *v += static_cast<char>(cp);
  else if (cp < 0x800) *v += {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
  else *v += {static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), static_cast<char>(0x80 | (cp & 0x3F))};
}

// A quoted string at s[i] (its quote s[i]) with Python's escapes; *end is
// one past the closing quote.
Result<Tok> LexString(std::string_view s, size_t i, int line, size_t* end) {
  const char quote = s[i];
  std::string v;
  size_t j = i + 1;
  for (; j < s.size() && s[j] != quote; ++j) {
    if (s[j] != '\\' || j + 1 >= s.size()) {
      v += s[j];
      continue;
    }
    const char e = s[++j];
    switch (e) {
      case 'n': v += '\n'; break;
      case 't': v += '\t'; break;
      case 'r': v += '\r'; break;
      case '0': v += '\0'; break;
      case '\\': v += '\\'; break;
      case '\'': v += '\''; break;
      case '"': v += '"'; break;
      case 'u':
      case 'x': {
        const size_t digits = e == 'u' ? 4 : 2;
        // The digits, then at least the closing quote.
        if (j + digits >= s.size()) return Errorf("line {}: bad escape", line);
        const std::string_view hex = s.substr(j + 1, digits);
        if (hex.find_first_not_of("0123456789abcdefABCDEF") != std::string_view::npos) return Errorf("line {}: bad escape", line);
        AppendUtf8(static_cast<uint32_t>(std::stoul(std::string(hex), nullptr, 16)), &v);
        j += digits;
        break;
      }
      default: v += '\\'; v += e;
    }
  }
  if (j >= s.size()) return Errorf("line {}: unterminated string", line);
  *end = j + 1;
  return Tok{Tok::kString, std::string(s.substr(i, j + 1 - i)), Value(std::move(v))};
}

}  // namespace

Result<std::vector<Tok>> Tokenize(std::string_view s, int line) {
  static const char* kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "<", ">", "=",
                               "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", "~"};
  std::vector<Tok> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (IsSpace(c)) {
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i + 1;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Tok::kName, std::string(s.substr(i, j - i)), {}});
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '\'' || c == '"') {
      Result<Tok> t = c == '\'' || c == '"' ? LexString(s, i, line, &i) : LexNumber(s, i, line, &i);
      if (!t.ok()) return t.status();
      out.push_back(std::move(*t));
      continue;
    }
    const char* const* op = std::find_if(std::begin(kOps), std::end(kOps), [&](const char* o) { return s.substr(i, std::strlen(o)) == o; });
    if (op == std::end(kOps)) return Errorf("line {}: unexpected character '{}'", line, c);
    out.push_back({Tok::kOp, *op, {}});
    i += std::strlen(*op);
  }
  out.push_back({Tok::kEnd, "", {}});
  return out;
}

}  // namespace pc::jinja
