// Fixtures of the fj_copy GPU tests: a runtime shared by a suite, buffers
// on a GPU or in pinned host memory, random copy cases and their host
// reference (the semantics of runtime/copy/copy_request.h, written again
// independently, element by element).
#ifndef FLEETJIT_TESTS_RUNTIME_COPY_COPY_GPU_UTIL_H_
#define FLEETJIT_TESTS_RUNTIME_COPY_COPY_GPU_UTIL_H_

#include <cuda.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/copy/copy_engine.h"
#include "runtime/runtime.h"

namespace fleetjit::copy::testutil {

struct Dtype {
  fj_dl_dtype dl;
  int bytes;
  uint64_t nan;  // the copy layer's NaN pattern (0 for integers)
  bool is_float;
  const char* name;
};
extern const Dtype kF32, kF16, kBF16, kF64, kE4M3, kU8, kI16, kI32, kI64;

enum class Place { kDevice, kPinnedHost };

std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed);

// Device memory of the runtime (device >= 0) or pinned host memory; freed
// with the buffer.
struct Buffer {
  Runtime* rt = nullptr;
  int device = -1;
  bool host = false;
  uint64_t address = 0;
  uint64_t bytes = 0;
  Buffer() = default;
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  ~Buffer();
  void Upload(const std::vector<uint8_t>& data);
  std::vector<uint8_t> Download() const;
};

struct CopyCase {
  Dtype dtype = kF32;
  std::vector<int64_t> src_shape, src_strides;  // strides empty = compact
  std::vector<int64_t> dst_shape, dst_strides;
  std::array<int64_t, 5> start{};
  int oob = FJ_OOB_PROMISE_IN_BOUNDS;
  bool gather = false;
  std::vector<int64_t> index;
  int index_bits = 32;
  // A scatter (fj_copy_desc.scatter_index, since 1.4): window row i goes to
  // dst row scatter_index[i] (none outside dst); the window has
  // scatter_index.size() rows and dst's other extents.
  bool scatter = false;
  std::vector<int64_t> scatter_index;
  Place src_place = Place::kDevice, dst_place = Place::kDevice;
  int src_device = 0, dst_device = 0;

  static CopyCase Random(std::mt19937_64& rng, bool gather);
  // src and dst of `shape`, compact, no window: a driver copy.
  static CopyCase Dense(std::vector<int64_t> shape, const Dtype& dtype);
  std::string Describe() const;
};

class GpuFixture : public ::testing::Test {
 public:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  void SetUp() override;

  static Runtime& rt() { return *runtime_; }
  // The implementations device `d` can run (sync always; cp_async sm_80+;
  // tma sm_90+).
  std::vector<jit::CopyImpl> Impls(int d);
  Buffer Device(int d, uint64_t bytes);
  Buffer PinnedHost(uint64_t bytes);
  CUstream stream(int d);
  void Sync(int d);

  // Allocates and fills the case's buffers, copies, synchronises.
  absl::Status Run(const CopyCase& c, std::optional<jit::CopyImpl> impl,
                   bool force_kernel);
  // Run, then compares every dst element with the host reference and
  // checks that the bytes between dst's elements are still poisoned.
  void RunAndCheck(const CopyCase& c, std::optional<jit::CopyImpl> impl,
                   bool force_kernel);

 private:
  absl::Status RunInto(const CopyCase& c, std::optional<jit::CopyImpl> impl,
                       bool force_kernel, std::vector<uint8_t>* src_bytes,
                       std::vector<uint8_t>* dst_bytes);

  static std::unique_ptr<Runtime> runtime_;
  static std::map<int, CUstream> streams_;
};

// A kernel of the caller's (examples/tiled_copy.cu's) built for tma on GPU
// 0 reads a tensor owned by GPU 1 through a tensor map.
void ReadPeerTensorThroughTma(GpuFixture& fixture);

}  // namespace fleetjit::copy::testutil

#endif  // FLEETJIT_TESTS_RUNTIME_COPY_COPY_GPU_UTIL_H_
