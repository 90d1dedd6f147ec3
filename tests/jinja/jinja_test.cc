// The Jinja interpreter: the language as chat templates use it, whitespace
// control with trim_blocks/lstrip_blocks, errors as messages, and limits on
// untrusted templates; then every shared template against its reference
// renders.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <set>
#include <sstream>

#include "jinja/jinja.h"
#include "server/chat_template.h"
#include "test_support.h"

namespace pc::jinja {
namespace {

std::string R(const std::string& src, const nlohmann::json& vars = nlohmann::json::object(), RenderOptions opt = {}) {
  auto t = Template::Parse(src);
  if (!t.ok()) return "PARSE ERROR: " + t.status().message();
  auto out = t->Render(Value::FromJson(vars), opt);
  return out.ok() ? *out : "ERROR: " + out.status().message();
}

TEST(Jinja, ExpressionsFollowPython) {
  EXPECT_EQ(R("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }}"),
            "7 3 -4 1 2 1024 3.5");
  EXPECT_EQ(R("{{ 'a' ~ 1 ~ none }} {{ 'ab' * 3 }} {{ [1] + [2] }} {{ 'x' if false else 'y' }}"), "a1None ababab [1, 2] y");
  EXPECT_EQ(R("{{ x or [] }} {{ x and 1 }} {{ not x }} {{ 3 > 2 and 'b' in 'abc' and 4 not in [1] }}"), "[]  True True");
  EXPECT_EQ(R("{{ none }} {{ true }} {{ 1.0 }} {{ {'a': 1, 'b': [1, 'x']} }} {{ \"it's\" }}"),
            "None True 1.0 {'a': 1, 'b': [1, 'x']} it's");
  EXPECT_EQ(R("{{ s[1:3] }} {{ s[::-1] }} {{ l[-1] }} {{ l[1:] }} {{ l[5] is defined }}", {{"s", "hello"}, {"l", {1, 2, 3}}}),
            "el olleh 3 [2, 3] False");
  EXPECT_EQ(R("{{ m.a.b }} {{ m['a']['b'] }} {{ m.missing is defined }} {{ m.get('x', 5) }}", {{"m", {{"a", {{"b", 2}}}}}}),
            "2 2 False 5");
}

TEST(Jinja, StatementsAndScopes) {
  EXPECT_EQ(R("{% for x in [1,2,3] %}{{ loop.index }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}"), "11,22,33");
  EXPECT_EQ(R("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(R("{% for x in range(10) if x % 3 == 0 %}{{ x }}{{ loop.length }} {% endfor %}"), "04 34 64 94 ");
  EXPECT_EQ(R("{% for x in [1,2,3,4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}"
              "{% endfor %}"),
            "13");
  EXPECT_EQ(R("{% for k, v in {'b': 1, 'a': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "b=1;a=2;");
  EXPECT_EQ(R("{% for x in [1,2] %}{{ loop.previtem }}|{{ loop.nextitem }}|{{ loop.cycle('a','b') }} {% endfor %}"),
            "|2|a 1||b ");
  // set in a loop stays in the loop; a namespace carries values out.
  EXPECT_EQ(R("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  // ... and each iteration starts afresh (Jinja2: what the last one set is gone).
  EXPECT_EQ(R("{% for i in [1, 2] %}{% if i == 1 %}{% set x = 5 %}{% endif %}{{ x is defined }}{% endfor %}"), "TrueFalse");
  EXPECT_EQ(R("{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = 7 %}{{ x }}{% endfor %}{{ x }}"), "17171");
  EXPECT_EQ(R("{% set ns = namespace(n=0) %}{% for i in [1,2,3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}"), "6");
  EXPECT_EQ(R("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(R("{% set t %}hi {{ 1 + 1 }}{% endset %}[{{ t }}]"), "[hi 2]");
  EXPECT_EQ(R("{% macro m(a, b='d') %}<{{ a }}{{ b }}>{% endmacro %}{{ m(1) }}{{ m(1, b=2) }}{{ m('x', 'y') }}"), "<1d><12><xy>");
  EXPECT_EQ(R("{% filter upper %}abc{% endfilter %}"), "ABC");
  // Filter chains on blocks run innermost (leftmost) first, as on expressions.
  EXPECT_EQ(R("{% filter replace('A', 'b') | upper %}aA{% endfilter %}"), "AB");
  EXPECT_EQ(R("{% set t | trim | upper %}  hi  {% endset %}[{{ t }}]"), "[HI]");
  EXPECT_EQ(R("{{ 'aA' | replace('A', 'b') | upper }}"), "AB");
  EXPECT_EQ(R("{% if a %}A{% elif b %}B{% else %}C{% endif %}", {{"b", 1}}), "B");
  // with: names for its body only, each from the outside.
  EXPECT_EQ(R("{% set a = 5 %}{% with a = a + 1, b = a %}{{ a }}{{ b }}{% set c = 3 %}{% endwith %}{{ a }}{{ c is defined }}"),
            "655False");
  // Hugging Face's training-mask tag renders its body.
  EXPECT_EQ(R("<{% generation %}{{ 1 + 1 }} x{% endgeneration %}>"), "<2 x>");
  EXPECT_EQ(R("{% generation %}a"), "PARSE ERROR: missing '{% endgeneration %}' at the end of the template");
  // raw: the text between is text; a dict literal's braces close before the tag.
  EXPECT_EQ(R("a\n{% raw %}\n{{ x }}{% if %}\n{% endraw %}\nb"), "a\n\n{{ x }}{% if %}\nb");
  EXPECT_EQ(R("a {%- raw -%} {{ x }} {%- endraw -%} b"), "a{{ x }}b");
  EXPECT_EQ(R("{% raw %}x"), "PARSE ERROR: line 1: missing '{% endraw %}'");
  EXPECT_EQ(R("{{ {'a': {'b': 2}}.a.b }} {{ {'a': 1}.get('a') }}"), "2 1");
}

TEST(Jinja, WhitespaceControlAsTrimAndLstripBlocks) {
  // trim_blocks: the newline after a block tag goes; lstrip_blocks: its indent too.
  EXPECT_EQ(R("{% if true %}\n  x\n  {% endif %}\ny"), "  x\ny");
  EXPECT_EQ(R("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(R("a\n    {%+ if true %}b{% endif %}"), "a\n    b");
  EXPECT_EQ(R("{# note #}\nx"), "x");
  EXPECT_EQ(R("{{ 'a' }}\n{{ 'b' }}"), "a\nb");  // variable tags keep their newline
  EXPECT_EQ(R("x {%- if true +%}\ny{% endif %}"), "x\ny");
  // keep_trailing_newline off: the source's last line break goes first, so
  // a template ending in a block tag and a blank line ends with the block.
  EXPECT_EQ(R("a{% if true %}b{% endif %}\n\n"), "ab");
  EXPECT_EQ(R("a\n"), "a");
  EXPECT_EQ(R("a\n\n"), "a\n");
  EXPECT_EQ(R("a\r\n"), "a");
}

TEST(Jinja, FiltersTestsAndMethods) {
  EXPECT_EQ(R("{{ '  a b  '|trim }}|{{ 'ab'|upper }}|{{ [3,1,2]|sort|join(',') }}|{{ [1,1,2]|unique|list|length }}"),
            "a b|AB|1,2,3|2");
  EXPECT_EQ(R("{{ x|default('d') }} {{ ''|default('d', true) }} {{ {'b': 1, 'a': 2}|dictsort }}"), "d d [('a', 2), ('b', 1)]");
  EXPECT_EQ(R("{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='c')|join('+') }}",
              {{"ms", {{{"role", "user"}, {"c", "1"}}, {{"role", "x"}, {"c", "2"}}, {{"role", "user"}, {"c", "3"}}}}}),
            "1+3");
  EXPECT_EQ(R("{{ {'a': [1, 'é', none, true]}|tojson }} {{ {'a': 1}|tojson(indent=2) }}"),
            "{\"a\": [1, \"é\", null, true]} {\n  \"a\": 1\n}");
  EXPECT_EQ(R("{{ 'a\\nb'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}"), "a\n  b|  a\n  b");
  EXPECT_EQ(R("{{ ' x '.strip() }}|{{ 'a,b,,c'.split(',') }}|{{ 'a b'.split() }}|{{ 'abc'.startswith(('x', 'a')) }}"
              "|{{ 'xyx'.replace('x', 'z') }}|{{ '{} is {}'.format('x', 1) }}|{{ 'ab'.endswith('b') }}"),
            "x|['a', 'b', '', 'c']|['a', 'b']|True|zyz|x is 1|True");
  EXPECT_EQ(R("{{ x is none }} {{ 1 is number }} {{ 's' is string }} {{ {} is mapping }} {{ [] is iterable }} {{ 4 is even }}"
              " {{ 6 is divisibleby 3 }} {{ y is defined }} {{ 'ab' is lower }}",
              {{"x", nullptr}}),
            "True True True True True True True False True");
  EXPECT_EQ(R("{{ '%s-%d' % ('a', 3) }}"), "a-3");
  // format: Python's printf-style % (ToolACE's "%sr" | format(value)).
  EXPECT_EQ(R("{{ '%s|%r|%5d|%-4d|%05.1f|%x|%%' | format('a', 'b', 42, 7, 3.14159, 255) }}"), "a|'b'|   42|7   |003.1|ff|%");
  EXPECT_EQ(R("{{ '%sr' | format([1, 'a']) }} {{ '%(k)s=%(v)d' | format(k='n', v=3) }}"), "[1, 'a']r n=3");
  EXPECT_EQ(R("{{ '%d' | format('x') }}"), "ERROR: %d format: a real number is required, not 'x'");
  EXPECT_EQ(R("{{ '%s %s' | format(1) }}"), "ERROR: format: not enough arguments for format string");
  // Found against Python's Jinja on real templates and a battery of its
  // expressions: str methods, sum over an attribute, filters on a signed
  // operand, a test's argument as a literal list, floats as Python prints them.
  EXPECT_EQ(R("{{ 'a,b,c'.rsplit(',', 1) }} {{ '  a b  c '.rsplit(None, 1) }} {{ 'abcb'.rindex('b') }} {{ 'x'.rfind('y') }}"),
            "['a,b', 'c'] ['  a b', 'c'] 3 -1");
  EXPECT_EQ(R("{{ 'a=b=c'.partition('=') | join('|') }} [{{ 'ab'.center(5) }}][{{ 'ab'.rjust(4, '.') }}][{{ '-5'.zfill(4) }}]"),
            "a|=|b=c [  ab ][..ab][-005]");
  EXPECT_EQ(R("{{ 'Hi'.swapcase() }} {{ 'AB'.isupper() }} {{ 'a1'.islower() }} {{ 'a b'.isalnum() }}"), "hI True True False");
  EXPECT_EQ(R("{{ [{'a': 2}, {'a': 1}] | sum(attribute='a') }} {{ -3 | abs }} {{ 'x' is in ['x'] }}"), "3 3 True");
  EXPECT_EQ(R("{{ 1e3 }} {{ 1e16 }} {{ 1.5e-7 }} {{ 12345678.9 }} {{ 2.0 }}"), "1000.0 1e+16 1.5e-07 12345678.9 2.0");
}

// Found against Python's Jinja with a battery of expressions: call blocks,
// tuples printed as tuples, groupby / truncate / striptags / slice, case
// mapping past ASCII, and str.format's specs.
TEST(Jinja, CallBlocksTuplesGroupsAndFormatSpecs) {
  EXPECT_EQ(R("{% macro m(x) %}[{{ caller() }}{{ x }}]{% endmacro %}{% call m(1) %}in{% endcall %}"), "[in1]");
  EXPECT_EQ(R("{% macro row(items) %}{% for i in items %}{{ caller(i) }};{% endfor %}{% endmacro %}"
              "{% call(v) row([1, 2]) %}<{{ v * 10 }}>{% endcall %}"),
            "<10>;<20>;");
  EXPECT_EQ(R("{% call x %}a{% endcall %}"), "PARSE ERROR: line 1: {% call %} needs a macro call");
  EXPECT_EQ(R("{{ (1, 2) }} {{ (1,) }} {{ [1, (2, 'a')] }} {{ {'a': 1}.items() | list }} {{ 'a b'.partition(' ') }}"),
            "(1, 2) (1,) [1, (2, 'a')] [('a', 1)] ('a', ' ', 'b')");
  EXPECT_EQ(R("{{ (1, 2) == [1, 2] }} {{ (1, 2) == (1, 2) }} {{ (1, 2) | list }} {{ (1, 2) | tojson }}"),
            "False True [1, 2] [1, 2]");
  EXPECT_EQ(R("{% for g in ms | groupby('r') %}{{ g.grouper }}:{{ g.list | map(attribute='c') | join }} {% endfor %}"
              "{% for k, l in ms | groupby('r') %}{{ k }}{{ l | length }}{% endfor %}",
              {{"ms", {{{"r", "u"}, {"c", "1"}}, {{"r", "A"}, {"c", "2"}}, {{"r", "a"}, {"c", "3"}}}}}),
            "A:23 u:1 A2u1");
  EXPECT_EQ(R("{{ 'hello world foo' | truncate(9) }}|{{ 'hello world' | truncate(7, true, leeway=0) }}|{{ 'short' | truncate(3) }}"),
            "hello...|hell...|short");
  EXPECT_EQ(R("{{ '<b>x</b>  <!-- c -->y &amp; z' | striptags }}"), "x y & z");
  EXPECT_EQ(R("{{ [1, 2, 3, 4, 5] | slice(2) | list }} {{ [1, 2, 3] | slice(2, 0) | list }}"),
            "[[1, 2, 3], [4, 5]] [[1, 2], [3, 0]]");
  EXPECT_EQ(R("{{ x | upper }} {{ x | lower }} {{ 'straße' | upper }}", {{"x", "Ωμέγα Привет Ёж àÉ"}}),
            "ΩΜΈΓΑ ПРИВЕТ ЁЖ ÀÉ ωμέγα привет ёж àé STRASSE");
  EXPECT_EQ(R("[{{ '{:>5}'.format('a') }}][{{ '{:*^7}'.format(3) }}][{{ '{:08.3f}'.format(-3.14159) }}][{{ '{:,}'.format(1234567) }}]"
              "[{{ '{:.1%}'.format(0.256) }}][{{ '{:#x}'.format(255) }}][{{ '{:+.2e}'.format(12345.678) }}][{{ '{!r:>5}'.format('a') }}]"),
            "[    a][***3***][-003.142][1,234,567][25.6%][0xff][+1.23e+04][  'a']");
  EXPECT_EQ(R("{% for r in ['u', 'u', 'a', 'u'] %}{{ loop.changed(r) | int }}{% endfor %}"), "1011");
  EXPECT_EQ(R("{% macro f(a, b=2) %}{{ a }}{{ b }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1, 3, 4, z=5) }}|{{ f(1) }}"),
            "13(4,){'z': 5}|12(){}");
  EXPECT_EQ(R("{{ x | tojson(ensure_ascii=true) }} {{ [1, {'a': 2}] | tojson(separators=(',', ':')) }}", {{"x", "é😀"}}),
            "\"\\u00e9\\ud83d\\ude00\" [1,{\"a\":2}]");
  EXPECT_EQ(R("{{ [1, 2, 3] | batch(2, 0) | list }} {{ ['bb', 'a'] | sort(attribute='missing') }}"), "[[1, 2], [3, 0]] ['bb', 'a']");
  // A third battery: recursive loops, min/max/unique by attribute, round's
  // methods, int's base, wordwrap, Jinja's title (not str.title), attr on a
  // dict (an attribute only), the filter/test/escaped tests, "%" with flags.
  EXPECT_EQ(R("{% for t in tree recursive %}{{ t.n }}{{ loop.depth }}({{ loop(t.c) }}){% endfor %}",
              {{"tree", {{{"n", "a"}, {"c", {{{"n", "b"}, {"c", nlohmann::json::array()}}}}}}}}),
            "a1(b2())");
  EXPECT_EQ(R("{{ (ms | max(attribute='n')).c }} {{ (ms | min(attribute='n')).c }} {{ ms | unique(attribute='r') | map(attribute='c') | join }}",
              {{"ms", {{{"r", "u"}, {"c", "a"}, {"n", 3}}, {{"r", "x"}, {"c", "b"}, {"n", 1}}, {{"r", "U"}, {"c", "c"}, {"n", 2}}}}}),
            "a b ab");
  EXPECT_EQ(R("{{ 2.567 | round(2, 'floor') }} {{ 2.561 | round(1, 'ceil') }} {{ '0x1A' | int(0, 16) }} {{ 'ff' | int(base=16) }} "
              "{{ '3.9' | int }} {{ [[1], [2]] | sum(start=[]) }} {{ (1, 2) + (3,) }}"),
            "2.56 2.6 26 255 3 [1, 2] (1, 2, 3)");
  EXPECT_EQ(R("{{ 'Hello World foo bar' | wordwrap(10) }}|{{ \"they're here-now\" | title }}|{{ {'k': 1} | attr('k') }}|"
              "{{ {'k': 1} | attr('items') is callable }}"),
            "Hello\nWorld foo\nbar|They're Here-Now||True");
  EXPECT_EQ(R("{{ 'upper' is filter }} {{ 'odd' is test }} {{ 'nope' is filter }} {{ 'a' is escaped }} "
              "{{ '%-4s|%5.1f|%03d|%+d|%c' % ('ab', 3.14159, 7, 5, 72) }} {{ '%(a)s' % {'a': 1} }}"),
            "True True False False ab  |  3.1|007|+5|H 1");
  EXPECT_EQ(R("{{ {'B': 1, 'a': 2} | dictsort }} {{ {'B': 1, 'a': 2} | dictsort(true) }}"), "[('a', 2), ('B', 1)] [('B', 1), ('a', 2)]");
  EXPECT_EQ(R("{{ '{:,}'.format('a') }}"), "ERROR: Invalid format specifier for a string");
  EXPECT_EQ(R("{{ '{:.2}'.format(3) }}"), "ERROR: Precision not allowed in integer format specifier");
}

// Python's list methods, on lists shared by reference (a namespace's list
// changes through them), as templates written for llama.cpp use them
// (Kimi K2 Thinking's queue of tool call ids, DeepSeek V3.2's tool list).
TEST(Jinja, ListMethodsMutateTheSharedList) {
  EXPECT_EQ(R("{% set ns = namespace(ids=[]) %}{% set _ = ns.ids.append('a') %}{% set _ = ns.ids.append('b') %}"
              "{{ ns.ids }} {{ ns.ids.pop(0) }} {{ ns.ids }}"),
            "['a', 'b'] a ['b']");
  EXPECT_EQ(R("{% set l = [3, 1] %}{% set _ = l.extend([1, 2]) %}{% set _ = l.insert(-1, 9) %}{% set _ = l.insert(99, 7) %}"
              "{{ l }} {{ l.index(1) }} {{ l.count(1) }} {{ l.pop() }} {{ l }}"),
            "[3, 1, 1, 9, 2, 7] 1 2 7 [3, 1, 1, 9, 2]");
  EXPECT_EQ(R("{% set a = [1] %}{% set b = a %}{% set _ = b.append(2) %}{{ a }}"), "[1, 2]");
  EXPECT_EQ(R("{{ [].pop() }}"), "ERROR: pop from empty list");
  EXPECT_EQ(R("{{ [1].pop(5) }}"), "ERROR: pop index out of range");
  EXPECT_EQ(R("{{ [1].index(2) }}"), "ERROR: 2 is not in list");
  // Doubling a list by extend() stops at a bound, not at the memory's end.
  EXPECT_TRUE(R("{% set l = [1] %}{% for i in range(40) %}{% set _ = l.extend(l) %}{% endfor %}").starts_with("ERROR: list too long"));
}

TEST(Jinja, ErrorsAreMessages) {
  EXPECT_EQ(R("{{ raise_exception('Only user and assistant roles') }}"), "ERROR: Only user and assistant roles");
  EXPECT_EQ(R("{{ x.y }}"), "ERROR: 'x' is undefined");
  EXPECT_EQ(R("{{ 1 + [] }}"), "ERROR: unsupported operand types for +: 1 and []");
  EXPECT_EQ(R("{{ x|nofilter }}"), "ERROR: unknown filter 'nofilter'");
  EXPECT_EQ(R("{{ 1 / 0 }}"), "ERROR: division by zero");
  // int64 arithmetic that would overflow is an error (Python widens; we do not).
  EXPECT_EQ(R("{{ 9223372036854775807 + 1 }}"), "ERROR: integer overflow");
  EXPECT_EQ(R("{{ 4294967296 * 4294967296 }}"), "ERROR: integer overflow");
  EXPECT_EQ(R("{{ 3 ** 40 }}"), "ERROR: integer overflow");
  EXPECT_EQ(R("{{ (-9223372036854775807 - 1) // -1 }}"), "ERROR: integer overflow");
  EXPECT_EQ(R("{{ 2 ** 62 + (2 ** 62 - 1) }}"), "9223372036854775807");
  EXPECT_NE(R("{% if %}").find("PARSE ERROR"), std::string::npos);
  EXPECT_NE(R("{% for x in y %}").find("PARSE ERROR: missing '{% endfor %}'"), std::string::npos);
  EXPECT_NE(R("{{ 'unterminated }}").find("PARSE ERROR"), std::string::npos);
  // Escapes: non-hex digits, or digits running into the end, are parse errors (not a throw).
  EXPECT_NE(R("{{ '\\uZZZZ' }}").find("PARSE ERROR: line 1: bad escape"), std::string::npos);
  EXPECT_NE(R("{{ '\\x4' }}").find("PARSE ERROR"), std::string::npos);
  EXPECT_EQ(R("{{ '\\u00e9\\x41' }}"), "\xc3\xa9" "A");
  EXPECT_NE(R("{% set ns = 1 %}{% set ns.a = 2 %}").find("non-namespace"), std::string::npos);
}

TEST(Jinja, UntrustedTemplatesAreBounded) {
  RenderOptions small;
  small.max_steps = 10000;
  EXPECT_NE(R("{% for i in range(100000) %}{% endfor %}", {}, small).find("too much work"), std::string::npos);
  EXPECT_NE(R("{% for a in range(1000) %}{% for b in range(1000) %}x{% endfor %}{% endfor %}").find("ERROR"), std::string::npos);
  EXPECT_NE(R("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").find("nested more than 64"), std::string::npos);
  EXPECT_NE(R("{% for t in [1] recursive %}{{ loop([t]) }}{% endfor %}").find("recursive loop nested more than 64"),
            std::string::npos);
  EXPECT_EQ(R("{{ 'x' | wordwrap(0) }}"), "ERROR: wordwrap: invalid width");
  EXPECT_EQ(R("{{ [1] | slice(0) }}"), "ERROR: slice: bad number of slices");
  RenderOptions tiny;
  tiny.max_output_bytes = 1000;
  EXPECT_NE(R("{% for i in range(100) %}{{ 'abcdefghijklmnopqrstuvwxyz' }}{% endfor %}", {}, tiny).find("exceeds 1000 bytes"),
            std::string::npos);
  EXPECT_NE(R("{{ 'x' * 100000000 }}").find("too large"), std::string::npos);
  // Deep nesting in the source is refused at parse time, not by the stack.
  EXPECT_NE(R("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}").find("nested too deeply"), std::string::npos);
  std::string deep;
  for (int i = 0; i < 500; ++i) deep += "{% if true %}";
  EXPECT_NE(R(deep).find("nested too deeply"), std::string::npos);
}

TEST(Jinja, StrftimeNowUsesThePinnedDate) {
  RenderOptions opt;
  std::tm tm{};
  tm.tm_year = 126;
  tm.tm_mon = 10;
  tm.tm_mday = 30;
  opt.now = tm;
  EXPECT_EQ(R("{{ strftime_now('%Y-%m-%d') }}", {}, opt), "2026-11-30");
}

// Every shared template against the reference renders (../shared/templates
// README: bos_token <s>, eos_token </s>, the date pinned to 2026-11-30, a
// leading bos_token removed), all 136 byte for byte, continued replies of
// reasoning families included (server/reasoning_block.h), except where the
// README allows a rule of ours: a continued reply on a template that shows no
// reasoning block anywhere gets none, where the reference writes one by
// family (those renders must then be ours with an empty block before the
// content, and the template must show no block).
TEST(JinjaTemplates, SharedTemplatesRenderAsTheReference) {
  PC_SHARED_OR_SKIP(renders, "templates/renders.jsonl");
  std::istringstream in(test::ReadText(renders));
  std::map<std::string, int> seen;
  int exact = 0, total = 0, ruled = 0;
  std::tm date{};
  date.tm_year = 126;
  date.tm_mon = 10;
  date.tm_mday = 30;
  date.tm_hour = 12;
  std::mktime(&date);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    const std::string name = j["template"];
    const int index = seen[name]++;
    const std::string src = test::ReadText(test::SharedPath("templates/" + name + ".jinja"));
    auto t = ChatTemplate::FromSource(src, name);
    ASSERT_TRUE(t.ok()) << name << ": " << t.status().message();
    t->set_date(date);
    auto p = t->Render(j["messages"], j["add_generation_prompt"].get<bool>());
    ++total;
    const std::string ref = j["prompt"];
    const bool same = p.ok() && p->text == ref;
    exact += same;
    const auto& last = j["messages"].back();
    const bool continued = !j["add_generation_prompt"].get<bool>() && last["role"] == "assistant";
    if (!same && continued && p.ok() && t->reasoning().open.empty()) {
      // Ours is the reference less a closed empty block right before the content.
      const std::string content = last["content"];
      const std::string head = p->text.substr(0, p->text.size() - content.size());
      ASSERT_TRUE(ref.starts_with(head) && ref.ends_with(content) && ref.size() > p->text.size()) << name;
      const std::string block = ref.substr(head.size(), ref.size() - p->text.size());
      EXPECT_TRUE(block.find("</") != std::string::npos || block.find("[/") != std::string::npos) << name << ": " << block;
      std::printf("%s: continued without the reference's family block %s\n", name.c_str(), block.c_str());
      ++ruled;
      continue;
    }
    EXPECT_TRUE(same) << name << " #" << index << ": " << (p.ok() ? p->text : p.status().message());
  }
  std::printf("%d of %d reference renders reproduced byte for byte, %d continued by our rule\n", exact, total, ruled);
  EXPECT_EQ(total, 136);
  EXPECT_EQ(exact + ruled, total);
  EXPECT_LE(ruled, 3);
}

}  // namespace
}  // namespace pc::jinja
