// Subcommand registration. Each Register* adds a CLI11 subcommand whose
// callback sets *exit_code; frontends only map flags to library calls.
#pragma once
#include <CLI/CLI.hpp>

#include <cstddef>
#include <string>

namespace pc::cli {

void RegisterRun(CLI::App& app, int* exit_code);
void RegisterTokenize(CLI::App& app, int* exit_code);
void RegisterInspect(CLI::App& app, int* exit_code);
void RegisterMakeModel(CLI::App& app, int* exit_code);
void RegisterDemo(CLI::App& app, int* exit_code);
void RegisterBenchPrefix(CLI::App& app, int* exit_code);
void RegisterServe(CLI::App& app, int* exit_code);
void RegisterBench(CLI::App& app, int* exit_code);
void RegisterBenchTiers(CLI::App& app, int* exit_code);
void RegisterCalibrate(CLI::App& app, int* exit_code);
void RegisterAdvise(CLI::App& app, int* exit_code);
void RegisterBenchModel(CLI::App& app, int* exit_code);
void RegisterTemplate(CLI::App& app, int* exit_code);
void RegisterJsonSchemaCheck(CLI::App& app, int* exit_code);

// Prints "error: msg" to stderr and returns 1.
int Fail(const std::string& message);

// Empty when a KV pool of `bytes` (0: the default, sized from free RAM) can
// be made on this machine; else why not. The pool is made resident at start,
// so a size beyond physical RAM would end in std::bad_alloc or the OOM killer.
std::string KvMemoryProblem(size_t bytes);

}  // namespace pc::cli
