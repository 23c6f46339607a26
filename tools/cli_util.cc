#include "tools/cli_util.h"

#include <cstring>
#include <fstream>
#include <sstream>

namespace fleetjit::cli {

fj_str Str(const std::string& s) { return fj_str{s.data(), s.size()}; }
fj_str Str(const char* s) { return fj_str{s, std::strlen(s)}; }

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out;
}

std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

bool Failed(fj_status* status, const char* what) {
  if (status == nullptr) return false;
  std::fprintf(stderr, "fleetjit: %s: %s: %s\n", what,
               fj_code_name(fj_status_code(status)),
               fj_status_message(status, nullptr));
  fj_status_free(status);
  return true;
}

std::string TakeFlag(std::vector<std::string>& args, const std::string& name,
                     bool* present) {
  if (present) *present = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name && i + 1 < args.size()) {
      std::string v = args[i + 1];
      args.erase(args.begin() + i, args.begin() + i + 2);
      if (present) *present = true;
      return v;
    }
    if (args[i].rfind(name + "=", 0) == 0) {
      std::string v = args[i].substr(name.size() + 1);
      args.erase(args.begin() + i);
      if (present) *present = true;
      return v;
    }
  }
  return "";
}

bool TakeSwitch(std::vector<std::string>& args, const std::string& name) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == name) {
      args.erase(args.begin() + i);
      return true;
    }
  }
  return false;
}

fj_runtime* CreateRuntime() {
  fj_runtime* rt = nullptr;
  if (Failed(fj_runtime_create(nullptr, &rt), "creating the runtime")) return nullptr;
  return rt;
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

}  // namespace fleetjit::cli
