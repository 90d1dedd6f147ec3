// Untrusted JSON Schemas (response_format, json_schema, tool parameters)
// and GBNF grammars (`grammar`): compiled, then a few texts matched and one
// mask computed over a small vocabulary. Never a crash, a hang or unbounded
// memory: what we cannot compile is an error message. Inputs that are not
// JSON go to the pattern compiler and the GBNF compiler directly.
#include <cstddef>
#include <cstdint>
#include <string>

#include "structured/gbnf.h"
#include "structured/json_schema.h"
#include "structured/sequence.h"
#include "structured/token_mask.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pc::structured;
  static const TokenIndex* index = [] {
    std::vector<std::string> v;
    for (int b = 1; b < 256; ++b) v.push_back(std::string(1, char(b)));
    for (const char* p : {"\":", "{\"", "\",\"", "true", "12", "\\u00", "\xC3\xA9", "  ", "ab"}) v.push_back(p);
    return new TokenIndex(std::move(v));
  }();
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto schema = CompileJsonSchemaText(text);
  if (!schema.ok()) {
    (void)CompileRegex(text, true);
    auto gbnf = CompileGbnf(text);
    if (!gbnf.ok()) return 0;
    SeqGrammar g;
    g.Gbnf(SeqGrammar::kStart, SeqGrammar::kAccept, *gbnf);
    for (const char* sample : {"a", "{\"a\":1}", "123", "\xC3\xA9x", "(1+2)"}) {
      SeqMatcher m(&g);
      (void)(m.Consume(sample) && m.CanEnd());
    }
    SeqMaskComputer masks(index, {});
    TokenMask mask;
    SeqMatcher m(&g);
    masks.Compute(m, &mask);
    if (m.Consume("a")) masks.Compute(m, &mask);
    return 0;
  }
  for (const char* sample : {"{}", "[1,\"a\",null]", "{\"a\":{\"b\":[true,1.5e3]}}", "\"2024-02-29\"", "-12"}) {
    JsonMatcher m(schema->get(), 2);
    (void)(m.Consume(sample) && m.CanEnd());
  }
  MaskComputer masks(index);
  TokenMask mask;
  JsonMatcher m(schema->get(), 2);
  masks.Compute(m, &mask);
  if (m.Consume("{\"")) masks.Compute(m, &mask);
  return 0;
}
