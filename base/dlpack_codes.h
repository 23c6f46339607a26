// The DLPack codes the runtime reads in an fj_tensor (include/fleetjit/
// fleetjit.h: layout-identical to DLPack's DLTensor, dlpack.h >= 0.6;
// kDLBool is 0.8's). Stated once here: the library does not depend on
// dlpack.h, whose enums are the same numbers.
#ifndef FLEETJIT_BASE_DLPACK_CODES_H_
#define FLEETJIT_BASE_DLPACK_CODES_H_

#include <cstdint>

namespace fleetjit::dlpack {

// DLDataTypeCode (fj_tensor::dtype.code).
constexpr uint8_t kDLInt = 0;
constexpr uint8_t kDLUInt = 1;
constexpr uint8_t kDLFloat = 2;
constexpr uint8_t kDLBfloat = 4;
constexpr uint8_t kDLBool = 6;

// DLDeviceType (fj_tensor::device.device_type).
constexpr int32_t kDLCPU = 1;
constexpr int32_t kDLCUDA = 2;
constexpr int32_t kDLCUDAHost = 3;
constexpr int32_t kDLCUDAManaged = 13;

}  // namespace fleetjit::dlpack

#endif  // FLEETJIT_BASE_DLPACK_CODES_H_
