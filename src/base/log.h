// Minimal leveled logging to stderr. Thread-safe (one fprintf per line).
#pragma once
#include <fmt/format.h>

#include <string>

namespace pc {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
void SetLogLevel(LogLevel level);
LogLevel GetLogLevel();
void LogLine(LogLevel level, const std::string& line);

template <typename... Args>
void LogInfo(fmt::format_string<Args...> f, Args&&... args) {
  if (GetLogLevel() <= LogLevel::kInfo) LogLine(LogLevel::kInfo, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void LogWarn(fmt::format_string<Args...> f, Args&&... args) {
  if (GetLogLevel() <= LogLevel::kWarn) LogLine(LogLevel::kWarn, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace pc
