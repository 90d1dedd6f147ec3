#include <unistd.h>

#include <cstdio>
#include <new>

#include "commands.h"

namespace pc::cli {
int Fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
}

std::string KvMemoryProblem(size_t bytes) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (bytes == 0 || pages <= 0 || page <= 0) return "";
  const double ram = static_cast<double>(pages) * static_cast<double>(page);
  if (static_cast<double>(bytes) <= ram) return "";
  char msg[200];
  std::snprintf(msg, sizeof msg, "--kv-cache-mem %zu bytes (%.1f GiB) is more than this machine's RAM (%.1f GiB)", bytes,
                static_cast<double>(bytes) / (1 << 30), ram / (1 << 30));
  return msg;
}
}  // namespace pc::cli

int main(int argc, char** argv) {
  CLI::App app{"promptcache: LLM inference with prefix (prompt) KV caching"};
  app.require_subcommand(1);
  int exit_code = 0;
  pc::cli::RegisterRun(app, &exit_code);
  pc::cli::RegisterTokenize(app, &exit_code);
  pc::cli::RegisterInspect(app, &exit_code);
  pc::cli::RegisterMakeModel(app, &exit_code);
  pc::cli::RegisterDemo(app, &exit_code);
  pc::cli::RegisterBenchPrefix(app, &exit_code);
  pc::cli::RegisterServe(app, &exit_code);
  pc::cli::RegisterBench(app, &exit_code);
  pc::cli::RegisterBenchTiers(app, &exit_code);
  pc::cli::RegisterCalibrate(app, &exit_code);
  pc::cli::RegisterAdvise(app, &exit_code);
  pc::cli::RegisterBenchModel(app, &exit_code);
  pc::cli::RegisterTemplate(app, &exit_code);
  pc::cli::RegisterJsonSchemaCheck(app, &exit_code);
  try {
    CLI11_PARSE(app, argc, argv);
  } catch (const std::bad_alloc&) {
    // A size given on the command line (a pool, a context) that the
    // machine cannot hold: say so instead of aborting.
    return pc::cli::Fail("out of memory: a buffer this command needs could not be allocated (see --kv-cache-mem, -c)");
  }
  return exit_code;
}
