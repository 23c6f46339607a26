// The reference kernels (examples/rmsnorm.cu, softmax.cu, transpose.cu, and
// whoever joins the table) as one table that the benchmark
// (bench/kernels_bench.cc), `fleetjit bench kernels` (tools/bench_kernels.cc)
// and the tests (tests/jit/reference_kernels_test.cc,
// tests/reference/reference_kernels_gpu_test.cc) all read. A kernel joins with
// one entry in Cases() (reference_kernels.cc): its example, entry point,
// problem (inputs, arguments, launch shape, CPU reference and tolerance)
// and the launch shapes the benchmark tries.
//
// Everything goes through the C ABI (build, launch, memory, fj_kernel_info)
// except GPU timing: the C ABI has no events, so the runner loads the
// driver (platform/driver_api.h) for cuEvent* and cuMemcpyDtoDAsync, the
// anchor, on the same stream (a CUstream wrapped with fj_stream_wrap).
#ifndef FLEETJIT_REFERENCE_REFERENCE_KERNELS_H_
#define FLEETJIT_REFERENCE_REFERENCE_KERNELS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fleetjit/fleetjit.h"

namespace fleetjit::refk {

// One column of the table: a copy implementation, and the target it is
// built for ("" = the live device's cubin; "compute_80" = PTX that the
// driver JIT-compiles for the device).
struct Variant {
  const char* name;  // "tma", "cp_async", "sync", "cp_async@compute_80"
  fj_copy_impl impl;
  const char* target;
};
const std::vector<Variant>& Variants();

// A launch shape: threads per block, resident blocks per SM (grid =
// ctas_per_sm * SMs; the kernels walk their work grid-stride) and the
// pipeline depth (-D<stages_macro>=stages).
struct Shape {
  int threads = 256;
  int ctas_per_sm = 1;
  int stages = 2;
  // More -D for this shape's build, or null: NAME=VALUE, several
  // separated by spaces (e.g. "SMX_RVECS=16": the softmax with its row held
  // in registers; "TR_BOX=32 FJ_NARROW_INLINE=1").
  const char* define = nullptr;
};
// Whether `s`'s defines include `def` (one NAME=VALUE).
bool ShapeHasDefine(const Shape& s, absl::string_view def);
// "threads/CTAs/stages" and ",DEFINE" when the shape has one.
std::string ShapeName(const Shape& s);

// One problem on the GPU: its buffers (inputs random, fixed per seed), the
// kernel's arguments and the CPU reference.
class Problem {
 public:
  virtual ~Problem() = default;
  // The kernel's arguments (valid while the problem lives).
  virtual const std::vector<fj_arg>& Args() = 0;
  // grid, block and dynamic shared memory for `shape` on `sms` SMs, for a
  // build of copy implementation `impl` (a kernel may size its SMEM per
  // implementation).
  virtual void Configure(const Shape& shape, int sms, fj_copy_impl impl,
                         fj_launch_config* cfg) const = 0;
  // Shapes in different groups need different Args() (the GEMM's A box
  // follows its BM: Configure sets it); fj_tune times one group per call.
  virtual int ArgsGroup(const Shape&) const { return 0; }
  // Fills the outputs with NaN bytes (0xFF), so a kernel that skips an
  // element is caught.
  virtual absl::Status Poison() = 0;
  // The device buffers the kernel writes, (address, bytes), in the order
  // Check takes their host copies (fj_tune checks and restores them).
  virtual std::vector<std::pair<uint64_t, uint64_t>> Outputs() const = 0;
  // Compares host copies of Outputs() with the CPU reference: OK, or the
  // first mismatch (index, value, expected, tolerance).
  virtual absl::Status Check(const void* const* outputs) const = 0;
  // Reads the outputs back from `rt` and Check()s them.
  absl::Status Verify(fj_runtime* rt) const;
  // What Verify() accepts, in words ("exact", "|d| <= ...").
  virtual std::string Tolerance() const = 0;
};

struct KernelCase {
  std::string name;           // "rmsnorm [8192, 4096] bf16"
  std::string kernel;         // "rmsnorm": the family, for filters
  std::string example;        // "examples/rmsnorm.cu", embedded
  std::string entry;          // the extern "C" kernel
  std::string stages_macro;   // "RMS_STAGES"
  uint64_t copy_bytes = 0;    // the D2D anchor copies this many bytes
  std::vector<Shape> shapes;  // tried by the benchmark; [0] by the tests
  // Allocates and fills the problem on `rt`'s device `device`.
  std::function<absl::StatusOr<std::unique_ptr<Problem>>(
      fj_runtime* rt, int device, uint32_t seed)>
      make;
};
const std::vector<KernelCase>& Cases();
// The entries of examples/paged_decode.cu and examples/gemm_mma.cu
// (reference/reference_kernels_attn.cc).
KernelCase PagedDecodeCase();
KernelCase GemmMmaCase(int n);

// The example's source text (the copy bundled into the binary).
absl::StatusOr<std::string> Source(const KernelCase& c);

// The -D options of `c`'s build at pipeline depth `stages`:
// -D<stages_macro>=`stages`, then -D for each of `define`'s NAME=VALUE
// (space-separated) when not null.
std::vector<std::string> ShapeDefines(const KernelCase& c, int stages,
                                      const char* define);

// Builds `c` for `v` with -D<stages_macro>=`stages` (and -D`define`, when
// not null); `target` overrides
// v.target when not empty (the CI test names sm_75, sm_80, sm_90), and
// `output` the image kind (AUTO: cubin for sm_XX, PTX for compute_XX).
absl::StatusOr<fj_module*> Build(fj_runtime* rt, const KernelCase& c,
                                 const Variant& v, int stages,
                                 const std::string& target = "",
                                 fj_output output = FJ_OUTPUT_AUTO,
                                 const char* define = nullptr);

// One measured cell of the table.
struct Result {
  std::string kernel;  // KernelCase::name
  std::string impl;    // Variant::name
  Shape shape;
  double ms = 0;        // GPU time of one launch (median)
  double copy_ms = 0;   // cuMemcpyDtoDAsync of copy_bytes, same run
  double fraction = 0;  // copy_ms / ms
  int regs = 0, static_smem = 0, dynamic_smem = 0;
  std::string verified;  // "ok" or what was wrong
  std::string skipped;   // why not measured ("" if measured)
  std::vector<std::pair<Shape, double>> tried;  // each shape's ms
  // With RunOptions::tune: how the shape was found ("tuned in 41.2 s",
  // "stored (disk), looked up in 0.31 ms"), one part per fj_tune call.
  std::string tuning;
};

struct RunOptions {
  int device = 0;
  int samples = 10;    // timings per figure (median)
  int batch = 10;      // launches per timing
  std::string filter;  // only cases whose name contains it ("" = all)
  bool sweep = true;   // false: shapes[0] only
  // true: the sweep is fj_tune's (one run per device model, driver and
  // implementation, stored in the module cache's tiers; a later process,
  // or another host sharing the remote tier, looks the shape up). false:
  // each shape timed briefly here.
  bool tune = false;
  std::string variant;   // only this Variant::name ("" = all)
  Shape shape{0, 0, 0};  // threads > 0: only this shape
  // Called after each cell (progress for the benchmark's log).
  std::function<void(const Result&)> on_result;
};

// Every case x every variant on the GPU: each shape timed briefly, the
// fastest timed fully next to the D2D anchor, then run once more on
// poisoned outputs and verified. UNAVAILABLE without a GPU.
absl::StatusOr<std::vector<Result>> Run(const RunOptions& options,
                                        std::string* device_name = nullptr);

// The table as text: kernel, impl, fraction of the copy, GPU us, regs,
// SMEM (static + dynamic), launch shape, verified.
std::string FormatTable(const std::vector<Result>& results);

}  // namespace fleetjit::refk

#endif  // FLEETJIT_REFERENCE_REFERENCE_KERNELS_H_
