// The shim's readers (capi/convert.cc, compiled in: libfleetjit.so.1
// exports fj_* only) on what a caller may hand in: an fj_arg array whose
// stride or base is not aligned for fj_arg is refused (the runtime reads
// its elements in place), and every other struct, and the arrays of fj_str
// and int32 they point to, read correctly from any address.
#include "capi/convert.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fleetjit/fleetjit.h"
#include "gtest/gtest.h"
#include "tests/common/seed.h"

namespace fleetjit::capi {
namespace {

// Bytes at an offset `shift` past an 8-byte boundary, holding a T.
template <typename T>
struct Shifted {
  alignas(16) unsigned char bytes[sizeof(T) + 16];
  size_t shift;
  explicit Shifted(const T& value, size_t shift) : shift(shift) {
    std::memset(bytes, 0x5a, sizeof(bytes));
    std::memcpy(bytes + shift, &value, sizeof(T));
  }
  const T* get() const { return reinterpret_cast<const T*>(bytes + shift); }
  T* get() { return reinterpret_cast<T*>(bytes + shift); }
  T value() const {
    T out;
    std::memcpy(&out, bytes + shift, sizeof(T));
    return out;
  }
};

TEST(ReadArgStrideTest, TakesOnlyStridesAlignedForFjArg) {
  std::mt19937_64 rng = testing::SeededRng("TakesOnlyStridesAlignedForFjArg");
  // Room for 3 elements of the largest stride drawn.
  alignas(fj_arg) unsigned char storage[3 * 512];
  std::vector<size_t> strides = {0,
                                 1,
                                 8,
                                 sizeof(fj_arg) - 1,
                                 sizeof(fj_arg),
                                 sizeof(fj_arg) + 1,
                                 sizeof(fj_arg) + alignof(fj_arg),
                                 sizeof(fj_arg) + alignof(fj_arg) - 1,
                                 511};
  for (int i = 0; i < 200; ++i) strides.push_back(rng() % 512);
  for (size_t stride : strides) {
    std::memset(storage, 0xa5, sizeof(storage));
    std::memcpy(storage, &stride, sizeof(stride));  // args[0].struct_size
    const auto* args = reinterpret_cast<const fj_arg*>(storage);
    absl::StatusOr<size_t> got = ReadArgStride(args, 3);
    const bool want = stride >= sizeof(fj_arg) && stride % alignof(fj_arg) == 0;
    ASSERT_EQ(got.ok(), want) << "stride " << stride << ": " << got.status();
    if (want) {
      EXPECT_EQ(*got, stride);
    } else {
      EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(got.status().message().find("args[0].struct_size is " +
                                            std::to_string(stride)),
                std::string::npos)
          << got.status();
    }
  }
  // No arguments: nothing is read, whatever the pointer.
  EXPECT_EQ(*ReadArgStride(nullptr, 0), 0u);
  EXPECT_FALSE(ReadArgStride(nullptr, 1).ok());
}

TEST(ReadArgStrideTest, RefusesAnArrayNotAlignedForFjArg) {
  alignas(fj_arg) unsigned char storage[sizeof(fj_arg) * 2 + 16];
  fj_arg arg{};
  arg.struct_size = sizeof(fj_arg);
  arg.kind = FJ_ARG_I32;
  for (size_t shift = 1; shift < alignof(fj_arg); ++shift) {
    std::memcpy(storage + shift, &arg, sizeof(arg));
    absl::StatusOr<size_t> got =
        ReadArgStride(reinterpret_cast<const fj_arg*>(storage + shift), 1);
    ASSERT_FALSE(got.ok()) << "shift " << shift;
    EXPECT_NE(got.status().message().find("not aligned"), std::string::npos)
        << got.status();
  }
  std::memcpy(storage, &arg, sizeof(arg));
  EXPECT_EQ(*ReadArgStride(reinterpret_cast<const fj_arg*>(storage), 1),
            sizeof(fj_arg));
}

TEST(ReadStructTest, StructsAndTheirArraysReadFromAnyAddress) {
  std::mt19937_64 rng =
      testing::SeededRng("StructsAndTheirArraysReadFromAnyAddress");
  // Fresh option strings, in an fj_str array that itself lies at an odd
  // address, inside an fj_build_options at another odd address.
  std::vector<std::string> opts;
  for (int i = 0; i < 3; ++i)
    opts.push_back("-DV" + std::to_string(rng() % 100000));
  std::vector<unsigned char> array_bytes(opts.size() * sizeof(fj_str) + 8);
  const size_t array_shift = 1 + rng() % 7;
  for (size_t i = 0; i < opts.size(); ++i) {
    fj_str s{opts[i].data(), opts[i].size()};
    std::memcpy(array_bytes.data() + array_shift + i * sizeof(fj_str), &s,
                sizeof(s));
  }
  const std::string source = "extern \"C\" __global__ void k() {}";
  const std::string target = "sm_80";
  fj_build_options o{};
  o.struct_size = sizeof(o);
  o.source = fj_str{source.data(), source.size()};
  o.target = fj_str{target.data(), target.size()};
  o.nvrtc_options =
      reinterpret_cast<const fj_str*>(array_bytes.data() + array_shift);
  o.num_nvrtc_options = opts.size();
  o.output = FJ_OUTPUT_PTX;
  Shifted<fj_build_options> shifted(o, 1 + rng() % 7);
  absl::StatusOr<BuildSpec> spec = ReadBuildSpec(shifted.get());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->source, source);
  EXPECT_EQ(spec->options, opts);
  EXPECT_EQ(spec->output, BuildSpec::Output::kPtx);
  ASSERT_TRUE(spec->target.has_value());
  EXPECT_EQ(spec->target->Name(), target);

  // preopen_devices (int32) at an odd address.
  std::vector<int32_t> devices = {static_cast<int32_t>(rng() % 8), -1,
                                  static_cast<int32_t>(rng() % 8)};
  std::vector<unsigned char> device_bytes(devices.size() * 4 + 4);
  std::memcpy(device_bytes.data() + 3, devices.data(), devices.size() * 4);
  fj_runtime_options ro{};
  ro.struct_size = sizeof(ro);
  ro.preopen_devices =
      reinterpret_cast<const int32_t*>(device_bytes.data() + 3);
  ro.num_preopen_devices = devices.size();
  Shifted<fj_runtime_options> shifted_ro(ro, 5);
  absl::StatusOr<RuntimeOptions> opts_read =
      ReadRuntimeOptions(shifted_ro.get());
  ASSERT_TRUE(opts_read.ok()) << opts_read.status();
  EXPECT_EQ(opts_read->preopen_devices, devices);
}

TEST(ReadStructTest, OutputStructsAreWrittenAtAnyAddress) {
  fj_copy_plan aligned{};
  aligned.struct_size = sizeof(aligned);
  fj_status* st =
      fj_copy_plan_for_target(fj_str{"sm_90", 5}, FJ_COPY_IMPL_AUTO, &aligned);
  ASSERT_EQ(st, nullptr) << fj_status_message(st, nullptr);
  for (size_t shift = 1; shift < 8; ++shift) {
    fj_copy_plan poisoned;
    std::memset(&poisoned, 0xee, sizeof(poisoned));
    poisoned.struct_size = sizeof(poisoned);
    Shifted<fj_copy_plan> out(poisoned, shift);
    st = fj_copy_plan_for_target(fj_str{"sm_90", 5}, FJ_COPY_IMPL_AUTO,
                                 out.get());
    ASSERT_EQ(st, nullptr) << fj_status_message(st, nullptr);
    fj_copy_plan got = out.value();
    EXPECT_EQ(got.struct_size, sizeof(got));
    EXPECT_STREQ(got.target, aligned.target) << "shift " << shift;
    EXPECT_EQ(got.impl, aligned.impl);
    for (int f = 0; f < FJ_FEATURE_COUNT; ++f)
      EXPECT_EQ(got.support[f], aligned.support[f]);
  }
}

}  // namespace
}  // namespace fleetjit::capi
