#include "base/log.h"

#include <cstdio>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace fleetjit {

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text) {
  const std::string t = absl::AsciiStrToLower(text);
  for (LogLevel l : {LogLevel::kOff, LogLevel::kError, LogLevel::kWarn,
                     LogLevel::kInfo, LogLevel::kDebug}) {
    if (t == LogLevelName(l)) return l;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "log level '", text, "': expected off, error, warn, info or debug"));
}

const char* LogLevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kOff:
      return "off";
    case LogLevel::kError:
      return "error";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kDebug:
      return "debug";
  }
  return "unknown";
}

LogSink StderrLogSink() {
  return [](LogLevel level, absl::string_view message) {
    std::string line =
        absl::StrCat("fleetjit: ", LogLevelName(level), ": ", message, "\n");
    std::fputs(line.c_str(), stderr);  // one call: lines do not interleave
  };
}

Logger::Logger(LogLevel level, LogSink sink)
    : level_(level),
      sink_(sink ? std::make_shared<const LogSink>(std::move(sink)) : nullptr) {
}

void Logger::Log(LogLevel level, absl::string_view message) const {
  if (!Enabled(level)) return;
  try {
    (*sink_)(level, message);
  } catch (...) {
    // A caller's sink must not take the library down with it.
  }
}

}  // namespace fleetjit
