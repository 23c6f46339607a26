#include "tools/cli_app.h"

#include <algorithm>

#include "absl/strings/str_split.h"

namespace fleetjit::cli {

std::optional<int> ParseCommandLine(CLI::App& app,
                                    std::vector<std::string> args,
                                    std::FILE* help_out) {
  std::reverse(args.begin(), args.end());  // CLI11 takes them last-first
  try {
    app.parse(args);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), help_out);
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), help_out);
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s\nRun '%s --help' for the options.\n",
                 app.get_name().c_str(), e.what(), app.get_name().c_str());
    return kExitUsage;
  }
  return std::nullopt;
}

std::string DumpJson(const nlohmann::ordered_json& j) {
  return j.dump(-1, ' ', /*ensure_ascii=*/false,
                nlohmann::ordered_json::error_handler_t::replace);
}

std::vector<std::string> SplitComma(const std::string& s) {
  return absl::StrSplit(s, ',', absl::SkipEmpty());
}

}  // namespace fleetjit::cli
