// The CUresult table against the cuda.h it was built with, and CheckCu's
// use of it.
#include "platform/cu_errors.h"

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>

#include "base/status_macros.h"
#include "gtest/gtest.h"
#include "platform/driver_api.h"

namespace fleetjit {
namespace {

// name -> value of every enumerator of `typedef enum cudaError_enum {...}
// CUresult;` in cuda.h.
std::map<std::string, int> CuResultsOfCudaH() {
  std::ifstream in(FJ_CUDA_H);
  std::stringstream text;
  text << in.rdbuf();
  std::string all = text.str();
  size_t begin = all.find("typedef enum cudaError_enum");
  size_t end = all.find("} CUresult;", begin);
  std::map<std::string, int> out;
  if (begin == std::string::npos || end == std::string::npos) return out;
  std::string body = all.substr(begin, end - begin);
  std::regex row(R"((CUDA_[A-Z0-9_]+)\s*=\s*(\d+))");
  for (auto it = std::sregex_iterator(body.begin(), body.end(), row);
       it != std::sregex_iterator(); ++it) {
    out[(*it)[1]] = std::stoi((*it)[2]);
  }
  return out;
}

TEST(CuErrorsTest, EveryCuResultOfCudaHIsInTheTable) {
  std::map<std::string, int> header = CuResultsOfCudaH();
  ASSERT_GT(header.size(), 90u)
      << "could not parse the CUresult enum of " << FJ_CUDA_H;
  std::map<std::string, int> table;
  for (const CuErrorRow& row : CuErrorTable()) {
    EXPECT_TRUE(table.emplace(row.name, static_cast<int>(row.result)).second)
        << "duplicate row " << row.name;
  }
  // No CUresult is deliberately left to the default: each has a row.
  for (const auto& [name, value] : header) {
    auto it = table.find(name);
    ASSERT_NE(it, table.end())
        << name << " (" << value << ") has no row in cu_errors.inc";
    EXPECT_EQ(it->second, value) << name;
    EXPECT_EQ(DescribeCuError(static_cast<CUresult>(value)).name, name);
  }
  EXPECT_EQ(table.size(), header.size());
}

TEST(CuErrorsTest, KnownMappings) {
  EXPECT_EQ(DescribeCuError(CUDA_ERROR_INVALID_VALUE).code,
            FJ_INVALID_ARGUMENT);
  EXPECT_EQ(DescribeCuError(CUDA_ERROR_OUT_OF_MEMORY).code,
            FJ_RESOURCE_EXHAUSTED);
  EXPECT_EQ(DescribeCuError(CUDA_ERROR_NO_DEVICE).code, FJ_UNAVAILABLE);
  EXPECT_EQ(DescribeCuError(CUDA_ERROR_NOT_INITIALIZED).code, FJ_UNAVAILABLE);
  EXPECT_EQ(DescribeCuError(CUDA_ERROR_SYSTEM_DRIVER_MISMATCH).code,
            FJ_UNAVAILABLE);
  EXPECT_EQ(DescribeCuError(CUDA_ERROR_ILLEGAL_ADDRESS).code, FJ_CUDA_ERROR);
  EXPECT_EQ(DescribeCuError(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES).code,
            FJ_CUDA_ERROR);
  for (CUresult r :
       {CUDA_ERROR_ILLEGAL_ADDRESS, CUDA_ERROR_LAUNCH_FAILED,
        CUDA_ERROR_MISALIGNED_ADDRESS, CUDA_ERROR_ILLEGAL_INSTRUCTION,
        CUDA_ERROR_ASSERT, CUDA_ERROR_HARDWARE_STACK_ERROR,
        CUDA_ERROR_INVALID_ADDRESS_SPACE, CUDA_ERROR_INVALID_PC,
        CUDA_ERROR_LAUNCH_TIMEOUT, CUDA_ERROR_ECC_UNCORRECTABLE}) {
    EXPECT_TRUE(IsStickyError(r)) << r;
  }
  for (CUresult r :
       {CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY,
        CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, CUDA_ERROR_INVALID_CLUSTER_SIZE,
        CUDA_ERROR_NOT_READY, CUDA_ERROR_INVALID_HANDLE}) {
    EXPECT_FALSE(IsStickyError(r)) << r;
  }
}

TEST(CuErrorsTest, AnUnknownResultIsARecoverableCudaError) {
  CuErrorRow row = DescribeCuError(static_cast<CUresult>(123456));
  EXPECT_EQ(row.code, FJ_CUDA_ERROR);
  EXPECT_EQ(row.stickiness, CuErrorStickiness::kRecoverable);
}

TEST(CuErrorsTest, CheckCuCarriesThePublicCodeThroughAnnotate) {
  DriverApi api;  // no cuGetErrorName: CheckCu names the error generically
  struct Case {
    CUresult result;
    fj_code code;
    absl::StatusCode absl_code;
  } cases[] = {
      {CUDA_ERROR_ILLEGAL_ADDRESS, FJ_CUDA_ERROR, absl::StatusCode::kInternal},
      {CUDA_ERROR_OUT_OF_MEMORY, FJ_RESOURCE_EXHAUSTED,
       absl::StatusCode::kResourceExhausted},
      {CUDA_ERROR_INVALID_VALUE, FJ_INVALID_ARGUMENT,
       absl::StatusCode::kInvalidArgument},
      {CUDA_ERROR_NO_DEVICE, FJ_UNAVAILABLE, absl::StatusCode::kUnavailable},
  };
  for (const Case& c : cases) {
    absl::Status s =
        Annotate(CheckCu(api, c.result, "cuCall"), "doing a thing");
    EXPECT_EQ(s.code(), c.absl_code) << s;
    ASSERT_TRUE(PublicCodeOf(s).has_value()) << s;
    EXPECT_EQ(*PublicCodeOf(s), c.code) << s;
  }
  EXPECT_FALSE(
      PublicCodeOf(absl::InternalError("not from the driver")).has_value());
}

}  // namespace
}  // namespace fleetjit
