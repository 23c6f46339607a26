#include "platform/driver_api.h"

#include "gtest/gtest.h"

namespace fleetjit {
namespace {

TEST(DriverApiTest, AMissingDriverIsUnavailableWithAHint) {
  auto api = LoadDriverApi("/nonexistent/libcuda.so.1");
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(api.status().message().find("install the NVIDIA driver"),
            absl::string_view::npos);
}

TEST(DriverApiTest, ALibraryWithoutTheDriverApiIsUnavailable) {
  auto api = LoadDriverApi("libz.so.1");  // loads, but is no driver
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kUnavailable);
}

CUresult FakeErrorName(CUresult, const char** s) {
  *s = "CUDA_ERROR_ILLEGAL_ADDRESS";
  return CUDA_SUCCESS;
}
CUresult FakeErrorString(CUresult, const char** s) {
  *s = "an illegal memory access was encountered";
  return CUDA_SUCCESS;
}

TEST(DriverApiTest, CheckCuNamesTheCallAndCarriesTheDriverText) {
  DriverApi api;
  api.cuGetErrorName = &FakeErrorName;
  api.cuGetErrorString = &FakeErrorString;
  EXPECT_TRUE(CheckCu(api, CUDA_SUCCESS, "cuLaunchKernelEx").ok());
  absl::Status s =
      CheckCu(api, CUDA_ERROR_ILLEGAL_ADDRESS, "cuStreamSynchronize");
  // FJ_CUDA_ERROR, carried explicitly (cu_errors_test.cc); kInternal for C++.
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("cuStreamSynchronize"), absl::string_view::npos);
  EXPECT_NE(s.message().find("illegal memory access"), absl::string_view::npos);
  EXPECT_EQ(std::string(*s.GetPayload("fleetjit/cuda_call")),
            "cuStreamSynchronize");
  EXPECT_EQ(CheckCu(api, CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc").code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(DriverApiTest, AForkedChildGetsAFailedPrecondition) {
  DriverApi api;
  api.loader_pid = 1;  // not us: as if we were forked from pid 1
  EXPECT_TRUE(IsForkedChild(api));
  EXPECT_EQ(CheckCu(api, CUDA_SUCCESS, "cuMemAlloc").code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace fleetjit
