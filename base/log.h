// Log lines through the caller.
//
// The library writes nothing to stderr on its own: a server owns its
// stderr. Messages (a TMA fallback, a refused cache entry, a background
// failure) go to the sink the caller installed (fj_runtime_options.log), at
// or above its level. FLEETJIT_LOG=off|error|warn|info|debug overrides the
// level; when it is set and the caller installed no sink, lines go to
// stderr, because then the user asked for them there.
//
//   Logger log(LogLevel::kWarn, [](LogLevel l, absl::string_view m) {...});
//   if (log.Enabled(LogLevel::kInfo)) log.Log(LogLevel::kInfo, "...");
#ifndef FLEETJIT_BASE_LOG_H_
#define FLEETJIT_BASE_LOG_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fleetjit {

// Values match fj_log_level in <fleetjit/fleetjit.h>.
enum class LogLevel : int {
  kOff = 0,
  kError = 1,
  kWarn = 2,
  kInfo = 3,
  kDebug = 4
};

using LogSink = std::function<void(LogLevel, absl::string_view)>;

// "off", "error", "warn", "info" or "debug" (any case); INVALID_ARGUMENT
// naming the accepted words otherwise.
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view text);
const char* LogLevelName(LogLevel level);

// A sink that writes "fleetjit: <level>: <message>\n" to stderr in one call.
LogSink StderrLogSink();

// Thread-safe after construction; copies share the sink.
class Logger {
 public:
  Logger() = default;  // logs nothing
  Logger(LogLevel level, LogSink sink);

  bool Enabled(LogLevel level) const {
    return sink_ != nullptr && level != LogLevel::kOff &&
           static_cast<int>(level) <= static_cast<int>(level_);
  }
  // Sends `message` to the sink if `level` is enabled. A sink that throws
  // is not called again for this line; nothing escapes.
  void Log(LogLevel level, absl::string_view message) const;
  LogLevel level() const { return level_; }

 private:
  LogLevel level_ = LogLevel::kOff;
  std::shared_ptr<const LogSink> sink_;
};

}  // namespace fleetjit

#endif  // FLEETJIT_BASE_LOG_H_
