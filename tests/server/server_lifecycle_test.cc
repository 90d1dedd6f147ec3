// Server start and stop: Stop may come at any moment relative to Run (a
// signal right after start, a test that never sends a request), and Run
// must then return instead of listening forever.
#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

#include "server/server.h"
#include "test_model.h"

namespace pc {
namespace {

// Runs `server.Run()` on a thread and reports whether it returned within
// 20 s of `stop` (called `stop_delay_us` after the thread starts).
bool RunReturnsAfterStop(Server& server, int stop_delay_us) {
  std::promise<void> returned;
  std::future<void> done = returned.get_future();
  std::thread runner([&] {
    server.Run();
    returned.set_value();
  });
  std::this_thread::sleep_for(std::chrono::microseconds(stop_delay_us));
  server.Stop();
  const bool ok = done.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  if (ok) runner.join();
  else runner.detach();  // the failure is reported; the process ends with the test binary
  return ok;
}

TEST(ServerLifecycle, StopAtAnyMomentEndsRun) {
  test::MadeModel m = test::MakeTestModel({"life", 64, 1, 2, 2, 128, true, 256}, TensorType::kF32, 256);
  // Stop before Run starts, while it starts, and after it listens.
  for (int delay_us : {0, 0, 0, 50, 200, 1000, 20000}) {
    EngineOptions eo;
    eo.cache.mem_bytes = 4 << 20;
    Engine engine(*m.model, *m.tok, eo);
    ServerOptions so;
    so.port = 0;
    Server server(engine, *m.tok, so);
    ASSERT_TRUE(server.Bind().ok());
    ASSERT_TRUE(RunReturnsAfterStop(server, delay_us)) << "Stop " << delay_us << " us after Run's thread started";
  }
  // Stop first, Run later: Run returns at once.
  EngineOptions eo;
  Engine engine(*m.model, *m.tok, eo);
  ServerOptions so;
  so.port = 0;
  Server server(engine, *m.tok, so);
  ASSERT_TRUE(server.Bind().ok());
  server.Stop();
  auto run = std::async(std::launch::async, [&] { server.Run(); });
  EXPECT_EQ(run.wait_for(std::chrono::seconds(20)), std::future_status::ready);
}

}  // namespace
}  // namespace pc
