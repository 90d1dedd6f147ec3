// Helpers the builtins share (builtins.cc defines them; filters.cc uses
// them): Python's str methods and Jinja2's argument conventions. Internal to
// src/jinja. Thread-safety: pure functions.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "jinja/interp.h"

namespace pc::jinja {

// str.strip / lstrip / rstrip: chars (a string) or whitespace when undefined.
std::string Strip(const std::string& s, const Value& chars, bool left, bool right);
std::string Lower(std::string s);
std::string Upper(std::string s);
// str.split(sep, maxsplit): runs of whitespace when sep is undefined or none.
Value Split(const std::string& s, const Value& sep, int64_t maxsplit);
// str.replace(from, to, count); count < 0: every occurrence.
std::string Replace(const std::string& s, const std::string& from, const std::string& to, int64_t count);
// str.startswith / endswith; p a string or a tuple of strings.
bool PrefixMatch(const std::string& s, const Value& p, bool suffix);
// str.format with positional and keyword fields, !r / !s and format specs.
std::string Format(const std::string& fmt, const CallArgs& a);
// format(v, spec), Python's mini-language: [[fill]align][sign][#][0][width]
// [,|_][.precision][type] with types s d x X o b c e E f F g G %.
std::string FormatSpec(const Value& v, const std::string& spec);
// Python's printf-style fmt % args (the format filter): %s %r %c %d %i %u %o
// %x %X %e %E %f %F %g %G and %%, flags -+ 0#, width, precision, and
// %(name)s with keyword arguments.
std::string PercentFormat(const std::string& fmt, const CallArgs& a);
// Python's str method `name` on a string, or null when there is none.
using StrMethodFn = Value (*)(const std::string& s, CallArgs& a);
StrMethodFn FindStrMethod(std::string_view name);
// A function value named `name` (a bound method).
Value Bound(const std::string& name, std::function<Value(CallArgs&)> fn);
// An integer argument, def when undefined or none; fails on other types.
int64_t IntArg(const Value& v, int64_t def);
// item["a"]["b"] for a dotted path "a.b" (numbers index lists).
Value AttrPath(const Value& item, const std::string& path);
// Python's < for numbers (bools count) and strings; fails on other pairs.
bool Less(const Value& a, const Value& b);
// Jinja2's indent filter.
std::string Indent(const std::string& s, const Value& width, bool first, bool blank);

}  // namespace pc::jinja
