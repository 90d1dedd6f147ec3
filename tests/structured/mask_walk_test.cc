// Random walks through the masks: for every shared schema that compiles,
// tokens drawn only from each step's mask (stories260K's vocabulary of
// bytes and short pieces) never reach a dead end, and every walk that
// completes is a value python3-jsonschema (an independent validator, formats
// checked) accepts.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <random>

#include "gguf/gguf.h"
#include "structured/token_mask.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

namespace pc::structured {
namespace {

TEST(MaskWalk, CompletedWalksValidateAndNoneDeadEnds) {
  PC_SHARED_OR_SKIP(model, "models/stories260K.gguf");
  PC_SHARED_OR_SKIP(dir, "jsonschema");
  Result<GgufFile> gguf = GgufFile::Open(model);
  ASSERT_TRUE(gguf.ok());
  Result<Tokenizer> tok = Tokenizer::FromGguf(*gguf);
  ASSERT_TRUE(tok.ok());
  std::vector<std::string> pieces;
  for (int32_t id = 0; id < tok->n_vocab(); ++id) pieces.push_back(tok->Piece(id));
  TokenIndex index(std::move(pieces));
  MaskComputer masks(&index);
  TokenMask mask;
  std::mt19937 rng(5);
  const std::string out_path = test::TempPath("walks.jsonl");
  std::ofstream out(out_path);
  int walks = 0, completed = 0;
  for (const char* split : {"Github_easy", "Github_medium", "Glaiveai2K", "Kubernetes", "Snowplow", "BFCL"}) {
    std::ifstream f(dir + "/" + split + ".jsonl");
    std::string line;
    while (std::getline(f, line)) {
      nlohmann::ordered_json schema = nlohmann::ordered_json::parse(line)["schema"];
      auto compiled = CompileJsonSchema(schema);
      if (!compiled.ok()) continue;
#ifdef PROMPTCACHE_SANITIZER_BUILD
      const int per_schema = 1;  // the sanitizer tree is 5-10x slower
#else
      const int per_schema = 3;
#endif
      for (int w = 0; w < per_schema; ++w, ++walks) {
        JsonMatcher m(compiled->get(), 1);
        std::string text;
        for (int step = 0; step < 400 && !m.Complete(); ++step) {
          masks.Compute(m, &mask);
          std::vector<int32_t> allowed;
          for (int32_t id = 0; id < index.n_tokens(); ++id)
            if (MaskHas(mask, id)) allowed.push_back(id);
          if (allowed.empty()) {
            ASSERT_TRUE(m.CanEnd()) << "dead end in " << split << " after: " << text;
            break;
          }
          // Lean toward quotes and closers so that walks finish.
          int32_t pick = allowed[rng() % allowed.size()];
          for (int k = 0; k < 3; ++k) {
            const std::string& b = index.bytes(allowed[rng() % allowed.size()]);
            if (b == "\"" || b == "}" || b == "]" || b == ",") {
              pick = allowed[rng() % allowed.size()];
              if (index.bytes(pick) == b) break;
            }
          }
          ASSERT_TRUE(m.Consume(index.bytes(pick)));
          text += index.bytes(pick);
        }
        if (!m.CanEnd()) continue;
        ++completed;
        out << nlohmann::json{{"schema", nlohmann::json::parse(schema.dump())}, {"text", text}}.dump() << "\n";
      }
    }
  }
  out.close();
  EXPECT_GT(completed, walks / 4) << completed << " of " << walks;
  const std::string py = std::ifstream("/usr/bin/python3").good() ? "/usr/bin/python3" : "python3";
  int code = 0;
  const std::string res = test::RunCommand(py + " " PROMPTCACHE_TEST_DATA "/../structured/validate_instances.py < " + out_path, &code);
  ASSERT_EQ(code, 0) << res;
  nlohmann::json r = nlohmann::json::parse(res);
  EXPECT_EQ(r["checked"].get<int>(), completed);
  EXPECT_TRUE(r["invalid"].empty()) << r["invalid"].dump(1);
}

}  // namespace
}  // namespace pc::structured
