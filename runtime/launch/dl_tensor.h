// A caller's tensor as the C++ runtime takes it: DLPack's DLTensor fields
// (include/fleetjit/fleetjit.h's fj_tensor is layout-identical to it), as a
// C++ value. Nothing here is checked yet: DescribeTensor
// (tensor_encoder.h) validates one into a TensorDesc, naming what is wrong.
//
// Shape and strides are borrowed, like DLPack's: they must outlive the
// call that takes the DlTensor. The C ABI's structs become DlTensor in one
// place, DlTensorOf (wire.h).
#ifndef FLEETJIT_RUNTIME_LAUNCH_DL_TENSOR_H_
#define FLEETJIT_RUNTIME_LAUNCH_DL_TENSOR_H_

#include <cstdint>

namespace fleetjit {

// DLDataType: code (base/dlpack_codes.h), bits per element, lanes.
struct DlDtype {
  uint8_t code = 0;
  uint8_t bits = 0;
  uint16_t lanes = 0;
};

struct DlTensor {
  uint64_t data = 0;        // the data pointer, as an address
  int32_t device_type = 0;  // DLDeviceType (base/dlpack_codes.h)
  int32_t device_id = 0;
  int32_t ndim = 0;  // any value: DescribeTensor range-checks it
  DlDtype dtype;
  const int64_t* shape = nullptr;    // ndim extents, outermost-first
  const int64_t* strides = nullptr;  // elements; null = compact row-major
  uint64_t byte_offset = 0;
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_LAUNCH_DL_TENSOR_H_
