// FindCudaIncludeDirs over fake toolkit folders: the search order, the
// cccl/ subfolder, de-duplication, and Python wheel folders.
#include "platform/cuda_headers.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace fleetjit {
namespace {

class CudaHeadersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fj_cuda_headers_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::system(("rm -rf '" + root_ + "'").c_str()); }
  // Makes root_/rel (and its parents).
  std::string Dir(const std::string& rel) {
    std::string path = root_;
    size_t start = 0;
    while (start <= rel.size()) {
      size_t slash = rel.find('/', start);
      if (slash == std::string::npos) slash = rel.size();
      path += "/" + rel.substr(start, slash - start);
      ::mkdir(path.c_str(), 0755);
      start = slash + 1;
    }
    return path;
  }
  std::string File(const std::string& rel) {
    size_t slash = rel.find_last_of('/');
    Dir(rel.substr(0, slash));
    std::ofstream(root_ + "/" + rel) << "x";
    return root_ + "/" + rel;
  }
  std::string root_;
};

TEST_F(CudaHeadersTest,
       SearchOrderIsHomeThenNvrtcToolkitThenDefaultThenWheels) {
  std::string home = Dir("home/include");
  std::string path = Dir("path/include");
  std::string nvrtc = File("tk/lib64/libnvrtc.so.13");
  std::string tk_inc = Dir("tk/include");
  std::string tk_cccl = Dir("tk/include/cccl");
  std::string def = Dir("default/include");
  std::string wheel = Dir("py/site-packages/nvidia/cu13/include");
  Dir("py/site-packages/nvidia/cublas/lib");  // no include/: not listed

  CudaHeaderSearch s;
  s.cuda_home = root_ + "/home";
  s.cuda_path = root_ + "/path";
  s.nvrtc_library = nvrtc;
  s.default_root = root_ + "/default";
  s.python_package_dirs = {root_ + "/py/site-packages"};
  std::vector<CudaIncludeDir> dirs = FindCudaIncludeDirs(s);
  ASSERT_EQ(dirs.size(), 6u);
  EXPECT_EQ(dirs[0].path, home);
  EXPECT_EQ(dirs[0].origin, "CUDA_HOME");
  EXPECT_EQ(dirs[1].path, path);
  EXPECT_EQ(dirs[1].origin, "CUDA_PATH");
  EXPECT_EQ(dirs[2].path, tk_inc);
  EXPECT_EQ(dirs[3].path, tk_cccl);
  EXPECT_EQ(dirs[4].path, def);
  EXPECT_EQ(dirs[5].path, wheel);
  EXPECT_NE(dirs[5].origin.find("nvidia/cu13/include"), std::string::npos)
      << dirs[5].origin;
}

TEST_F(CudaHeadersTest, AFolderReachedTwiceIsListedOnceAtItsFirstPlace) {
  Dir("tk/include");
  std::string nvrtc = File("tk/lib64/libnvrtc.so.13");
  ASSERT_EQ(::symlink((root_ + "/tk").c_str(), (root_ + "/alias").c_str()), 0);
  CudaHeaderSearch s;
  s.cuda_home = root_ + "/alias";
  s.nvrtc_library = nvrtc;
  s.default_root = root_ + "/tk";
  std::vector<CudaIncludeDir> dirs = FindCudaIncludeDirs(s);
  ASSERT_EQ(dirs.size(), 1u);
  EXPECT_EQ(dirs[0].origin, "CUDA_HOME");
}

TEST_F(CudaHeadersTest, MissingFoldersAreNotListed) {
  CudaHeaderSearch s;
  s.cuda_home = root_ + "/nowhere";
  s.nvrtc_library = root_ + "/nowhere/lib64/libnvrtc.so.13";
  s.default_root = root_ + "/none";
  s.python_package_dirs = {root_ + "/nopy"};
  EXPECT_TRUE(FindCudaIncludeDirs(s).empty());
}

}  // namespace
}  // namespace fleetjit
