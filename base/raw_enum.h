// Reading a C enum that a caller filled in.
//
// A C caller may store any int in an enum field (fj_output, fj_oob, ...),
// but in C++ loading a value outside the enum's range is undefined
// behaviour (clang's -fsanitize=enum reports it). So an enum field or
// argument that came from a caller is read as the int32 it is in memory,
// range-checked, and only then converted:
//
//   const int32_t output = RawEnum(options.output);  // no enum load
//   if (output < FJ_OUTPUT_AUTO || output > FJ_OUTPUT_PTX) return error;
//
// Binding the reference loads nothing; the bytes are copied as an int.
#ifndef FLEETJIT_BASE_RAW_ENUM_H_
#define FLEETJIT_BASE_RAW_ENUM_H_

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace fleetjit {

template <typename E>
int32_t RawEnum(const E& field) {
  static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(int32_t),
                "RawEnum reads a 4-byte C enum");
  int32_t value;
  std::memcpy(&value, &field, sizeof(value));
  return value;
}

}  // namespace fleetjit

#endif  // FLEETJIT_BASE_RAW_ENUM_H_
