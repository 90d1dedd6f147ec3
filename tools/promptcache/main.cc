#include <cstdio>

#include "commands.h"

namespace pc::cli {
int Fail(const std::string& message) {
  std::fprintf(stderr, "error: %s\n", message.c_str());
  return 1;
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
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
