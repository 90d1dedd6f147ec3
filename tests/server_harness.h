// A Server on an ephemeral port with its own engine, serving on a thread
// until destroyed. For tests only.
#pragma once
#include <httplib.h>

#include <memory>
#include <thread>

#include "base/check.h"
#include "server/server.h"

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

}  // namespace pc::test
