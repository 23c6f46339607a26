// Fuzzes the launch argument checks that run before any driver call:
// tensor descriptors (DescribeTensor, TmaRejection, FillTensorParam,
// fj_tensor_arg_check) and the generic packer (PackParams) against a
// synthetic kernel signature: random parameter kinds, sizes, alignments,
// declared tensor ranks and dtypes, against random fj_arg arrays (kinds,
// sizes, struct_size strides, tensors). The encoder has no driver, so tma
// tensors fall back as they do without a GPU.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fleetjit/fleetjit.h"
#include "jit/artifact.h"
#include "jit/copy_plan.h"
#include "runtime/launch/launch.h"
#include "runtime/launch/tensor_encoder.h"

namespace {

using fleetjit::jit::KernelEntry;
using fleetjit::jit::ParamKind;
using fleetjit::jit::ParamSpec;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

// One tensor and the arrays it points to, owned together.
struct Tensor {
  int64_t shape[8] = {};
  int64_t strides[8] = {};
  fj_tensor t{};
  fj_tensor_arg arg{};
};

void FillTensor(FuzzedDataProvider& in, Tensor& x) {
  x.t.ndim = in.ConsumeIntegralInRange<int32_t>(-1, 6);
  static const int32_t kDevices[] = {1, 2, 3, 13, 0, 7};
  x.t.device.device_type = in.PickValueInArray(kDevices);
  x.t.device.device_id = in.ConsumeIntegralInRange<int32_t>(-1, 8);
  x.t.dtype.code = in.ConsumeIntegralInRange<uint8_t>(0, 12);
  static const uint8_t kBits[] = {8, 16, 32, 64, 1, 4, 0, 128};
  x.t.dtype.bits = in.PickValueInArray(kBits);
  x.t.dtype.lanes = in.ConsumeBool() ? 1 : in.ConsumeIntegral<uint16_t>();
  for (int i = 0; i < 8; ++i) {
    x.shape[i] = in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(0, 4096)
                                  : in.ConsumeIntegral<int64_t>();
    x.strides[i] = in.ConsumeBool()
                       ? in.ConsumeIntegralInRange<int64_t>(-2, 1 << 20)
                       : in.ConsumeIntegral<int64_t>();
  }
  x.t.shape = in.ConsumeIntegralInRange<int>(0, 15) ? x.shape : nullptr;
  x.t.strides = in.ConsumeBool() ? x.strides : nullptr;
  // The data pointer is an address the checks look at, never read.
  x.t.data = reinterpret_cast<void*>(
      in.ConsumeBool() ? in.ConsumeIntegralInRange<uintptr_t>(0, 1) << 40 |
                             (in.ConsumeIntegralInRange<uintptr_t>(0, 255) << 4)
                       : in.ConsumeIntegral<uintptr_t>());
  x.t.byte_offset = in.ConsumeBool()
                        ? in.ConsumeIntegralInRange<uint64_t>(0, 64)
                        : in.ConsumeIntegral<uint64_t>();
  x.arg.struct_size = in.ConsumeBool() ? sizeof(fj_tensor_arg)
                                       : in.ConsumeIntegralInRange<size_t>(
                                             0, sizeof(fj_tensor_arg));
  x.arg.tensor = in.ConsumeIntegralInRange<int>(0, 15) ? &x.t : nullptr;
  for (auto& b : x.arg.box) {
    b = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint32_t>(0, 300)
                         : in.ConsumeIntegral<uint32_t>();
  }
  x.arg.oob = static_cast<fj_oob>(in.ConsumeIntegralInRange<int>(-1, 4));
}

ParamSpec RandomParam(FuzzedDataProvider& in, uint32_t& offset) {
  ParamSpec p;
  p.kind = static_cast<ParamKind>(in.ConsumeIntegralInRange<int>(0, 7));
  static const uint32_t kSizes[] = {1, 2, 4, 8, 12, 16, 24, 320};
  p.size = in.PickValueInArray(kSizes);
  p.align = 1;
  while (p.align < 16 && p.align < p.size && in.ConsumeBool()) p.align *= 2;
  if (p.kind == ParamKind::kTensor) {
    p.size = sizeof(fj::tensor_param);
    p.align = 64;
    p.tensor_rank = in.ConsumeIntegralInRange<int32_t>(0, 6);
    p.tensor_dtype = in.ConsumeIntegralInRange<int32_t>(-1, 14);
  }
  offset = (offset + p.align - 1) / p.align * p.align;
  p.offset = offset;
  offset += p.size;
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);

  // One tensor through every check that needs no driver.
  {
    Tensor x;
    FillTensor(in, x);
    const fj_tensor_arg* arg =
        in.ConsumeIntegralInRange<int>(0, 15) ? &x.arg : nullptr;
    auto desc = fleetjit::DescribeTensor(arg, 0);
    if (desc.ok()) {
      std::string why = fleetjit::TmaRejection(*desc);
      alignas(64) fj::tensor_param param;
      fleetjit::FillTensorParam(*desc, &param);
    }
    fj_tensor_check check{};
    check.struct_size =
        in.ConsumeBool() ? sizeof(check)
                         : in.ConsumeIntegralInRange<size_t>(0, sizeof(check));
    fj_status* st =
        fj_tensor_arg_check(arg, in.ConsumeBool() ? &check : nullptr);
    // The C ABI and the runtime agree on what is a valid tensor.
    if (st == nullptr && check.struct_size == sizeof(check)) {
      Check(desc.ok());
      Check(check.reason[sizeof(check.reason) - 1] == '\0');
    }
    fj_status_free(st);
  }

  // A synthetic signature and arguments for it.
  KernelEntry entry;
  entry.name = entry.lowered_name = "fuzzed";
  uint32_t offset = 0;
  int num_params = in.ConsumeIntegralInRange<int>(0, 8);
  for (int i = 0; i < num_params; ++i)
    entry.params.push_back(RandomParam(in, offset));
  entry.param_bytes = offset;

  size_t n = in.ConsumeIntegralInRange<size_t>(0, 9);
  size_t stride = in.ConsumeBool() ? sizeof(fj_arg)
                                   : in.ConsumeIntegralInRange<size_t>(
                                         0, sizeof(fj_arg) + 32);
  // Elements sit at a multiple of alignof(fj_arg), as a newer caller's
  // longer struct would (see the report: an odd struct_size is read
  // misaligned).
  size_t cell = (std::max(stride, sizeof(fj_arg)) + 7) / 8 * 8;
  std::vector<unsigned char> storage(cell * std::max<size_t>(n, 1) + 64, 0);
  std::vector<std::unique_ptr<Tensor>> tensors;
  std::vector<std::vector<unsigned char>> blobs;
  for (size_t i = 0; i < n; ++i) {
    fj_arg a{};
    a.struct_size = in.ConsumeIntegralInRange<int>(0, 7)
                        ? stride
                        : in.ConsumeIntegral<uint8_t>();
    a.kind = static_cast<fj_arg_kind>(in.ConsumeIntegralInRange<int>(0, 16));
    a.size = in.ConsumeBool() ? in.ConsumeIntegralInRange<uint32_t>(0, 400)
                              : in.ConsumeIntegral<uint32_t>();
    a.v.u64 = in.ConsumeIntegral<uint64_t>();
    if (a.kind == FJ_ARG_TENSOR && in.ConsumeIntegralInRange<int>(0, 7)) {
      tensors.push_back(std::make_unique<Tensor>());
      FillTensor(in, *tensors.back());
      a.v.tensor = &tensors.back()->arg;
    } else if (a.kind == FJ_ARG_BYTES && a.size <= 4096 &&
               in.ConsumeIntegralInRange<int>(0, 7)) {
      // By-value bytes: the caller's buffer holds `size` bytes.
      blobs.emplace_back(a.size, 0xab);
      a.v.bytes = blobs.back().data();
    } else if (a.kind == FJ_ARG_TENSOR || a.kind == FJ_ARG_BYTES) {
      a.v.u64 = 0;  // NULL: must be refused
    }
    memcpy(storage.data() + i * cell, &a, sizeof(a));
  }
  const fj_arg* args = n == 0 && in.ConsumeBool()
                           ? nullptr
                           : reinterpret_cast<const fj_arg*>(storage.data());
  // The array check alone, on any stride (it reads no element); then the
  // packer on the stride the elements really have (a caller owns
  // n * stride bytes), which refuses elements whose struct_size differs.
  (void)fleetjit::CheckArgArray(args, n, stride);
  stride = cell;

  auto impl = static_cast<fleetjit::jit::CopyImpl>(
      in.ConsumeIntegralInRange<int>(0, 2));
  fleetjit::TensorEncoder encoder(nullptr, "fuzzed", nullptr, nullptr);
  encoder.set_cache_enabled(in.ConsumeBool());
  std::vector<uint8_t> buffer(entry.param_bytes + 1, 0xcd);
  absl::Status st = fleetjit::CheckArgArray(args, n, stride);
  if (st.ok()) {
    st = fleetjit::PackParams(entry, impl, args, n, stride, &encoder,
                              buffer.data(), entry.param_bytes);
  }
  // The packer writes exactly param_bytes.
  Check(buffer[entry.param_bytes] == 0xcd);
  return 0;
}
