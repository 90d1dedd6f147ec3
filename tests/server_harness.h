// A Server on an ephemeral port with its own engine, serving on a thread
// until destroyed. For tests only.
#pragma once
#include <httplib.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/check.h"
#include "server/server.h"
#include "test_support.h"

namespace pc::test {

struct Harness {
  Harness(Model& model, const Tokenizer& tok, EngineOptions eo, ServerOptions so) {
    so.port = 0;
    engine = std::make_unique<Engine>(model, tok, eo);
    server = std::make_unique<Server>(*engine, tok, so);
    Result<int> p = server->Bind();
    PC_CHECK(p.ok());
    port = *p;
    thread = std::thread([this] { server->Run(); });
  }
  ~Harness() {
    server->Stop();
    thread.join();
  }
  httplib::Client Client() const {
    httplib::Client c("127.0.0.1", port);
    c.set_read_timeout(120, 0);
    return c;
  }
  std::unique_ptr<Engine> engine;
  std::unique_ptr<Server> server;
  int port = 0;
  std::thread thread;
};

// A suite served by one Harness on stories260K (loaded once), skipped when
// ../shared is absent (failed under PROMPTCACHE_REQUIRE_SHARED=1).
class StoriesServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = SharedPath("models/stories260K.gguf");
    if (path.empty() || model_ != nullptr) return;
    auto m = Model::Load(path, 2);
    PC_CHECK(m.ok());
    model_ = std::move(*m).release();
    auto t = Tokenizer::FromGguf(model_->gguf());
    PC_CHECK(t.ok());
    tok_ = new Tokenizer(std::move(*t));
    EngineOptions eo;
    eo.cache.mem_bytes = 64 << 20;
    harness_ = new Harness(*model_, *tok_, eo, ServerOptions{});
  }
  void SetUp() override {
    if (model_ == nullptr) {
      if (RequireShared()) FAIL() << "shared model missing";
      GTEST_SKIP() << "../shared absent";
    }
  }
  inline static Model* model_ = nullptr;
  inline static Tokenizer* tok_ = nullptr;
  inline static Harness* harness_ = nullptr;
};

// The JSON payloads of an SSE body, up to "data: [DONE]".
inline std::vector<nlohmann::json> SsePayloads(const std::string& sse) {
  std::vector<nlohmann::json> out;
  for (size_t pos = 0; (pos = sse.find("data: ", pos)) != std::string::npos;) {
    const size_t end = sse.find("\n\n", pos);
    const std::string payload = sse.substr(pos + 6, end == std::string::npos ? std::string::npos : end - pos - 6);
    pos = end;
    if (payload == "[DONE]") break;
    out.push_back(nlohmann::json::parse(payload));
    if (end == std::string::npos) break;
  }
  return out;
}

// Validates (schema, text) pairs with python3-jsonschema, an independent
// validator (tests/structured/validate_instances.py); the invalid ones.
inline nlohmann::json ValidateJson(const std::vector<std::pair<nlohmann::json, std::string>>& cases) {
  const std::string in = TempPath("instances.jsonl");
  std::ofstream f(in);
  for (const auto& [schema, text] : cases) f << nlohmann::json{{"schema", schema}, {"text", text}}.dump() << "\n";
  f.close();
  // Debian's interpreter (python3-jsonschema) when there, else the PATH's.
  const std::string py = std::ifstream("/usr/bin/python3").good() ? "/usr/bin/python3" : "python3";
  int code = 0;
  std::string out = RunCommand(py + " " PROMPTCACHE_TEST_DATA "/../structured/validate_instances.py < " + in, &code);
  EXPECT_EQ(code, 0) << out;
  nlohmann::json r = nlohmann::json::parse(out, nullptr, false);
  EXPECT_FALSE(r.is_discarded()) << out;
  EXPECT_EQ(r["checked"].get<size_t>(), cases.size());
  return r["invalid"];
}

}  // namespace pc::test
