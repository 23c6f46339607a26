// A fresh directory for one test, removed with everything in it when the
// TempDir goes. Under $TMPDIR when set (else /tmp), named
// <prefix>.XXXXXX; path() is "" when mkdtemp failed.
#ifndef FLEETJIT_TESTS_COMMON_TEMP_DIR_H_
#define FLEETJIT_TESTS_COMMON_TEMP_DIR_H_

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

namespace fleetjit::testing {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "fj_test") {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base ? base : "/tmp") + "/" + prefix +
        ".XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    if (::mkdtemp(buffer.data()) != nullptr) path_ = buffer.data();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // `name` inside the directory.
  std::string Sub(const std::string& name) const { return path_ + "/" + name; }
  // Writes `text` to `rel` inside the directory, creating its folders.
  void Write(const std::string& rel, const std::string& text) const {
    std::filesystem::create_directories(
        std::filesystem::path(Sub(rel)).parent_path());
    std::ofstream(Sub(rel)) << text;
  }

 private:
  std::string path_;
};

}  // namespace fleetjit::testing

#endif  // FLEETJIT_TESTS_COMMON_TEMP_DIR_H_
