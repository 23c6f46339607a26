// The newcomer corpus's manifests (bench/corpus/README.md) in C++, for
// `fleetjit bench kernels --corpus` (tools/bench_corpus.cc) and the CI test
// that builds and checks every manifest (tests/tools/corpus_test.cc).
// bench/corpus/corpus.py reads the same files for run.py: both accept the
// same manifests and evaluate expressions alike (tests/data/
// corpus_expr_cases.json holds the cases both tests check).
//
//   LoadSets(FindSets(dirs))      every manifest, checked for keys and types
//   Resolve(manifest, size, sms)  one size: every expression evaluated and
//                                 checked (shapes, bytes, launches, args)
//   LaunchArgs / BuildRequest     the C ABI's fj_arg list and fj_build_options
//                                 of a resolved launch
#ifndef FLEETJIT_TOOLS_CORPUS_H_
#define FLEETJIT_TOOLS_CORPUS_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fleetjit/fleetjit.h"

namespace fleetjit::cli::corpus {

// A number of the expression language: a 64-bit integer or a double, with
// Python's rules (int op int stays int except /, which gives a double).
struct Value {
  bool is_int = true;
  int64_t i = 0;
  double d = 0;
  static Value Int(int64_t v) { return {true, v, 0}; }
  static Value Float(double v) { return {false, 0, v}; }
  double AsDouble() const { return is_int ? static_cast<double>(i) : d; }
};
using Env = std::map<std::string, Value, std::less<>>;

// The value of `expr` over `env`: integers and decimal floats, names, + - *
// / // %, unary + and -, parentheses, min(a, b, ...), max(a, b, ...),
// cdiv(a, b). An error (INVALID_ARGUMENT) quotes the expression and says
// what is wrong: an unknown name, division by zero, a result outside 64
// bits, a syntax error with its column.
absl::StatusOr<Value> Evaluate(absl::string_view expr, const Env& env);
// A JSON number or an expression string.
absl::StatusOr<Value> EvaluateJson(const nlohmann::ordered_json& j,
                                   const Env& env);
// A define's value as -DNAME=<text>: integers as they are, doubles as the
// shortest text that reads back the same (Python's repr).
std::string DefineText(const Value& v);

struct Dtype {
  const char* name;  // "bf16"
  int bytes;
  char kind;  // 'f' floating point, 'i' signed, 'u' unsigned integer
  uint8_t dl_code;
  uint8_t dl_bits;
};
const Dtype* FindDtype(absl::string_view name);
// Every dtype of the manifest format, in its order.
const std::vector<Dtype>& Dtypes();

struct Buffer {
  std::string name;
  const Dtype* dtype = nullptr;
  std::vector<int64_t> shape;
  int64_t numel = 1;
  uint64_t bytes = 0;
  std::string init;  // "" for a pure output: poisoned before each run
  std::vector<int64_t> init_args;
  bool output = false;
  double atol = 0, rtol = 0;
};

struct Arg {
  enum Kind { kBuffer, kTensor, kI32, kI64, kF32 } kind = kBuffer;
  std::string buffer;          // kBuffer, kTensor
  std::vector<int64_t> shape;  // kTensor: the buffer's shape, or its view
  std::vector<int64_t> box;    // kTensor: outermost-first (may be shorter)
  fj_oob oob = FJ_OOB_PROMISE_IN_BOUNDS;
  fj_swizzle swizzle = FJ_SWIZZLE_NONE;
  int64_t i = 0;  // kI32, kI64
  double f = 0;   // kF32
};

struct Launch {
  std::string source_path;  // the .cu beside the manifest
  std::string kernel;
  uint32_t grid[3] = {1, 1, 1}, block[3] = {1, 1, 1};
  uint32_t smem = 0;
  std::vector<std::string> defines;  // "-DNAME=VALUE"
  std::vector<Arg> args;
};

struct Manifest {
  std::string path, dir;
  std::string set;  // the folder's name
  std::string name, what;
  nlohmann::ordered_json data;
  std::vector<std::pair<std::string, Env>> sizes;  // label, vars
  std::string id() const { return set + "/" + name; }
};

// A manifest at one size, every expression evaluated and checked.
struct Problem {
  std::string label;
  Env env;  // the size's vars and sms
  std::vector<Buffer> buffers;
  uint64_t bytes = 0;
  Launch layer, plain;
  const Buffer* Find(absl::string_view name) const;
};

// Checks a parsed manifest's keys and types (and that its sources exist
// beside `path`); the error names the key.
absl::StatusOr<Manifest> CheckManifest(nlohmann::ordered_json data,
                                       const std::string& path);
// Reads and checks the manifest at `path`; errors start with the path.
absl::StatusOr<Manifest> LoadManifest(const std::string& path);
// The manifest at size `size` (an index of m.sizes) on `sms` SMs.
absl::StatusOr<Problem> Resolve(const Manifest& m, size_t size, int sms);

// The set folders: each of `dirs` that holds *.json is a set, any other is
// a corpus root whose set*/ subfolders are sets (sorted). NOT_FOUND for a
// folder that does not exist.
absl::StatusOr<std::vector<std::string>> FindSets(
    const std::vector<std::string>& dirs);
// Every manifest of the sets (sorted by folder, then file name).
absl::StatusOr<std::vector<Manifest>> LoadSets(
    const std::vector<std::string>& sets);

// The fj_arg array of a resolved launch over device buffers (address by
// buffer name) on `device`; owns the fj_tensor / fj_tensor_arg storage the
// array points to.
class LaunchArgs {
 public:
  static absl::StatusOr<std::unique_ptr<LaunchArgs>> Make(
      const Problem& p, const Launch& launch,
      const std::map<std::string, uint64_t>& addresses, int device);
  const std::vector<fj_arg>& args() const { return args_; }

 private:
  LaunchArgs() = default;
  std::vector<fj_arg> args_;
  std::deque<std::vector<int64_t>> shapes_;
  std::deque<fj_tensor> tensors_;
  std::deque<fj_tensor_arg> tensor_args_;
};

// fj_build_options of a launch for a target ("" = the device's) and copy
// implementation (AUTO for a plain twin), owning the strings it points to.
class BuildRequest {
 public:
  static absl::StatusOr<std::unique_ptr<BuildRequest>> Make(
      const Launch& launch, const std::string& target, fj_copy_impl impl,
      fj_output output = FJ_OUTPUT_AUTO);
  const fj_build_options& options() const { return options_; }
  // source path, defines, target, impl: one build per distinct key.
  std::string Key() const { return key_; }

 private:
  BuildRequest() = default;
  std::string source_, name_, target_, key_;
  std::vector<std::string> defines_;
  std::vector<fj_str> define_strs_;
  fj_build_options options_{};
};

}  // namespace fleetjit::cli::corpus

#endif  // FLEETJIT_TOOLS_CORPUS_H_
