// promptcache demo: the README's main job. Makes the default benchmark model
// once (cached), serves it in-process, runs the rag and chat shapes with the
// cache on and off through the load generator (over HTTP), and prints the
// table: caching cuts TTFT on rag, barely touches chat, ITL flat on both.
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "base/clock.h"
#include "commands.h"
#include <ctime>
#include <thread>

#include "bench_driver.h"
#include "server/server.h"
#include "model/sequence.h"
#include "model/make_model.h"

namespace pc::cli {
namespace {

struct DemoFlags {
  std::string model, cache_dir;
  int threads = 0;
  size_t rag_doc_tokens = 2000, rag_docs = 2, rag_requests = 6, chat_requests = 3;
};

std::string DefaultCacheDir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/promptcache";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/promptcache";
  return ".promptcache-cache";
}

Result<std::string> EnsureDefaultModel(const std::string& dir) {
  const std::string path = dir + "/bench-135m-q8_0.gguf";
  if (std::filesystem::exists(path)) return path;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Errorf("cannot create '{}': {}", dir, ec.message());
  std::fprintf(stderr, "making the default model %s (once)...\n", path.c_str());
  MakeModelOptions opt;
  PC_ASSIGN_OR_RETURN(opt.shape, BuiltinShape("bench-135m"));
  opt.type = TensorType::kQ8_0;
  PC_RETURN_IF_ERROR(MakeModel(opt, path));
  return path;
}

// One workload, A/B against the in-process server.
Result<BenchOutcome> DemoRun(const loadgen::Target& t, const std::string& workload, const DemoFlags& f,
                             const std::string& html) {
  BenchConfig cfg;
  cfg.workload = workload;
  PC_ASSIGN_OR_RETURN(cfg.shape, loadgen::DefaultShape(workload));
  if (workload == "rag") {
    cfg.shape.doc_tokens = f.rag_doc_tokens;
    cfg.shape.num_docs = f.rag_docs;
    cfg.shape.num_requests = f.rag_requests;
  } else {
    cfg.shape.num_requests = f.chat_requests;
  }
  cfg.shape.seed = static_cast<uint64_t>(std::time(nullptr));  // fresh documents: the first sight is a real miss
  cfg.ab = true;
  cfg.warmup_requests = 1;
  cfg.html_path = html;
  cfg.title = "promptcache demo: " + workload;
  std::fprintf(stderr, "%s: %zu requests, each with the cache on and off...\n", workload.c_str(), cfg.shape.num_requests);
  return RunBench(t, cfg);
}

int Demo(const DemoFlags& f) {
  const std::string dir = f.cache_dir.empty() ? DefaultCacheDir() : f.cache_dir;
  std::string path = f.model;
  if (path.empty()) {
    Result<std::string> p = EnsureDefaultModel(dir);
    if (!p.ok()) return Fail(p.status().message());
    path = *p;
  }
  Result<std::unique_ptr<Model>> model = Model::Load(path, f.threads);
  if (!model.ok()) return Fail(model.status().message());
  Result<Tokenizer> tok = Tokenizer::FromGguf((*model)->gguf());
  if (!tok.ok()) return Fail(tok.status().message());
  const ModelConfig& c = (*model)->config();
  std::printf("model %s: %d layers, n_embd %d, %d heads (%d KV), vocab %d; ISA %s, %d threads\n", path.c_str(),
              c.n_layer, c.n_embd, c.n_head, c.n_kv_head, c.n_vocab, IsaName(*ActiveIsa()), (*model)->pool().num_threads());
  std::fflush(stdout);
  Engine engine(**model, *tok, EngineOptions{});
  ServerOptions so;
  so.port = 0;
  Server server(engine, *tok, so);
  Result<int> port = server.Bind();
  if (!port.ok()) return Fail(port.status().message());
  std::thread http([&] { server.Run(); });
  loadgen::Target t;
  t.port = *port;
  struct Row {
    std::string workload;
    Result<BenchOutcome> out;
  };
  std::vector<Row> rows;
  for (const char* w : {"rag", "chat"}) rows.push_back({w, DemoRun(t, w, f, dir + "/demo-" + w + ".html")});
  server.Stop();
  http.join();
  std::printf("\n%-6s %-10s %10s %9s %10s %8s\n", "shape", "arm", "TTFT p50", "ITL p50", "E2E p50", "cached");
  for (const Row& r : rows) {
    if (!r.out.ok()) return Fail(r.workload + ": " + r.out.status().message());
    for (const loadgen::Group& g : r.out->groups) {
      if (g.name != "cache on" && g.name != "cache off") continue;
      std::printf("%-6s %-10s %8.0f ms %6.1f ms %8.0f ms %7.1f%%\n", r.workload.c_str(), g.name.c_str(), g.ttft_ms.p50,
                  g.itl_ms.p50, g.e2e_ms.p50, g.cached_fraction * 100);
    }
  }
  for (const Row& r : rows) {
    std::printf("\n%s: %s\n", r.workload.c_str(), r.out->verdict.text.c_str());
    std::printf("report: %s/demo-%s.html\n", dir.c_str(), r.workload.c_str());
  }
  return 0;
}

}  // namespace

void RegisterDemo(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<DemoFlags>();
  CLI::App* c = app.add_subcommand("demo", "Serve the default model (made once) in-process and show what caching does to TTFT and ITL");
  c->add_option("-m,--model", f->model, "Use this model instead of the built-in default");
  c->add_option("--cache-dir", f->cache_dir, "Where the default model is kept (default ~/.cache/promptcache)");
  c->add_option("--rag-doc-tokens", f->rag_doc_tokens, "rag: tokens per shared document");
  c->add_option("--rag-docs", f->rag_docs, "rag: shared documents");
  c->add_option("--rag-requests", f->rag_requests, "rag: questions (spread over the documents)");
  c->add_option("--chat-requests", f->chat_requests, "chat: requests (200-token prompts, 400-token answers)");
  c->add_option("-t,--threads", f->threads, "Threads (default: physical cores)");
  c->callback([f, exit_code] { *exit_code = Demo(*f); });
}

}  // namespace pc::cli
