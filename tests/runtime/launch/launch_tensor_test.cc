// Tensor parameters on a real GPU: what the kernel receives matches a fresh
// host encoding (TMA maps where the tensor allows one, the fallbacks where
// it does not), and tiles copied through the copy layer under each
// implementation, on both launch paths. Without a GPU every test skips and
// says why.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/launch/tensor_encoder.h"
#include "tests/common/gpu_fixture.h"

namespace fleetjit::testing {
namespace {

// Launches tensor_echo on `t` and checks the parameter the kernel received
// and the elements it gathered against the host's view.
void CheckTensorEcho(LoadedKernel* k, HostTensor& t,
                     const std::vector<float>& storage, bool expect_tmap,
                     CUstream stream = nullptr) {
  int64_t total = 1;
  for (int64_t d : t.shape) total *= d;
  DeviceBuffer raw(320), gathered(total * 4);
  raw.Poison(0xEE);
  gathered.Poison(0xEE);
  absl::Status s = LaunchArgs(
      k, Config(4, 128), stream,
      {TensorArg(&t.arg), PtrArg(raw.address()), PtrArg(gathered.address())});
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE(Sync(stream, "tensor_echo").ok());
  std::vector<uint8_t> got_raw = raw.Download<uint8_t>(320);
  fj::tensor_param got;
  std::memcpy(&got, got_raw.data(), 320);
  // What the host encodes for the same tensor (uncached).
  TensorEncoder reference(GetGpu().api, "reference", nullptr, nullptr);
  reference.set_cache_enabled(false);
  fj::tensor_param want;
  ASSERT_TRUE(reference.Encode(0, &t.arg, 0, -1, k->copy_impl, &want).ok());
  EXPECT_EQ(got.data, want.data);
  EXPECT_EQ(got.rank, want.rank);
  EXPECT_EQ(got.dtype, want.dtype);
  EXPECT_EQ(got.flags, want.flags);
  EXPECT_EQ(got.flags == FJ_TP_HAS_TMAP, expect_tmap);
  for (int d = 0; d < 5; ++d) {
    EXPECT_EQ(got.shape[d], want.shape[d]) << d;
    EXPECT_EQ(got.stride[d], want.stride[d]) << d;
    EXPECT_EQ(got.box[d], want.box[d]) << d;
  }
  EXPECT_EQ(std::memcmp(got.tmap, want.tmap, 128), 0)
      << "the tensor map the kernel received differs from a fresh host "
         "encoding";
  // Logical element i, dimension 0 (DLPack's last) fastest.
  std::vector<float> g = gathered.Download<float>(total);
  const uint64_t base =
      reinterpret_cast<uintptr_t>(t.tensor.data) + t.tensor.byte_offset;
  const uint64_t storage_base = reinterpret_cast<uintptr_t>(t.tensor.data);
  const int n = static_cast<int>(t.shape.size());
  // NULL strides (an empty vector here) mean compact row-major.
  std::vector<int64_t> strides = t.strides;
  if (strides.empty()) {
    strides.assign(n, 1);
    for (int d = n - 2; d >= 0; --d)
      strides[d] = strides[d + 1] * t.shape[d + 1];
  }
  for (int64_t i = 0; i < total; ++i) {
    int64_t rem = i, off = 0;
    for (int d = n - 1; d >= 0; --d) {
      off += (rem % t.shape[d]) * strides[d];
      rem /= t.shape[d];
    }
    const int64_t index = static_cast<int64_t>((base - storage_base) / 4) + off;
    ASSERT_EQ(g[i], storage[index]) << "element " << i;
  }
}

TEST(LaunchGpu, TensorParametersAndFallbacks) {
  REQUIRE_GPU();
  std::mt19937_64 rng = SeededRng("TensorParametersAndFallbacks");
  for (bool thunk : {true, false}) {
    SCOPED_TRACE(thunk ? "thunk" : "generic");
    ASSIGN_OR_FAIL(LoadedKernel * k,
                   LoadKernel({"tensor_echo", {}, {}, thunk}));
    const bool tma = k->copy_impl == jit::CopyImpl::kTma;
    const size_t elems = 5 * 6 * 8 + 64;
    std::vector<float> storage = RandomInts(rng, elems, 1000);
    DeviceBuffer d(elems * 4);
    d.Upload(storage);
    HostTensor t;
    // [5, 6, 7] f32 with rows padded to 8 (32 B): TMA can describe it
    // with a {1, 2, 4} box.
    t.Set(d.address(), {5, 6, 7}, {48, 8, 1}, {1, 2, 4});
    CheckTensorEcho(k, t, storage, tma);
    // The whole extent as the box: 7 x 4 = 28 bytes is no multiple of 16.
    const uint64_t before = k->tma_fallbacks.load();
    t.Set(d.address(), {5, 6, 7}, {48, 8, 1}, {0, 0, 0});
    CheckTensorEcho(k, t, storage, false);
    // A transposed view: the innermost stride is not 1.
    t.Set(d.address(), {7, 6}, {1, 8}, {4, 4});
    CheckTensorEcho(k, t, storage, false);
    // Compact strides (NULL) and an offset of one row.
    t.Set(d.address(), {4, 8}, {}, {2, 8});
    t.tensor.byte_offset = 32;
    CheckTensorEcho(k, t, storage, tma);
    if (tma) {
      EXPECT_EQ(k->tma_fallbacks.load(), before + 2);
    }
  }
}

TEST(LaunchGpu, TileCopyThroughTheLayerUnderEachImplementation) {
  REQUIRE_GPU();
  std::mt19937_64 rng = SeededRng("TileCopyThroughTheLayer");
  const int arch = GetGpu().device->facts().arch();
  std::vector<jit::CopyImpl> impls = {jit::CopyImpl::kSync};
  if (arch >= 80) impls.push_back(jit::CopyImpl::kCpAsync);
  if (arch >= 90) impls.push_back(jit::CopyImpl::kTma);
  for (jit::CopyImpl impl : impls) {
    for (bool thunk : {true, false}) {
      ASSIGN_OR_FAIL(LoadedKernel * k,
                     LoadKernel({"tile_add", {}, impl, thunk}));
      // 72 columns: 288-byte rows (TMA); 70 columns: 280-byte rows (cp.async).
      for (int cols : {72, 70}) {
        SCOPED_TRACE(absl::StrCat(jit::CopyImplName(impl),
                                  thunk ? " thunk" : " generic",
                                  " cols=", cols));
        const int rows = 50 + static_cast<int>(rng() % 60);
        std::vector<float> in = RandomInts(rng, rows * cols, 100);
        TileOperands ops(in, rows, cols);
        const float add = static_cast<float>(1 + rng() % 9);
        fj_launch_config cfg = Config((cols + 31) / 32, 128);
        cfg.grid[1] = (rows + 15) / 16;
        absl::Status s = LaunchArgs(
            k, cfg, nullptr,
            {TensorArg(&ops.tin.arg), TensorArg(&ops.tout.arg), F32Arg(add)});
        ASSERT_TRUE(s.ok()) << s;
        ASSERT_TRUE(Sync(nullptr, "tile_add").ok());
        std::vector<float> got = ops.dout.Download<float>(rows * cols);
        for (int i = 0; i < rows * cols; ++i)
          ASSERT_EQ(got[i], in[i] + add) << i;
      }
    }
  }
}

}  // namespace
}  // namespace fleetjit::testing
