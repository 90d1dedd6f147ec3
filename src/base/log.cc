#include "base/log.h"

#include <atomic>
#include <cstdio>

namespace pc {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
}

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }
LogLevel GetLogLevel() { return static_cast<LogLevel>(g_level.load()); }

void LogLine(LogLevel level, const std::string& line) {
  static const char* kNames[] = {"debug", "info", "warn", "error"};
  std::fprintf(stderr, "[%s] %s\n", kNames[static_cast<int>(level)], line.c_str());
}

}  // namespace pc
