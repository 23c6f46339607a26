// What the tests of the C ABI share (header-only; link fleetjit): an fj_str
// of a std::string, a status's code (freeing it), FJ_ASSERT_OK, the saxpy
// kernel source, and a fixture that owns one runtime.
//
//   class MyTest : public fleetjit::testing::CapiRuntimeTest<> {};
//   TEST_F(MyTest, Builds) {
//     fj_build_options o = BuildOptions(SaxpySource(), "sm_90");
//     fj_module* m = nullptr;
//     FJ_ASSERT_OK(fj_module_build(rt_, &o, &m));
//   }
#ifndef FLEETJIT_TESTS_COMMON_CAPI_FIXTURE_H_
#define FLEETJIT_TESTS_COMMON_CAPI_FIXTURE_H_

#include <string>

#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/corpus.h"

namespace fleetjit::testing {

// Borrows `s`: it must outlive the fj_str.
inline fj_str S(const std::string& s) { return fj_str{s.data(), s.size()}; }

// Takes ownership of a status and returns its code.
inline fj_code Code(fj_status* st) {
  fj_code c = fj_status_code(st);
  fj_status_free(st);
  return c;
}

// A fixture holding one runtime (rt_, created with default options) and the
// number of GPUs it sees (gpus_). `Base` is ::testing::Test or a
// ::testing::TestWithParam<T>.
template <typename Base = ::testing::Test>
class CapiRuntimeTest : public Base {
 protected:
  void SetUp() override {
    fj_status* st = fj_runtime_create(nullptr, &rt_);
    ASSERT_EQ(fj_status_code(st), FJ_OK) << fj_status_message(st, nullptr);
    ASSERT_EQ(Code(fj_device_count(rt_, &gpus_)), FJ_OK);
  }
  void TearDown() override {
    if (rt_ != nullptr) EXPECT_EQ(Code(fj_runtime_destroy(rt_)), FJ_OK);
  }

  // fj_build_options of `source` for `target` ("" = the live device); the
  // strings are kept in the fixture until the next call.
  fj_build_options BuildOptions(const std::string& source,
                                const std::string& target) {
    source_ = source;
    target_ = target;
    fj_build_options o{};
    o.struct_size = sizeof(o);
    o.source = S(source_);
    o.target = S(target_);
    return o;
  }

  fj_runtime* rt_ = nullptr;
  int32_t gpus_ = 0;

 private:
  std::string source_, target_;
};

}  // namespace fleetjit::testing

// Asserts `expr` (an fj_status*) is OK, printing its message otherwise;
// frees it either way.
#define FJ_ASSERT_OK(expr)                                                    \
  do {                                                                        \
    fj_status* st_ = (expr);                                                  \
    ASSERT_EQ(fj_status_code(st_), FJ_OK) << fj_status_message(st_, nullptr); \
    fj_status_free(st_);                                                      \
  } while (0)

#endif  // FLEETJIT_TESTS_COMMON_CAPI_FIXTURE_H_
