#include "structured/schema_values.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace pc::structured {

int Compare(const Decimal& a, const Decimal& b) {
  bool a_zero = a.mant == 0, b_zero = b.mant == 0;
  int sa = a_zero ? 0 : a.neg ? -1 : 1, sb = b_zero ? 0 : b.neg ? -1 : 1;
  if (sa != sb) return sa < sb ? -1 : 1;
  if (sa == 0) return 0;
  unsigned __int128 x = a.mant, y = b.mant;
  for (int i = a.scale; i < b.scale; ++i) x *= 10;
  for (int i = b.scale; i < a.scale; ++i) y *= 10;
  int mag = x < y ? -1 : x > y ? 1 : 0;
  return sa > 0 ? mag : -mag;
}

// Anchored regular expressions of the string formats we enforce.
const char* FormatRegex(const std::string& f) {
  static const std::string kDate =
      "([0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))"
      "|([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)-02-29)";
  static const std::string kTime =
      "([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
  static const std::string kDateTime = kDate + "[Tt]" + kTime;
  static const std::string kH16 = "[0-9A-Fa-f]{1,4}";
  static const std::string kIpv6 = "((" + kH16 + ":){7}" + kH16 + "|(" + kH16 + ":){1,7}:|(" + kH16 + ":){1,6}:" + kH16 +
                                   "|(" + kH16 + ":){1,5}(:" + kH16 + "){1,2}|(" + kH16 + ":){1,4}(:" + kH16 + "){1,3}|(" +
                                   kH16 + ":){1,3}(:" + kH16 + "){1,4}|(" + kH16 + ":){1,2}(:" + kH16 + "){1,5}|" + kH16 +
                                   ":(:" + kH16 + "){1,6}|:((:" + kH16 + "){1,7}|:))";
  static const std::string kOctet = "(25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
  static const std::string kIpv4 = kOctet + "(\\." + kOctet + "){3}";
  static const std::string kLabel = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
  static const std::map<std::string, std::string> kFormats = {
      {"date", kDate},
      {"time", kTime},
      {"date-time", kDateTime},
      {"email", "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@" + kLabel + "(\\." + kLabel + ")*"},
      {"uuid", "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"},
      {"ipv4", kIpv4},
      {"ipv6", kIpv6},
      {"hostname", kLabel + "(\\." + kLabel + ")*"},
      {"uri", "[A-Za-z][A-Za-z0-9+.-]*:[A-Za-z0-9._~:/?#\\[\\]@!$&'()*+,;=%-]*"},
      {"uri-reference", "([A-Za-z][A-Za-z0-9+.-]*:)?[A-Za-z0-9._~:/?#\\[\\]@!$&'()*+,;=%-]*"},
  };
  auto it = kFormats.find(f);
  return it == kFormats.end() ? nullptr : it->second.c_str();
}

std::optional<Decimal> ToDecimal(const Json& j, bool round_up) {
  std::string text = j.is_number_float() ? fmt::format("{}", j.get<double>()) : j.dump();
  Decimal d;
  size_t i = 0;
  if (i < text.size() && text[i] == '-') { d.neg = true; ++i; }
  std::string digits;
  int point = -1, exp = 0;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c >= '0' && c <= '9') digits += c;
    else if (c == '.') point = int(digits.size());
    else if (c == 'e' || c == 'E') { exp = std::stoi(text.substr(i + 1)); break; }
  }
  int frac = (point < 0 ? 0 : int(digits.size()) - point) - exp;  // value = digits * 10^-frac
  while (frac < 0) { digits += '0'; ++frac; }
  while (digits.size() > 1 && digits[0] == '0') digits.erase(0, 1);
  while (frac > 0 && digits.size() > 1 && digits.back() == '0') { digits.pop_back(); --frac; }
  bool inexact = false;
  while (frac > 18) {
    inexact |= digits.back() != '0';
    digits.pop_back();
    --frac;
    if (digits.empty()) digits.push_back('0');
  }
  if (digits.size() > 19 || (digits.size() == 19 && digits > "9999999999999999999")) return std::nullopt;
  d.mant = std::stoull(digits);
  d.scale = frac;
  if (inexact && (round_up != d.neg)) ++d.mant;  // away from zero for up on positives
  return d;
}

Status CountKeyword(const Json& s, const char* k, uint32_t* out) {
  if (!s.contains(k)) return OkStatus();
  const Json& v = s[k];
  if (!v.is_number() || v.get<double>() < 0 || v.get<double>() != std::floor(v.get<double>()))
    return Errorf("{}: not a non-negative integer", k);
  *out = uint32_t(std::min(v.get<double>(), 4e9));
  return OkStatus();
}

}  // namespace pc::structured
