// fj_module_load on the CPU: images built here for named targets (as
// `fleetjit build -o` writes them: PTX for compute_90, a cubin for sm_90)
// load back through the C ABI. PTX needs no GPU to load; a cubin's
// parameters come from the driver, so without a GPU its load is
// FJ_UNAVAILABLE. The launches are tests/runtime/load/module_load_test.cc.
#include <cstring>
#include <string>

#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/capi_fixture.h"

namespace {

using fleetjit::testing::Code;
using fleetjit::testing::S;
using fleetjit::testing::SaxpySource;

class ModuleLoadTest : public fleetjit::testing::CapiRuntimeTest<> {
 protected:
  // The image fj_module_build makes for `target` (what `fleetjit build -o`
  // writes); empty, with a skip, without NVRTC.
  std::string Image(const std::string& target) {
    fj_build_options o = BuildOptions(SaxpySource(), target);
    fj_module* m = nullptr;
    fj_status* st = fj_module_build(rt_, &o, &m);
    if (fj_status_code(st) != FJ_OK) {
      ADD_FAILURE() << fj_status_message(st, nullptr);
      fj_status_free(st);
      return "";
    }
    const void* data = nullptr;
    size_t size = 0;
    fj_status_free(fj_module_image(m, &data, &size));
    std::string image(static_cast<const char*>(data), size);
    fj_status_free(fj_module_destroy(m));
    return image;
  }
  fj_module_load_options Load(const std::string& image,
                              fj_image_kind kind = FJ_IMAGE_AUTO) {
    fj_module_load_options o{};
    o.struct_size = sizeof(o);
    o.image = image.data();
    o.image_size = image.size();
    o.kind = kind;
    o.name = S(name_);
    return o;
  }
  std::string name_ = "saxpy.image";
};

TEST_F(ModuleLoadTest, PtxLoadsBackWithItsKernelsAndLayouts) {
  std::string ptx = Image("compute_90");
  ASSERT_FALSE(ptx.empty());
  for (fj_image_kind kind : {FJ_IMAGE_AUTO, FJ_IMAGE_PTX}) {
    fj_module_load_options o = Load(ptx, kind);
    fj_module* m = nullptr;
    FJ_ASSERT_OK(fj_module_load(rt_, &o, &m));
    fj_module_info info{};
    info.struct_size = sizeof(info);
    FJ_ASSERT_OK(fj_module_info_get(m, &info));
    EXPECT_STREQ(info.target, "compute_90");
    EXPECT_EQ(info.output, FJ_OUTPUT_PTX);
    EXPECT_EQ(info.image_bytes, ptx.size());
    const void* data = nullptr;
    size_t size = 0;
    FJ_ASSERT_OK(fj_module_image(m, &data, &size));
    EXPECT_EQ(std::string(static_cast<const char*>(data), size),
              ptx);  // a copy
    EXPECT_NE(data, static_cast<const void*>(ptx.data()));
    fj_kernel* k = nullptr;
    fj_status* st = fj_module_get_kernel(m, S(std::string("saxpy")), 0, &k);
    if (gpus_ == 0) {
      EXPECT_EQ(fj_status_code(st), FJ_UNAVAILABLE)
          << fj_status_message(st, nullptr);
    } else {
      EXPECT_EQ(fj_status_code(st), FJ_OK) << fj_status_message(st, nullptr);
    }
    fj_status_free(st);
    EXPECT_EQ(Code(fj_module_get_kernel(m, S(std::string("nope")), 0, &k)),
              FJ_NOT_FOUND);
    FJ_ASSERT_OK(fj_module_destroy(m));
  }
}

TEST_F(ModuleLoadTest, ACubinNeedsTheDriverForItsParameters) {
  std::string cubin = Image("sm_90");
  ASSERT_FALSE(cubin.empty());
  ASSERT_EQ(cubin.substr(0, 4),
            "\x7f"
            "ELF");
  for (fj_image_kind kind : {FJ_IMAGE_AUTO, FJ_IMAGE_CUBIN}) {
    fj_module_load_options o = Load(cubin, kind);
    fj_module* m = nullptr;
    fj_status* st = fj_module_load(rt_, &o, &m);
    if (gpus_ == 0) {
      // The ELF is read (a malformed one would be INVALID_ARGUMENT); the
      // driver is what is missing.
      EXPECT_EQ(fj_status_code(st), FJ_UNAVAILABLE)
          << fj_status_message(st, nullptr);
      EXPECT_EQ(m, nullptr);
    }
    fj_status_free(st);
    fj_status_free(fj_module_destroy(m));
  }
  // Read as PTX, a cubin is refused cleanly.
  fj_module_load_options o = Load(cubin, FJ_IMAGE_PTX);
  fj_module* m = nullptr;
  EXPECT_NE(Code(fj_module_load(rt_, &o, &m)), FJ_OK);
  EXPECT_EQ(m, nullptr);
}

TEST_F(ModuleLoadTest, BadInputIsAStatus) {
  std::string garbage = "this is not an image";
  fj_module_load_options o = Load(garbage);
  fj_module* m = nullptr;
  EXPECT_EQ(Code(fj_module_load(rt_, &o, &m)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_module_load(nullptr, &o, &m)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_module_load(rt_, nullptr, &m)), FJ_INVALID_ARGUMENT);
  EXPECT_EQ(Code(fj_module_load(rt_, &o, nullptr)), FJ_INVALID_ARGUMENT);
  fj_module_load_options bad = o;
  bad.struct_size = 8;
  EXPECT_EQ(Code(fj_module_load(rt_, &bad, &m)), FJ_INVALID_ARGUMENT);
  bad = o;
  bad.image = nullptr;
  EXPECT_EQ(Code(fj_module_load(rt_, &bad, &m)), FJ_INVALID_ARGUMENT);
  bad = o;
  bad.image_size = 0;
  EXPECT_EQ(Code(fj_module_load(rt_, &bad, &m)), FJ_INVALID_ARGUMENT);
  bad = o;
  bad.kind = static_cast<fj_image_kind>(42);
  EXPECT_EQ(Code(fj_module_load(rt_, &bad, &m)), FJ_INVALID_ARGUMENT);
  bad = o;
  std::string target = "sm_1";
  bad.target = S(target);
  EXPECT_EQ(Code(fj_module_load(rt_, &bad, &m)), FJ_INVALID_ARGUMENT);
  // Truncated ELF and truncated PTX.
  std::string elf(
      "\x7f"
      "ELF\x02\x01\x01",
      7);
  fj_module_load_options t = Load(elf);
  EXPECT_EQ(Code(fj_module_load(rt_, &t, &m)), FJ_INVALID_ARGUMENT);
  std::string ptx =
      ".version 8.0\n.target sm_90\n.visible .entry k(\n.param .u64 k_param_0,";
  t = Load(ptx);
  fj_status* st = fj_module_load(rt_, &t, &m);
  EXPECT_NE(fj_status_code(st), FJ_INTERNAL) << fj_status_message(st, nullptr);
  fj_status_free(st);
  fj_status_free(fj_module_destroy(m));
}

}  // namespace
