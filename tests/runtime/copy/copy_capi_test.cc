// fj_copy, fj_prefetch and fj_peer_* through the C ABI on any machine:
// handles, struct sizes and NULLs are checked, and every bad input is
// FJ_INVALID_ARGUMENT before any driver call, so it is the same status
// with or without a GPU. A valid request without a GPU is FJ_UNAVAILABLE.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"

namespace {

constexpr uint64_t kA = 0x7f0000000000ull;
constexpr uint64_t kB = 0x7f1000000000ull;

struct Status {
  fj_status* s;
  explicit Status(fj_status* s) : s(s) {}
  ~Status() { fj_status_free(s); }
  fj_code code() const { return fj_status_code(s); }
  std::string message() const { return fj_status_message(s, nullptr); }
};

class CopyCapiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fj_status* st = fj_runtime_create(nullptr, &rt_);
    ASSERT_EQ(st, nullptr) << fj_status_message(st, nullptr);
    fj_device_count(rt_, &devices_);
  }
  void TearDown() override { fj_status_free(fj_runtime_destroy(rt_)); }

  fj_tensor Tensor(uint64_t address, int64_t* shape, int ndim,
                   fj_dl_dtype dtype = {2, 32, 1}) {
    fj_tensor t{};
    t.data = reinterpret_cast<void*>(address);
    t.device = {2, 0};
    t.ndim = ndim;
    t.dtype = dtype;
    t.shape = shape;
    return t;
  }
  fj_copy_desc Desc(const fj_tensor* src, const fj_tensor* dst) {
    fj_copy_desc d{};
    d.struct_size = sizeof(d);
    d.src = src;
    d.dst = dst;
    return d;
  }
  // Without a GPU a valid copy is UNAVAILABLE; a bad one must be INVALID.
  void ExpectInvalid(const fj_copy_desc& d, const char* needle) {
    Status st(fj_copy(rt_, &d, nullptr));
    EXPECT_EQ(st.code(), FJ_INVALID_ARGUMENT) << st.message();
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
  }

  fj_runtime* rt_ = nullptr;
  int32_t devices_ = 0;
  int64_t shape_[2] = {8, 8};
  int64_t other_[2] = {8, 16};
};

TEST_F(CopyCapiTest, ChecksHandlesAndStructs) {
  fj_tensor a = Tensor(kA, shape_, 2), b = Tensor(kB, shape_, 2);
  fj_copy_desc d = Desc(&a, &b);
  EXPECT_EQ(Status(fj_copy(nullptr, &d, nullptr)).code(), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Status(fj_copy(reinterpret_cast<fj_runtime*>(0x1234), &d, nullptr))
                .code(),
            FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Status(fj_copy(rt_, nullptr, nullptr)).code(), FJ_INVALID_ARGUMENT);
  d.struct_size = 8;
  EXPECT_EQ(Status(fj_copy(rt_, &d, nullptr)).code(), FJ_INVALID_ARGUMENT);
  d.struct_size = sizeof(d);
  EXPECT_EQ(Status(fj_copy(rt_, &d, reinterpret_cast<fj_stream*>(0x99))).code(),
            FJ_INVALID_ARGUMENT);
  fj_prefetch_desc p{};
  p.struct_size = 4;
  EXPECT_EQ(Status(fj_prefetch(rt_, &p, nullptr)).code(), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Status(fj_prefetch(rt_, nullptr, nullptr)).code(),
            FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Status(fj_peer_query(rt_, 0, 0, nullptr)).code(),
            FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Status(fj_peer_enable(nullptr, 0, 1)).code(), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Status(fj_peer_disable(nullptr, 0, 1)).code(), FJ_INVALID_ARGUMENT);
}

TEST_F(CopyCapiTest, EveryBadInputIsInvalidBeforeTheDriver) {
  fj_tensor a = Tensor(kA, shape_, 2), b = Tensor(kB, shape_, 2);
  fj_tensor wide = Tensor(kB, other_, 2);
  fj_copy_desc d = Desc(&a, &b);
  d.src = nullptr;
  ExpectInvalid(d, "src");
  // Overlap: the same memory.
  fj_tensor same = Tensor(kA + 64, shape_, 2);
  ExpectInvalid(Desc(&a, &same), "overlap");
  // Window outside src under promise_in_bounds.
  d = Desc(&a, &b);
  d.src_start[1] = 1;
  ExpectInvalid(d, "FJ_OOB_PROMISE_IN_BOUNDS");
  d = Desc(&a, &wide);
  ExpectInvalid(d, "leaves src");
  // Misaligned element.
  fj_tensor odd = Tensor(kA + 2, shape_, 2);
  ExpectInvalid(Desc(&odd, &b), "aligned");
  // Unknown dtype, dtype mismatch, NaN fill of an integer.
  fj_tensor u = Tensor(kA, shape_, 2, {9, 32, 1}),
            v = Tensor(kB, shape_, 2, {9, 32, 1});
  ExpectInvalid(Desc(&u, &v), "unsupported dtype");
  fj_tensor h = Tensor(kB, shape_, 2, {2, 16, 1});
  ExpectInvalid(Desc(&a, &h), "dtype mismatch");
  fj_tensor i = Tensor(kA, shape_, 2, {0, 32, 1}),
            j = Tensor(kB, shape_, 2, {0, 32, 1});
  d = Desc(&i, &j);
  d.oob = FJ_OOB_NAN;
  ExpectInvalid(d, "floating-point");
  // An oob value outside the enum.
  d = Desc(&a, &b);
  const int32_t bad = 42;
  std::memcpy(reinterpret_cast<char*>(&d) + offsetof(fj_copy_desc, oob), &bad,
              4);
  ExpectInvalid(d, "not an fj_oob");
  // A gather index of the wrong type.
  int64_t rows[1] = {8};
  fj_tensor idx = Tensor(kB + 65536, rows, 1, {2, 32, 1});
  d = Desc(&a, &b);
  d.gather_index = &idx;
  ExpectInvalid(d, "int32 or int64");
}

TEST_F(CopyCapiTest, AValidCopyNeedsAGpu) {
  if (devices_ > 0)
    GTEST_SKIP() << "a GPU is present (copy_gpu_test.cc runs it)";
  fj_tensor a = Tensor(kA, shape_, 2), b = Tensor(kB, shape_, 2);
  fj_copy_desc d = Desc(&a, &b);
  EXPECT_EQ(Status(fj_copy(rt_, &d, nullptr)).code(), FJ_UNAVAILABLE);
  int32_t can = -1;
  EXPECT_EQ(Status(fj_peer_query(rt_, 0, 1, &can)).code(), FJ_UNAVAILABLE);
  EXPECT_EQ(can, -1) << "outputs untouched on error";
  fj_prefetch_desc p{};
  p.struct_size = sizeof(p);
  p.address = kA;
  p.bytes = 4096;
  p.reader_device = -1;
  EXPECT_EQ(Status(fj_prefetch(rt_, &p, nullptr)).code(), FJ_UNAVAILABLE);
}

TEST_F(CopyCapiTest, BadPrefetchesAreInvalid) {
  fj_prefetch_desc p{};
  p.struct_size = sizeof(p);
  p.address = kA;
  p.bytes = 4096;
  p.reader_device = -1;
  const int32_t bad = 17;
  std::memcpy(reinterpret_cast<char*>(&p) + offsetof(fj_prefetch_desc, mode),
              &bad, 4);
  Status st(fj_prefetch(rt_, &p, nullptr));
  EXPECT_EQ(st.code(), FJ_INVALID_ARGUMENT) << st.message();
  p.mode = FJ_PREFETCH_STAGE_LOCAL;
  Status st2(fj_prefetch(rt_, &p, nullptr));
  EXPECT_EQ(st2.code(), FJ_INVALID_ARGUMENT) << st2.message();
  EXPECT_NE(st2.message().find("stage_address"), std::string::npos);
}

TEST(CopyCapiVersion, MinorCountsTheCopyApi) {
  EXPECT_GE(fj_version() & 0xffff, 1u);
  EXPECT_EQ(FJ_PREFETCH_MODE_LAST, FJ_PREFETCH_STAGE_LOCAL);
}

}  // namespace
