// The glibc / libstdc++ floor of the shipped libraries, which
// cmake/floor.cmake computes after they link. Its own translation unit,
// outside the CLI's unity build, and tied to the generated header by that
// one object's dependency (tools/CMakeLists.txt): the CLI's other files
// then compile while the libraries are still building and linking.
#include "fleetjit_floor.h"  // generated: cmake/floor.cmake
#include "tools/commands.h"

namespace fleetjit::cli {

const char* LibraryFloor() { return FJ_FLOOR_SUMMARY; }

}  // namespace fleetjit::cli
