#include "server/tool_syntax.h"

#include <fmt/format.h>

#include <algorithm>

#include "structured/schema_cache.h"

namespace pc {
namespace {

using json = nlohmann::json;
// Probe messages keep their keys in the order clients write them (a
// template that prints `function | tojson` shows name before arguments).
using ojson = nlohmann::ordered_json;

// Probe names and values: unlikely in any template's own text.
constexpr std::string_view kNames[2] = {"fn_alpha", "fn_beta"};
constexpr std::string_view kIds[2] = {"alphacall", "betacall2"};  // 9 alphanumerics, as Mistral's templates demand
constexpr std::string_view kArgKeys[2] = {"k_alpha", "k_beta"};

bool IsSpace(char c) { return IsToolSpace(c); }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// The end of the JSON object or array starting at pos (after its last
// byte); npos when the text ends first or pos holds no '{' / '['.
size_t JsonValueEnd(std::string_view t, size_t pos) {
  if (pos >= t.size() || (t[pos] != '{' && t[pos] != '[')) return std::string_view::npos;
  int depth = 0;
  bool in_str = false, esc = false;
  for (size_t i = pos; i < t.size(); ++i) {
    const char c = t[i];
    if (in_str) {
      if (esc) esc = false;
      else if (c == '\\') esc = true;
      else if (c == '"') in_str = false;
      continue;
    }
    if (c == '"') in_str = true;
    else if (c == '{' || c == '[') ++depth;
    else if ((c == '}' || c == ']') && --depth == 0) return i + 1;
  }
  return std::string_view::npos;
}

// The probe arguments' span in a rendered call: the object around its key.
bool FindArgs(std::string_view region, std::string_view key, size_t* begin, size_t* end) {
  const size_t k = region.find(key);
  if (k == std::string_view::npos) return false;
  const size_t open = region.rfind('{', k);
  if (open == std::string_view::npos) return false;
  const size_t close = JsonValueEnd(region, open);
  if (close == std::string_view::npos) return false;
  const json v = json::parse(region.substr(open, close - open), nullptr, false);
  if (v.is_discarded() || !v.is_object() || !v.contains(std::string(key))) return false;
  *begin = open;
  *end = close;
  return true;
}

ojson ProbeTools() {
  ojson tools = ojson::array();
  for (int i = 0; i < 2; ++i) {
    ojson params = {{"type", "object"}, {"properties", {{std::string(kArgKeys[i]), {{"type", "integer"}}}}}};
    tools.push_back({{"type", "function"},
                     {"function", {{"name", std::string(kNames[i])}, {"description", "probe"}, {"parameters", params}}}});
  }
  return tools;
}

ojson ProbeCall(int i, bool args_as_object) {
  ojson args = {{std::string(kArgKeys[i]), i == 0 ? ojson(7) : ojson("x")}};
  return {{"id", std::string(kIds[i])},
          {"type", "function"},
          {"function", {{"name", std::string(kNames[i])}, {"arguments", args_as_object ? args : ojson(args.dump())}}}};
}

size_t CommonPrefix(std::string_view a, std::string_view b) { return CommonToolPrefix(a, b); }
size_t CommonSuffix(std::string_view a, std::string_view b) { return CommonToolSuffix(a, b); }

}  // namespace

namespace {

// The region of a rendered assistant turn that differs from the plain turn
// around its content ("ZZ" at z): where the calls went.
std::string CallRegion(const std::string& text, const std::string& plain, size_t z) {
  size_t p = std::min(CommonPrefix(text, plain), z);
  size_t q = std::min(CommonSuffix(text, plain), plain.size() - z - 2);
  // Never cut inside a marker: the plain turn's text may begin or end with
  // the same bytes as the calls' markers (`<think>` vs `<TOOLCALL>`,
  // `<|end|>` vs `<|call|>`).
  while (p > 0 && std::string_view("<[{|").find(text[p - 1]) != std::string_view::npos) --p;
  while (q > 0 && std::string_view(">]}|").find(text[text.size() - q]) != std::string_view::npos) --q;
  return p + q <= text.size() ? std::string(Trim(std::string_view(text).substr(p, text.size() - p - q))) : std::string();
}

// A hole of the one-call region: where the name, arguments or id went.
struct HoleSpan {
  size_t begin, end;
  ToolSyntax::Hole hole;
};

// head + unit + tail of the one-call region, the unit as large as the
// two-call render allows: two = head + unit(alpha) + sep + unit(beta) + tail.
// False when no split reproduces the two-call render.
bool SplitUnit(const std::string& one, const std::string& two, const std::vector<HoleSpan>& holes, size_t* head,
               size_t* tail, std::string* sep, const std::string& beta_args) {
  if (two.empty() || beta_args.empty()) return true;  // one call only: the unit is the region
  bool found = false;
  for (size_t total = 0; !found && total <= one.size(); ++total) {
    for (size_t h = 0; h <= total && h <= holes.front().begin; ++h) {
      const size_t tl = total - h;
      if (one.size() - tl < holes.back().end) continue;
      std::string beta;  // the unit with beta's values in the holes
      size_t at = h;
      for (const HoleSpan& sp : holes) {
        beta.append(one, at, sp.begin - at);
        beta += sp.hole == ToolSyntax::Hole::kName    ? std::string(kNames[1])
                : sp.hole == ToolSyntax::Hole::kId    ? std::string(kIds[1])
                : sp.hole == ToolSyntax::Hole::kIndex ? std::string("1")
                                                      : beta_args;
        at = sp.end;
      }
      beta.append(one, at, one.size() - tl - at);
      const std::string_view first(one.data(), one.size() - tl), last_tail(one.data() + one.size() - tl, tl);
      if (two.size() < first.size() + beta.size() + tl || two.compare(0, first.size(), first) != 0) continue;
      if (two.compare(two.size() - tl - beta.size(), beta.size(), beta) != 0 || two.compare(two.size() - tl, tl, last_tail) != 0) continue;
      // Of the equally large units (rotations of a repeated marker byte),
      // the one that starts where a marker does.
      const bool at_marker = std::string_view("<[{").find(one[h]) != std::string_view::npos;
      if (!found || at_marker) {
        *head = h;
        *tail = tl;
        *sep = two.substr(first.size(), two.size() - tl - beta.size() - first.size());
        found = true;
      }
      if (at_marker) break;
    }
  }
  return found;
}

}  // namespace

namespace {

// Renders probe turns: the plain one once, then the regions of turns with
// calls that differ from it (where the template wrote them).
class RegionProbe {
 public:
  explicit RegionProbe(const ChatTemplate& t) : t_(t) {
    Result<std::string> plain = Render({{"role", "assistant"}, {"content", "ZZ"}}, false);
    if (!plain.ok()) {
      error_ = "the template does not render a plain assistant turn: " + plain.status().message();
    } else if ((z_ = plain->find("ZZ")) == std::string::npos) {
      error_ = "the template drops assistant content";
    } else {
      plain_ = *plain;
    }
  }
  const std::string& error() const { return error_; }
  Result<std::string> Region(const ojson& calls) const {
    const ojson turn = {{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}};
    Result<std::string> r = Render(turn, false);
    if (!r.ok()) return r.status();
    std::string region = CallRegion(*r, plain_, z_);
    if (region.find(kNames[0]) == std::string::npos) {
      // A template that holds a final assistant turn back (to continue it,
      // as Nemotron's JSON template does) shows its calls once a user turn
      // follows: both renders then end with that turn.
      Result<std::string> later = Render(turn, true), plain = Render({{"role", "assistant"}, {"content", "ZZ"}}, true);
      if (later.ok() && plain.ok() && plain->find("ZZ") != std::string::npos) {
        std::string other = CallRegion(*later, *plain, plain->find("ZZ"));
        if (other.find(kNames[0]) != std::string::npos) region = std::move(other);
      }
    }
    return region;
  }

 private:
  Result<std::string> Render(ojson assistant, bool user_after) const {
    ojson msgs = ojson::array({ojson{{"role", "user"}, {"content", "U1"}}, std::move(assistant)});
    if (user_after) msgs.push_back(ojson{{"role", "user"}, {"content", "U2"}});
    return t_.RenderTurns(msgs, ojson{{"tools", ProbeTools()}});
  }
  const ChatTemplate& t_;
  std::string plain_, error_;
  size_t z_ = 0;
};

ojson ProbeCallWith(int i, const json& args) {
  return {{"id", std::string(kIds[i])},
          {"type", "function"},
          {"function", {{"name", std::string(kNames[i])}, {"arguments", ojson::parse(args.dump())}}}};
}

}  // namespace

// Renders one and two probe calls (arguments as objects, else as strings)
// and keeps the regions where they went; false with reason_ set.
bool ToolSyntax::ProbeRegions(const ChatTemplate& t, std::string* one, std::string* two) {
  const RegionProbe probe(t);
  if (!probe.error().empty()) {
    reason_ = probe.error();
    return false;
  }
  auto with_calls = [&](int n, bool as_object) {
    ojson calls = ojson::array();
    for (int i = 0; i < n; ++i) calls.push_back(ProbeCall(i, as_object));
    return probe.Region(calls);
  };
  for (bool as_object : {true, false}) {
    Result<std::string> r1 = with_calls(1, as_object);
    if (!r1.ok() || r1->find(kNames[0]) == std::string::npos || r1->find(kArgKeys[0]) == std::string::npos) continue;
    // A template that prints the arguments with `|string` shows an object
    // as Python's repr ({'k': 7}) and the clients' JSON text as it is: it
    // takes the text (InternLM2's in vLLM's examples).
    if (as_object && r1->find("{'" + std::string(kArgKeys[0]) + "': 7}") != std::string::npos) {
      Result<std::string> text = with_calls(1, false);
      size_t b, e;
      if (text.ok() && FindArgs(*text, kArgKeys[0], &b, &e)) continue;
    }
    args_as_object_ = as_object;
    *one = *r1;
    if (Result<std::string> r2 = with_calls(2, as_object); r2.ok()) *two = *r2;
    break;
  }
  if (one->empty()) reason_ = "the template does not render tool calls";
  return !one->empty();
}

// The arguments' span [*a0, *a1) in the one-call region and the second
// call's arguments as the two-call region shows them: one JSON value, else
// one element per argument (then one and two are rendered again with the
// probes of tool_args.h). False with reason_ set.
bool ToolSyntax::ArgsHole(const ChatTemplate& t, std::string* one, std::string* two, size_t* a0, size_t* a1,
                          std::string* beta_args) {
  if (FindArgs(*one, kArgKeys[0], a0, a1)) {
    size_t b0, b1;
    if (!two->empty() && FindArgs(*two, kArgKeys[1], &b0, &b1)) *beta_args = two->substr(b0, b1 - b0);
    return true;
  }
  const RegionProbe regions(t);
  Result<ArgProbe> probe = DeriveArgSyntax([&](const json& args) {
    return regions.Region(ojson::array({ProbeCallWith(0, args_as_object_ ? args : json(args.dump()))}));
  });
  if (!probe.ok()) {
    reason_ = probe.status().message();
    return false;
  }
  args_ = probe->syntax;
  *one = probe->region;
  *a0 = probe->block_begin;
  *a1 = probe->block_end;
  const json alpha = {{std::string(kArgProbeKeys[0]), std::string(kArgProbeValues[0])}};
  const json beta = {{std::string(kArgProbeKeys[1]), std::string(kArgProbeValues[1])}};
  Result<std::string> r2 = regions.Region(ojson::array({ProbeCallWith(0, alpha), ProbeCallWith(1, beta)}));
  *two = r2.ok() ? *r2 : std::string();
  *beta_args = args_->Render(std::string(kArgProbeKeys[1]), beta[std::string(kArgProbeKeys[1])]);
  if (two->find(*beta_args) == std::string::npos) beta_args->clear();
  return true;
}

namespace {
// SplitUnit, and where that fails, SplitUnit with a running number: a lone 0
// outside the holes that the second call writes as 1 (added to *holes).
bool SplitUnitOrIndex(const std::string& one, const std::string& two, std::vector<HoleSpan>* holes, size_t* head,
                      size_t* tail, std::string* sep, const std::string& beta_args) {
  if (SplitUnit(one, two, *holes, head, tail, sep, beta_args)) return true;
  const auto by_begin = [](const HoleSpan& x, const HoleSpan& y) { return x.begin < y.begin; };
  const auto digit = [&](size_t k) { return k < one.size() && std::isdigit(uint8_t(one[k])); };
  for (size_t i = 0; i < one.size(); ++i) {
    if (one[i] != '0' || (i > 0 && digit(i - 1)) || digit(i + 1)) continue;
    if (std::any_of(holes->begin(), holes->end(), [&](const HoleSpan& h) { return i >= h.begin && i < h.end; })) continue;
    std::vector<HoleSpan> with = *holes;
    with.push_back({i, i + 1, ToolSyntax::Hole::kIndex});
    std::sort(with.begin(), with.end(), by_begin);
    if (SplitUnit(one, two, with, head, tail, sep, beta_args)) {
      *holes = std::move(with);
      return true;
    }
  }
  return false;
}
}  // namespace

ToolSyntax ToolSyntax::Derive(const ChatTemplate& t) {
  ToolSyntax s;
  std::string one, two;
  if (!s.ProbeRegions(t, &one, &two)) return s;
  // Holes in the one-call region, in order.
  std::vector<HoleSpan> holes;
  size_t a0 = 0, a1 = 0;
  std::string beta_args;
  if (!s.ArgsHole(t, &one, &two, &a0, &a1, &beta_args)) return s;
  const size_t name_at = one.find(kNames[0]);
  if (a1 == 0 || name_at == std::string::npos) {
    s.reason_ = "the template's tool-call arguments are not one JSON object";
    return s;
  }
  holes.push_back({name_at, name_at + kNames[0].size(), Hole::kName});
  holes.push_back({a0, a1, Hole::kArgs});
  if (size_t id = one.find(kIds[0]); id != std::string::npos) holes.push_back({id, id + kIds[0].size(), Hole::kId});
  std::sort(holes.begin(), holes.end(), [](const HoleSpan& x, const HoleSpan& y) { return x.begin < y.begin; });
  for (size_t i = 1; i < holes.size(); ++i) {
    if (holes[i].begin < holes[i - 1].end) {
      s.reason_ = "the template writes the function name inside its arguments";
      return s;
    }
  }
  size_t head = 0, tail = 0;
  if (!SplitUnitOrIndex(one, two, &holes, &head, &tail, &s.sep_, beta_args)) {
    s.reason_ = "the template's calls carry more than a name, arguments, id and number";
    return s;
  }
  s.multi_ = !two.empty() && !beta_args.empty();
  // Whitespace inside arguments: single spaces, or indented JSON at any
  // depth where the template pretty-prints (64 bytes a gap: 16 levels of 4).
  if (one.substr(a0, a1 - a0).find('\n') != std::string::npos) s.max_whitespace_ = 64;
  s.head_ = one.substr(0, head);
  s.tail_ = one.substr(one.size() - tail);
  size_t at = head;
  for (const HoleSpan& sp : holes) {
    s.unit_lits_.push_back(one.substr(at, sp.begin - at));
    s.unit_holes_.push_back(sp.hole);
    at = sp.end;
  }
  s.unit_lits_.push_back(one.substr(at, one.size() - tail - at));
  const std::string start = s.head_ + s.unit_lits_[0];
  s.trigger_ = start.substr(0, std::find_if(start.begin(), start.end(), IsSpace) - start.begin());
  if (s.trigger_.empty() && s.multi_ && s.head_.empty() && s.unit_lits_[0].empty() &&
      !s.sep_.empty() && !IsSpace(s.sep_[0])) {
    // A call starts with its name: at the reply's beginning, or after the
    // separator that comes before every later call.
    s.anchored_ = true;
    s.trigger_ = s.sep_.substr(0, std::find_if(s.sep_.begin(), s.sep_.end(), IsSpace) - s.sep_.begin());
  } else if (s.trigger_.empty()) {
    s.unit_holes_.clear();
    s.reason_ = "a call starts with its name (no marker to find it by, nor a separator between calls)";
  }
  s.DeriveHeaderWords();
  return s;
}

json ToolSyntax::Describe() const {
  json unit = json::array();
  for (size_t k = 0; k < unit_lits_.size(); ++k) {
    unit.push_back(unit_lits_[k]);
    if (k < unit_holes_.size()) {
      unit.push_back(unit_holes_[k] == Hole::kName   ? "<NAME>"
                     : unit_holes_[k] == Hole::kArgs ? "<ARGS>"
                     : unit_holes_[k] == Hole::kId   ? "<ID>"
                                                     : "<INDEX>");
    }
  }
  return {{"supported", supported()}, {"reason", reason_}, {"head", head_}, {"unit", unit}, {"sep", sep_},
          {"tail", tail_}, {"multi", multi_}, {"args_as_object", args_as_object_}, {"max_whitespace", max_whitespace_},
          {"per_argument", args_ ? args_->Describe() : json(nullptr)},
          {"anchored", anchored_}, {"header_words", lead_words_.empty() ? json(nullptr) : json{{"words", lead_words_}, {"tag", loose_tag_}}}};
}

using Match = MatchResult;
static Match MatchLit(std::string_view text, size_t* pos, std::string_view lit) { return MatchToolLiteral(text, pos, lit); }

bool ToolSyntax::MatchLiteral(std::string_view text, size_t* pos, std::string_view lit) const {
  return MatchLit(text, pos, lit) == Match::kYes;
}

// One unit from pos: its end, or npos (*partial when the text ends inside
// it after the name: the call so far is in *call).
namespace {
// The parameters schema of the tool named name in a request's tools.
const json* ParamsOf(const json* tools, const std::string& name) {
  if (tools == nullptr || !tools->is_array()) return nullptr;
  for (const json& t : *tools) {
    if (t.contains("function") && t["function"].value("name", "") == name && t["function"].contains("parameters")) {
      return &t["function"]["parameters"];
    }
  }
  return nullptr;
}
}  // namespace

size_t ToolSyntax::ParseUnit(std::string_view text, size_t pos, ToolCall* call, bool* partial,
                             const json* tools) const {
  *partial = false;
  bool named = false;
  for (size_t k = 0; k <= unit_holes_.size(); ++k) {
    const size_t lit_at = pos;
    const Match m = MatchLit(text, &pos, unit_lits_[k]);
    if (m != Match::kYes && k == loose_lit_ && named) {
      bool short_text = false;
      pos = MatchLooseHeader(text, lit_at, &short_text);
      if (pos == std::string_view::npos) {
        *partial = short_text || m == Match::kShort;
        return pos;
      }
    } else if (m != Match::kYes) {
      *partial = m == Match::kShort && named;
      return std::string_view::npos;
    }
    if (k == unit_holes_.size()) break;
    while (pos < text.size() && IsSpace(text[pos])) ++pos;
    if (unit_holes_[k] == Hole::kArgs && args_) {
      bool cut = false;
      const size_t end = ParseArgBlock(*args_, text, pos, ParamsOf(tools, call->name), &call->arguments, &cut);
      if (end == std::string_view::npos) {
        *partial = named && cut;
        return end;
      }
      pos = end;
      continue;
    }
    if (unit_holes_[k] == Hole::kArgs) {
      const size_t end = JsonValueEnd(text, pos);
      if (end == std::string_view::npos) {
        call->arguments = std::string(text.substr(pos));
        *partial = named && (pos == text.size() || text[pos] == '{');
        return std::string_view::npos;
      }
      if (json::parse(text.substr(pos, end - pos), nullptr, false).is_discarded()) return std::string_view::npos;
      call->arguments = std::string(text.substr(pos, end - pos));
      pos = end;
      continue;
    }
    if (unit_holes_[k] == Hole::kIndex) {  // the call's number, whatever it says
      const size_t digits_end = std::find_if(text.begin() + pos, text.end(), [](char c) { return !std::isdigit(uint8_t(c)); }) - text.begin();
      if (digits_end == pos || digits_end == text.size()) {
        *partial = digits_end == text.size() && named;
        return std::string_view::npos;
      }
      pos = digits_end;
      continue;
    }
    // A name or id: up to the quote that closes it inside a JSON string, else
    // a run of identifier bytes.
    const bool quoted = !unit_lits_[k].empty() && unit_lits_[k].back() == '"';
    size_t end = pos;
    while (end < text.size() &&
           (quoted ? text[end] != '"' : (std::isalnum(uint8_t(text[end])) || text[end] == '_' || text[end] == '-' || text[end] == '.')))
      ++end;
    if (end == text.size() || end == pos) return std::string_view::npos;
    (unit_holes_[k] == Hole::kName ? call->name : call->id) = std::string(text.substr(pos, end - pos));
    named |= unit_holes_[k] == Hole::kName;
    pos = end;
  }
  return pos;
}

ToolSyntax::Parsed ToolSyntax::Parse(std::string_view text, const std::function<std::string(size_t)>& make_id,
                                     const json* tools) const {
  Parsed out;
  size_t start = std::string_view::npos, pos = 0;
  if (anchored_ && StartsWithCall(text, tools) == 1) {
    start = pos = static_cast<size_t>(std::find_if_not(text.begin(), text.end(), IsSpace) - text.begin());
  } else if (supported()) {
    start = pos = text.find(trigger_);
    if (anchored_ && start != std::string_view::npos) pos += trigger_.size();  // the separator before a call
  }
  if (start == std::string_view::npos) {
    out.content = std::string(text);
    return out;
  }
  if (MatchLit(text, &pos, head_) == Match::kYes) {
    for (;;) {
      ToolCall call;
      bool partial = false;
      const size_t end = ParseUnit(text, pos, &call, &partial, tools);
      if (end == std::string_view::npos) {
        if (partial) {
          out.partial = true;
          if (call.id.empty()) call.id = make_id(out.calls.size());
          out.partial_call = std::move(call);
        }
        break;
      }
      if (call.id.empty()) call.id = make_id(out.calls.size());
      out.calls.push_back(std::move(call));
      pos = end;
      size_t next = pos;
      if (!multi_ || MatchLit(text, &next, sep_) != Match::kYes) break;
      ToolCall probe;
      bool p2 = false;
      if (ParseUnit(text, next, &probe, &p2, tools) == std::string_view::npos && !p2) break;
      pos = next;
    }
  }
  if (out.calls.empty() && !out.partial) {
    out.content = std::string(text);
    return out;
  }
  MatchLit(text, &pos, tail_);
  std::string_view before = text.substr(0, CallStart(text, start));
  while (!before.empty() && IsSpace(before.back())) before.remove_suffix(1);
  out.content = std::string(before);
  if (!out.partial && pos < text.size()) {
    // Text after the calls is content, unless it is another call cut short.
    std::string_view rest = Trim(text.substr(pos));
    size_t after_sep = 0;
    if (multi_ && MatchLit(rest, &after_sep, sep_) == Match::kYes) {
      const std::string_view next = Trim(rest.substr(after_sep));
      if (next.empty() || next.starts_with(trigger_) || trigger_.starts_with(next)) rest = {};
    }
    if (!rest.empty()) out.content += (out.content.empty() ? "" : "\n") + std::string(rest);
  }
  return out;
}

int ToolSyntax::StartsWithCall(std::string_view text, const json* tools) const {
  if (!anchored_ || unit_holes_.empty() || unit_holes_[0] != Hole::kName) return 0;
  size_t pos = static_cast<size_t>(std::find_if_not(text.begin(), text.end(), IsSpace) - text.begin());
  size_t end = pos;
  while (end < text.size() && (std::isalnum(uint8_t(text[end])) || text[end] == '_' || text[end] == '-' || text[end] == '.')) ++end;
  const std::string_view name = text.substr(pos, end - pos);
  const bool any = tools == nullptr || !tools->is_array() || tools->empty();  // no list: any name
  bool known = false, prefix = any;
  for (size_t i = 0; !any && i < tools->size(); ++i) {
    const json& f = (*tools)[i];
    const std::string n = f.contains("function") && f["function"].is_object() ? f["function"].value("name", "") : "";
    known |= n == name;
    prefix |= n.starts_with(name);
  }
  if (end == text.size()) return prefix ? -1 : 0;  // the name may go on
  if (name.empty() || !(any || known)) return 0;
  size_t at = end;
  const Match m = MatchLit(text, &at, unit_lits_[1]);
  return m == Match::kYes ? 1 : m == Match::kShort ? -1 : 0;
}

Result<std::shared_ptr<const structured::SeqGrammar>> ToolSyntax::Grammar(const json& tools, const std::string& only,
                                                                         bool parallel, const std::vector<std::string>& ids,
                                                                         const Reasoning& reasoning) const {
  if (!supported()) return Status::Error("the model's chat template has no tool-call syntax we can enforce: " + reason_);
  struct Tool {
    std::string name;
    std::shared_ptr<const structured::CompiledSchema> schema;
    json params;
  };
  std::vector<Tool> list;
  for (const json& t : tools) {
    const json& fn = t["function"];
    const std::string name = fn["name"].get<std::string>();
    if (!only.empty() && name != only) continue;
    nlohmann::ordered_json params = {{"type", "object"}};
    if (fn.contains("parameters") && fn["parameters"].is_object()) params = nlohmann::ordered_json::parse(fn["parameters"].dump());
    auto compiled = structured::SchemaCache::Global().Get(params);
    if (!compiled.ok()) return Status::Error(fmt::format("the parameters of tool '{}' cannot be enforced: {}", name, compiled.status().message()));
    list.push_back({name, *compiled, json::parse(params.dump())});
  }
  if (list.empty()) return Status::Error(fmt::format("no tool named '{}'", only));
  auto g = std::make_shared<structured::SeqGrammar>();
  g->max_whitespace = max_whitespace_;
  const size_t max_calls = parallel && multi_ ? std::min<size_t>(ids.size(), 8) : 1;
  int32_t at = g->AddState(), first = structured::SeqGrammar::kStart;
  if (!reasoning.close.empty()) {
    const int32_t thought = g->AddState(), gap = g->AddState();
    if (reasoning.inside) {
      g->Until(first, thought, reasoning.close);
    } else {
      const int32_t opened = g->AddState();
      g->Literal(first, opened, reasoning.open);
      g->Until(opened, thought, reasoning.close);
      g->Literal(first, gap, "");
    }
    g->Literal(thought, gap, "");  // the block, then a blank line or not
    g->Literal(thought, gap, "\n\n");
    first = gap;
  }
  g->Literal(first, at, head_);
  for (size_t c = 0; c < max_calls; ++c) {
    const int32_t done = g->AddState();
    for (const Tool& tool : list) {
      int32_t s = at;
      for (size_t k = 0; k <= unit_holes_.size(); ++k) {
        int32_t next = k == unit_holes_.size() ? done : g->AddState();
        std::string lit = unit_lits_[k];
        if (k < unit_holes_.size() && unit_holes_[k] != Hole::kArgs) {
          lit += unit_holes_[k] == Hole::kName ? tool.name : unit_holes_[k] == Hole::kIndex ? std::to_string(c) : ids[c];
        }
        if (k < unit_holes_.size() && unit_holes_[k] == Hole::kArgs) {
          const int32_t mid = g->AddState();
          g->Literal(s, mid, lit);
          if (args_) {
            PC_RETURN_IF_ERROR(AddArgBlock(*args_, g.get(), mid, next, tool.params));
          } else {
            g->Json(mid, next, tool.schema);
          }
        } else {
          g->Literal(s, next, lit);
        }
        s = next;
      }
    }
    g->Literal(done, structured::SeqGrammar::kAccept, tail_);
    if (c + 1 < max_calls) {
      const int32_t again = g->AddState();
      g->Literal(done, again, sep_);
      at = again;
    }
  }
  return std::shared_ptr<const structured::SeqGrammar>(std::move(g));
}

}  // namespace pc
