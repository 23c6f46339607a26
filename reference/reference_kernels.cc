#include "reference/reference_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "conformance/c_abi.h"
#include "platform/driver_api.h"
#include "reference/bundled_kernels.h"
#include "reference/measure.h"
#include "reference/reference_kernels_util.h"

namespace fleetjit::refk {
namespace {

using ::fleetjit::selftest::internal::F32Arg;
using ::fleetjit::selftest::internal::I32Arg;
using ::fleetjit::selftest::internal::PtrArg;
using ::fleetjit::selftest::internal::TensorArg;

fj_str Str(const std::string& s) { return fj_str{s.data(), s.size()}; }
// Not through a std::string temporary, which would dangle (Variant::target).
fj_str Str(const char* s) { return fj_str{s, std::strlen(s)}; }

uint32_t Round128(uint64_t n) {
  return static_cast<uint32_t>((n + 127) & ~127ull);
}

// bf16 <-> float on the host (round to nearest even, as the kernels).
float BfToF(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t FToBf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return 0x7fc0;
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// Compares `got` (want.size() values) with `want` within
// |d| <= rtol * |want| + atol (NaN in `got` always fails).
absl::Status Compare(const float* got, const std::vector<float>& want,
                     double rtol, double atol, int64_t row_len) {
  for (size_t i = 0; i < want.size(); ++i) {
    double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(d <= rtol * std::fabs(want[i]) + atol)) {
      return absl::InternalError(absl::StrFormat(
          "element [%d][%d] is %.9g, the CPU reference %.9g (tolerance "
          "%.3g * |ref| + %.3g)",
          static_cast<int64_t>(i) / row_len, static_cast<int64_t>(i) % row_len,
          got[i], want[i], rtol, atol));
    }
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------ row kernels
// RMSNorm and softmax over [rows, cols] bf16: (x, [w], y, rows, cols[, eps])
// with one row per warp and `stages` stages of threads / 32 rows.
class RowProblem : public Problem {
 public:
  enum Kind { kRmsNorm, kSoftmax };
  static constexpr float kEps = 1e-6f;
  static constexpr double kRtol = 1.0 / 256;  // two bf16 roundings' worth

  static absl::StatusOr<std::unique_ptr<Problem>> Make(fj_runtime* rt,
                                                       int device,
                                                       uint32_t seed, Kind kind,
                                                       int rows, int cols) {
    auto p = std::unique_ptr<RowProblem>(new RowProblem(rt, device));
    p->kind_ = kind;
    p->rows_ = rows;
    p->cols_ = cols;
    const size_t n = static_cast<size_t>(rows) * cols;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> xd(kind == kRmsNorm ? -2.f : -8.f,
                                             kind == kRmsNorm ? 2.f : 8.f);
    std::uniform_real_distribution<float> wd(0.5f, 1.5f);
    std::vector<uint16_t> x(n), w(cols);
    for (auto& v : x) v = FToBf(xd(rng));
    for (auto& v : w) v = FToBf(wd(rng));
    // The CPU reference, in double from the bf16 inputs.
    p->want_.resize(n);
    for (int r = 0; r < rows; ++r) {
      const uint16_t* xr = &x[static_cast<size_t>(r) * cols];
      float* out = &p->want_[static_cast<size_t>(r) * cols];
      if (kind == kRmsNorm) {
        double ss = 0;
        for (int c = 0; c < cols; ++c)
          ss += double(BfToF(xr[c])) * BfToF(xr[c]);
        const double inv = 1.0 / std::sqrt(ss / cols + kEps);
        for (int c = 0; c < cols; ++c)
          out[c] = float(BfToF(xr[c]) * inv * BfToF(w[c]));
      } else {
        double m = -INFINITY, sum = 0;
        for (int c = 0; c < cols; ++c) m = std::max(m, double(BfToF(xr[c])));
        for (int c = 0; c < cols; ++c) sum += std::exp(BfToF(xr[c]) - m);
        for (int c = 0; c < cols; ++c)
          out[c] = float(std::exp(BfToF(xr[c]) - m) / sum);
      }
    }
    absl::StatusOr<uint64_t> dx = p->buf_.Upload(x.data(), n * 2);
    if (!dx.ok()) return dx.status();
    absl::StatusOr<uint64_t> dw = p->buf_.Upload(w.data(), cols * 2ull);
    if (!dw.ok()) return dw.status();
    absl::StatusOr<uint64_t> dy = p->buf_.Alloc(n * 2);
    if (!dy.ok()) return dy.status();
    p->y_ = *dy;
    p->args_ = {PtrArg(*dx)};
    if (kind == kRmsNorm) p->args_.push_back(PtrArg(*dw));
    p->args_.push_back(PtrArg(*dy));
    p->args_.push_back(I32Arg(rows));
    p->args_.push_back(I32Arg(cols));
    if (kind == kRmsNorm) p->args_.push_back(F32Arg(kEps));
    return std::unique_ptr<Problem>(std::move(p));
  }

  const std::vector<fj_arg>& Args() override { return args_; }
  void Configure(const Shape& s, int sms, fj_copy_impl,
                 fj_launch_config* cfg) const override {
    const uint64_t row = 2ull * cols_;
    cfg->grid[0] = static_cast<uint32_t>(s.ctas_per_sm * sms);
    cfg->block[0] = static_cast<uint32_t>(s.threads);
    cfg->shared_bytes = 128 + (kind_ == kRmsNorm ? Round128(row) : 0) +
                        s.stages * Round128(row * (s.threads / 32));
  }
  absl::Status Poison() override {
    return buf_.Poison(y_, 2ull * rows_ * cols_);
  }
  std::vector<std::pair<uint64_t, uint64_t>> Outputs() const override {
    return {{y_, 2ull * rows_ * cols_}};
  }
  absl::Status Check(const void* const* outputs) const override {
    const size_t n = static_cast<size_t>(rows_) * cols_;
    const uint16_t* y = static_cast<const uint16_t*>(outputs[0]);
    std::vector<float> got(n);
    for (size_t i = 0; i < n; ++i) got[i] = BfToF(y[i]);
    return Compare(got.data(), want_, kRtol, kind_ == kRmsNorm ? 1e-6 : 1e-9,
                   cols_);
  }
  std::string Tolerance() const override {
    return absl::StrFormat("|d| <= |ref| / 256 + %g (bf16 output)",
                           kind_ == kRmsNorm ? 1e-6 : 1e-9);
  }

 private:
  RowProblem(fj_runtime* rt, int device) : buf_(rt, device) {}
  Buffers buf_;
  Kind kind_ = kRmsNorm;
  int rows_ = 0, cols_ = 0;
  uint64_t y_ = 0;
  std::vector<fj_arg> args_;
  std::vector<float> want_;
};

// -------------------------------------------------------------- transpose
// out[cols][rows] = in[rows][cols], f32, square box {box, box}.
class TransposeProblem : public Problem {
 public:
  static absl::StatusOr<std::unique_ptr<Problem>> Make(fj_runtime* rt,
                                                       int device,
                                                       uint32_t seed, int rows,
                                                       int cols, int box) {
    auto p =
        std::unique_ptr<TransposeProblem>(new TransposeProblem(rt, device));
    p->rows_ = rows;
    p->cols_ = cols;
    const size_t n = static_cast<size_t>(rows) * cols;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> d(-1000.f, 1000.f);
    std::vector<float> in(n);
    for (auto& v : in) v = d(rng);
    p->want_.resize(n);
    for (int r = 0; r < rows; ++r) {
      for (int c = 0; c < cols; ++c) {
        p->want_[static_cast<size_t>(c) * rows + r] =
            in[static_cast<size_t>(r) * cols + c];
      }
    }
    absl::StatusOr<uint64_t> din = p->buf_.Upload(in.data(), n * 4);
    if (!din.ok()) return din.status();
    absl::StatusOr<uint64_t> dout = p->buf_.Alloc(n * 4);
    if (!dout.ok()) return dout.status();
    p->out_ = *dout;
    p->in_shape_[0] = rows;
    p->in_shape_[1] = cols;
    p->out_shape_[0] = cols;
    p->out_shape_[1] = rows;
    p->in_t_ = fj_tensor{reinterpret_cast<void*>(*din),
                         {2, device},
                         2,
                         {2, 32, 1},
                         p->in_shape_,
                         nullptr,
                         0};
    p->out_t_ = fj_tensor{reinterpret_cast<void*>(*dout),
                          {2, device},
                          2,
                          {2, 32, 1},
                          p->out_shape_,
                          nullptr,
                          0};
    for (fj_tensor_arg* a : {&p->in_arg_, &p->out_arg_}) {
      a->struct_size = sizeof(fj_tensor_arg);
      a->oob = FJ_OOB_ZEROS;
    }
    p->in_arg_.tensor = &p->in_t_;
    p->out_arg_.tensor = &p->out_t_;
    p->args_ = {TensorArg(&p->in_arg_), TensorArg(&p->out_arg_), I32Arg(0),
                I32Arg(0)};
    p->SetBox(box);
    return std::unique_ptr<Problem>(std::move(p));
  }

  // The shape's tile: 32 when its defines have "TR_BOX=32", else the
  // example's default, 64.
  static int Box(const Shape& s) {
    return ShapeHasDefine(s, "TR_BOX=32") ? 32 : 64;
  }
  int ArgsGroup(const Shape& s) const override { return Box(s); }
  const std::vector<fj_arg>& Args() override { return args_; }
  void Configure(const Shape& s, int sms, fj_copy_impl impl,
                 fj_launch_config* cfg) const override {
    const int box = Box(s);
    SetBox(box);
    cfg->grid[0] = static_cast<uint32_t>(s.ctas_per_sm * sms);
    cfg->block[0] = static_cast<uint32_t>(s.threads);
    // TR_OUTS out tiles: two under tma (a bulk store in flight), else one.
    const int outs = impl == FJ_COPY_IMPL_TMA ? 2 : 1;
    cfg->shared_bytes = 128 + (s.stages + outs) * box * box * 4;
  }
  absl::Status Poison() override {
    return buf_.Poison(out_, 4ull * rows_ * cols_);
  }
  std::vector<std::pair<uint64_t, uint64_t>> Outputs() const override {
    return {{out_, 4ull * rows_ * cols_}};
  }
  absl::Status Check(const void* const* outputs) const override {
    return Compare(static_cast<const float*>(outputs[0]), want_, 0, 0, rows_);
  }
  std::string Tolerance() const override { return "exact"; }

 private:
  TransposeProblem(fj_runtime* rt, int device) : buf_(rt, device) {}
  // Both tensors' box and the tile counts the kernel takes (Args() points
  // at in_arg_ and out_arg_).
  void SetBox(int box) const {
    for (fj_tensor_arg* a : {&in_arg_, &out_arg_}) {
      a->box[0] = a->box[1] = static_cast<uint32_t>(box);
    }
    const int tiles_x = (cols_ + box - 1) / box;
    args_[2] = I32Arg(tiles_x);
    args_[3] = I32Arg(tiles_x * ((rows_ + box - 1) / box));
  }
  Buffers buf_;
  int rows_ = 0, cols_ = 0;
  uint64_t out_ = 0;
  int64_t in_shape_[2] = {}, out_shape_[2] = {};
  fj_tensor in_t_{}, out_t_{};
  mutable fj_tensor_arg in_arg_{}, out_arg_{};  // box set per shape
  mutable std::vector<fj_arg> args_;
  std::vector<float> want_;
};

KernelCase RowCase(RowProblem::Kind kind, int rows, int cols) {
  const bool rms = kind == RowProblem::kRmsNorm;
  KernelCase c;
  c.kernel = rms ? "rmsnorm" : "softmax";
  c.name = absl::StrFormat("%s [%d, %d] bf16", c.kernel, rows, cols);
  c.example = absl::StrCat("examples/", c.kernel, ".cu");
  c.entry = c.kernel;
  c.stages_macro = rms ? "RMS_STAGES" : "SMX_STAGES";
  c.copy_bytes = 2ull * rows * cols;
  // {threads, CTAs/SM, stages}: SMEM per SM stays <= 227 KiB (a shape
  // past it runs with fewer resident CTAs). Three pipeline depths (three
  // builds per implementation). The 1-stage shapes with many small CTAs
  // (1-8 rows each) are for sync: there fj::load is the block's own
  // ld/st, whose latency no stage of the same CTA hides, so other resident
  // CTAs must (softmax 8-64 KiB per CTA, RMSNorm 8 KiB more for w).
  c.shapes = {{256, 1, 2}, {128, 2, 2}, {128, 3, 2}, {64, 4, 3},  {128, 4, 1},
              {256, 2, 1}, {128, 5, 1}, {128, 6, 1}, {256, 3, 1}, {64, 6, 2},
              {64, 8, 1},  {64, 12, 1}, {32, 16, 1}, {32, 24, 1}};
  // Not here: -DFJ_FAST_UNROLL=16 (a 4096-wide row's 16 loads per thread
  // in one batch). Under sync, its target, it lost on the H200 (RMSNorm
  // 54-62 against 51.6 us; 2026-12-03-h200-transpose-direct-decode-
  // producer-269c5c2.txt).
  if (rms) {
    // Each refill also warms L2 with the next group (-DRMS_L2AHEAD=1) or
    // two, for sync's small CTAs: their load then reads L2 (0.73 -> 0.75
    // and 0.74 -> 0.78 of the copy at 32/24/1, H200, 2026-12-04). Not
    // here: the weights read from GMEM instead of SMEM (half the SMEM of a
    // one-warp CTA), which no implementation picked.
    for (Shape s : std::vector<Shape>{
             {32, 24, 1}, {32, 16, 1}, {64, 12, 1}, {64, 8, 1}, {128, 4, 1}}) {
      s.define = "RMS_L2AHEAD=1";
      c.shapes.push_back(s);
    }
    c.shapes.push_back({32, 24, 1, "RMS_L2AHEAD=2"});
  }
  if (!rms) {
    // The softmax's row read once from SMEM into registers (about 160
    // registers: fewer resident warps) instead of twice.
    for (Shape s : std::vector<Shape>{
             {128, 3, 2}, {128, 2, 2}, {256, 1, 2}, {128, 4, 1}, {64, 6, 2}}) {
      s.define = "SMX_RVECS=16";
      c.shapes.push_back(s);
    }
  }
  c.make = [=](fj_runtime* rt, int device, uint32_t seed) {
    return RowProblem::Make(rt, device, seed, kind, rows, cols);
  };
  return c;
}

KernelCase TransposeCase(int rows, int cols, const char* what) {
  KernelCase c;
  c.kernel = "transpose";
  c.name = absl::StrFormat("transpose [%d, %d] f32 %s", rows, cols, what);
  c.example = "examples/transpose.cu";
  c.entry = "transpose";
  c.stages_macro = "TR_STAGES";
  c.copy_bytes = 4ull * rows * cols;
  // Box 64 (16 KiB tiles): SMEM = (stages + out tiles) * 16 KiB, two out
  // tiles under tma, one elsewhere. The 1-stage shapes are for sync (its
  // loads are the block's own; other CTAs hide them): 32 KiB per CTA.
  c.shapes = {{256, 2, 3}, {256, 3, 2}, {128, 3, 2}, {256, 2, 4}, {128, 4, 1},
              {256, 4, 1}, {128, 6, 1}, {128, 4, 2}, {64, 8, 1},  {128, 2, 4}};
  // The layer's fast-path batch at 4 chunks per thread instead of 8. It
  // cut the sync build from 161-166 registers to 128 while the slow paths
  // batched 8 chunks too; since FJ_SLOW_UNROLL it saves none (96-128 either
  // way, ptxas, sm_90), but it still wins the aligned transpose under sync
  // (128/4/1, H200, 2026-12-03-h200-box32-group8-941f243.txt).
  for (Shape s : std::vector<Shape>{{128, 4, 1}, {128, 3, 2}, {256, 2, 1}}) {
    s.define = "FJ_FAST_UNROLL=4";
    c.shapes.push_back(s);
  }
  // A register cap (the example's TR_MAXNREG): 96 registers for 5 CTAs
  // of 128 threads per SM, 80 for 6, at the cost of spills in the layer's
  // rarely taken paths.
  for (Shape s : std::vector<Shape>{{128, 5, 1}, {128, 4, 2}}) {
    s.define = "TR_MAXNREG=96";
    c.shapes.push_back(s);
  }
  for (Shape s : std::vector<Shape>{{128, 6, 1}, {128, 5, 1}}) {
    s.define = "TR_MAXNREG=80";
    c.shapes.push_back(s);
  }
  // The narrow row path at the call site (-DFJ_NARROW_INLINE=1): +7-11 %
  // on the ragged transpose under cp_async and tma, -4 % on the aligned
  // one under cp_async (H200), so the tuner picks it per problem.
  for (Shape s : std::vector<Shape>{{128, 4, 2}, {128, 4, 1}, {128, 6, 1}}) {
    s.define = "FJ_NARROW_INLINE=1";
    c.shapes.push_back(s);
  }
  // 32 x 32 tiles (4 KiB; rows of one 128-byte line): more, smaller CTAs
  // in flight per SM (64 threads move a tile's 64 4 x 4 blocks; 32
  // threads two each, for up to 25 resident CTAs at 80 registers where
  // 64 threads fit 12).
  for (Shape s : std::vector<Shape>{{64, 16, 2},
                                    {64, 24, 1},
                                    {64, 16, 3},
                                    {128, 12, 2},
                                    {128, 8, 3},
                                    {32, 24, 1},
                                    {32, 24, 2}}) {
    s.define = "TR_BOX=32";
    c.shapes.push_back(s);
  }
  // Both: +8 % on the aligned transpose under cp_async against box 32
  // alone (0.785 against 0.729, H200, bench/transpose_variants.py), and
  // the narrow path's gain on the ragged one.
  for (Shape s :
       std::vector<Shape>{{64, 24, 1}, {32, 24, 2}, {64, 16, 2}, {32, 24, 1}}) {
    s.define = "TR_BOX=32 FJ_NARROW_INLINE=1";
    c.shapes.push_back(s);
  }
  // Each refill also warms L2 with the next tile (-DTR_L2AHEAD=1), for
  // sync, whose load_tile waits for the block's own loads: the ragged
  // transpose under sync took it in both runs (0.493-0.497 of the copy
  // against 0.485-0.488, H200, 2026-12-04); the aligned one never did.
  c.shapes.push_back({128, 4, 1, "TR_L2AHEAD=1"});
  c.shapes.push_back({128, 4, 1, "TR_L2AHEAD=1 FJ_NARROW_INLINE=1"});
  c.make = [=](fj_runtime* rt, int device, uint32_t seed) {
    return TransposeProblem::Make(rt, device, seed, rows, cols, 64);
  };
  return c;
}

// The GPU, a stream on it (a driver CUstream wrapped for fj_launch) and the
// driver entry points for events and the anchor copy.
class Gpu {
 public:
  static absl::StatusOr<std::unique_ptr<Gpu>> Open(int device) {
    auto g = std::unique_ptr<Gpu>(new Gpu());
    REFK_RETURN_IF_ERROR(
        Fj(fj_runtime_create(nullptr, &g->rt_), "fj_runtime_create"));
    int32_t count = 0;
    REFK_RETURN_IF_ERROR(
        Fj(fj_device_count(g->rt_, &count), "fj_device_count"));
    if (count == 0) {
      return absl::UnavailableError(
          absl::StrCat("no GPU (", fj_runtime_driver_error(g->rt_), ")"));
    }
    if (device < 0 || device >= count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "device ", device, ": this host has ", count, " GPU(s)"));
    }
    g->device_ = device;
    fj_device_info info{};
    info.struct_size = sizeof(info);
    REFK_RETURN_IF_ERROR(
        Fj(fj_device_info_get(g->rt_, device, &info), "device info"));
    g->sms_ = info.sm_count;
    g->shared_optin_ = info.shared_memory_per_block_optin;
    g->name_ = absl::StrFormat("%s (sm_%d%d, %d SMs)", info.name, info.cc_major,
                               info.cc_minor, info.sm_count);
    absl::StatusOr<DriverApiPtr> api = LoadDriverApi("");
    if (!api.ok()) return api.status();
    g->api_ = std::move(*api);
    const DriverApi& a = *g->api_;
    CUdevice dev;
    REFK_RETURN_IF_ERROR(FJ_CU_CALL(a, cuDeviceGet, &dev, device));
    REFK_RETURN_IF_ERROR(
        FJ_CU_CALL(a, cuDevicePrimaryCtxRetain, &g->ctx_, dev));
    REFK_RETURN_IF_ERROR(FJ_CU_CALL(a, cuCtxSetCurrent, g->ctx_));
    REFK_RETURN_IF_ERROR(
        FJ_CU_CALL(a, cuStreamCreate, &g->stream_, CU_STREAM_NON_BLOCKING));
    REFK_RETURN_IF_ERROR(FJ_CU_CALL(a, cuEventCreate, &g->e0_, 0));
    REFK_RETURN_IF_ERROR(FJ_CU_CALL(a, cuEventCreate, &g->e1_, 0));
    REFK_RETURN_IF_ERROR(
        Fj(fj_stream_wrap(g->rt_, device,
                          reinterpret_cast<uint64_t>(g->stream_), &g->wrapped_),
           "fj_stream_wrap"));
    return g;
  }
  ~Gpu() {
    fj_status_free(fj_stream_destroy(wrapped_));
    if (api_ != nullptr) {
      if (e0_ != nullptr) api_->cuEventDestroy(e0_);
      if (e1_ != nullptr) api_->cuEventDestroy(e1_);
      if (stream_ != nullptr) api_->cuStreamDestroy(stream_);
      CUdevice dev;
      if (ctx_ != nullptr && api_->cuDeviceGet(&dev, device_) == CUDA_SUCCESS) {
        api_->cuDevicePrimaryCtxRelease(dev);
      }
    }
    fj_status_free(fj_runtime_destroy(rt_));
  }

  fj_runtime* rt() const { return rt_; }
  fj_stream* stream() const { return wrapped_; }
  int sms() const { return sms_; }
  // The device's own shared memory per block (opt-in), from the driver:
  // 232448 bytes on an H100 or B200, 101376 on consumer Blackwell.
  int shared_optin() const { return shared_optin_; }
  int device() const { return device_; }
  const std::string& name() const { return name_; }

  // GPU milliseconds per call of `work` (which enqueues on stream()): the
  // median of `samples` event timings of `batch` calls, after 3 warm-ups.
  absl::StatusOr<double> TimeMs(const std::function<absl::Status()>& work,
                                int samples, int batch) {
    const DriverApi& a = *api_;
    REFK_RETURN_IF_ERROR(FJ_CU_CALL(a, cuCtxSetCurrent, ctx_));
    for (int i = 0; i < 3; ++i) REFK_RETURN_IF_ERROR(work());
    std::vector<double> ms;
    for (int s = 0; s < samples; ++s) {
      REFK_RETURN_IF_ERROR(FJ_CU_CALL(a, cuEventRecord, e0_, stream_));
      for (int i = 0; i < batch; ++i) REFK_RETURN_IF_ERROR(work());
      REFK_RETURN_IF_ERROR(FJ_CU_CALL(a, cuEventRecord, e1_, stream_));
      REFK_RETURN_IF_ERROR(FJ_CU_CALL(a, cuEventSynchronize, e1_));
      float t = 0;
      REFK_RETURN_IF_ERROR(FJ_CU_CALL(a, cuEventElapsedTime, &t, e0_, e1_));
      ms.push_back(double(t) / batch);
    }
    return measure::Median(std::move(ms));
  }
  // The anchor: cuMemcpyDtoDAsync of `bytes` on the same stream.
  absl::StatusOr<double> CopyMs(uint64_t bytes, int samples, int batch) {
    uint64_t src = 0, dst = 0;
    absl::Status st =
        Fj(fj_mem_alloc(rt_, device_, bytes, &src), "fj_mem_alloc");
    if (st.ok())
      st = Fj(fj_mem_alloc(rt_, device_, bytes, &dst), "fj_mem_alloc");
    if (st.ok())
      st = Fj(fj_memset_d8(rt_, src, 0x5A, bytes, nullptr), "memset");
    absl::StatusOr<double> ms = 0.0;
    if (!st.ok()) ms = st;
    if (st.ok()) {
      const DriverApi& a = *api_;
      ms = TimeMs(
          [&] {
            return FJ_CU_CALL(a, cuMemcpyDtoDAsync, dst, src, bytes, stream_);
          },
          samples, batch);
    }
    if (src != 0) fj_status_free(fj_mem_free(rt_, src));
    if (dst != 0) fj_status_free(fj_mem_free(rt_, dst));
    return ms;
  }
  absl::Status Sync() { return Fj(fj_stream_synchronize(wrapped_), "sync"); }

 private:
  Gpu() = default;
  fj_runtime* rt_ = nullptr;
  DriverApiPtr api_;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  CUevent e0_ = nullptr, e1_ = nullptr;
  fj_stream* wrapped_ = nullptr;
  int device_ = 0, sms_ = 0, shared_optin_ = 0;
  std::string name_;
};

// A built kernel of one case and variant at one pipeline depth.
struct Built {
  fj_module* module = nullptr;
  fj_kernel* kernel = nullptr;
  ~Built() { fj_status_free(fj_module_destroy(module)); }
};

absl::StatusOr<std::unique_ptr<Built>> BuildKernel(fj_runtime* rt,
                                                   const KernelCase& c,
                                                   const Variant& v,
                                                   const Shape& s) {
  auto b = std::make_unique<Built>();
  absl::StatusOr<fj_module*> m =
      Build(rt, c, v, s.stages, "", FJ_OUTPUT_AUTO, s.define);
  if (!m.ok()) return m.status();
  b->module = *m;
  REFK_RETURN_IF_ERROR(
      Fj(fj_module_get_kernel(b->module, fj_str{c.entry.data(), c.entry.size()},
                              0, &b->kernel),
         "fj_module_get_kernel"));
  return b;
}

// The sweep of step 1 through fj_tune, for the shapes of one ArgsGroup:
// each shape's build options are a macro set ("-DRMS_STAGES=2
// -DSMX_RVECS=16 -DFJ_REFK_CTAS_PER_SM=3"), its block and SMEM an
// fj_tune_shape, and grid_fn gives its grid (Configure's) and skips the
// pairs that are no shape of the case. The CTAs per SM are a macro the
// kernels never read: a persistent grid depends on them, and two shapes
// that differ only there would otherwise be one candidate.
struct TuneGroup {
  const Problem* problem = nullptr;
  int sms = 0;
  fj_copy_impl impl = FJ_COPY_IMPL_AUTO;
  std::vector<Shape> shapes;            // the case's shapes in this group
  std::vector<std::string> macro_sets;  // distinct
  std::vector<fj_tune_shape> launch;    // distinct (block, SMEM)
  // (macro set, launch shape) -> index into `shapes`.
  std::vector<std::vector<int>> shape_of;
};

int32_t TuneGrid(void* user, size_t candidate, fj_str, const fj_tune_shape*,
                 uint32_t out_grid[3]) {
  const TuneGroup& g = *static_cast<const TuneGroup*>(user);
  const size_t m = candidate / g.launch.size(), l = candidate % g.launch.size();
  if (m >= g.shape_of.size() || g.shape_of[m][l] < 0) return 1;  // no shape
  fj_launch_config cfg{};
  cfg.struct_size = sizeof(cfg);
  g.problem->Configure(g.shapes[g.shape_of[m][l]], g.sms, g.impl, &cfg);
  for (int i = 0; i < 3; ++i) out_grid[i] = cfg.grid[i];
  return 0;
}

int32_t TuneCheck(void* user, size_t, const void* const* outputs,
                  const uint64_t*, size_t) {
  return static_cast<const Problem*>(user)->Check(outputs).ok() ? 1 : 0;
}

// Tunes `shapes` (one ArgsGroup of `c`) for `v`: the winner and its median
// GPU ms, each OK row in r->tried, and how the result came in r->tuning.
absl::Status TuneShapes(fj_runtime* rt, int sms, const KernelCase& c,
                        const Variant& v, Problem& p,
                        const std::vector<Shape>& shapes, Result* r,
                        Shape* best, double* best_ms) {
  TuneGroup g;
  g.problem = &p;
  g.sms = sms;
  g.impl = v.impl;
  g.shapes = shapes;
  std::vector<std::pair<int, int>> at;  // per shape: (macro set, launch)
  for (const Shape& s : shapes) {
    const std::string m =
        absl::StrCat(absl::StrJoin(ShapeDefines(c, s.stages, s.define), " "),
                     " -DFJ_REFK_CTAS_PER_SM=", s.ctas_per_sm);
    fj_launch_config cfg{};
    cfg.struct_size = sizeof(cfg);
    p.Configure(s, sms, v.impl, &cfg);
    const auto mi = std::find(g.macro_sets.begin(), g.macro_sets.end(), m);
    const int mx = static_cast<int>(mi - g.macro_sets.begin());
    if (mi == g.macro_sets.end()) g.macro_sets.push_back(m);
    int lx = 0;
    for (; lx < static_cast<int>(g.launch.size()); ++lx) {
      if (g.launch[lx].block[0] == cfg.block[0] &&
          g.launch[lx].shared_bytes == cfg.shared_bytes) {
        break;
      }
    }
    if (lx == static_cast<int>(g.launch.size())) {
      fj_tune_shape ts{};
      ts.struct_size = sizeof(ts);
      ts.block[0] = cfg.block[0];
      ts.shared_bytes = cfg.shared_bytes;
      g.launch.push_back(ts);
    }
    at.emplace_back(mx, lx);
  }
  g.shape_of.assign(g.macro_sets.size(), std::vector<int>(g.launch.size(), -1));
  for (size_t i = 0; i < at.size(); ++i) {
    g.shape_of[at[i].first][at[i].second] = static_cast<int>(i);
  }
  // The group's Args() (the GEMM's box follows the shape).
  fj_launch_config first{};
  first.struct_size = sizeof(first);
  p.Configure(shapes[0], sms, v.impl, &first);

  absl::StatusOr<std::string> source = Source(c);
  if (!source.ok()) return source.status();
  const std::string name = c.example.substr(c.example.rfind('/') + 1);
  fj_build_options b{};
  b.struct_size = sizeof(b);
  b.source = Str(*source);
  b.name = Str(name);
  b.target = Str(v.target);
  b.copy_impl = v.impl;
  std::vector<fj_str> macros;
  for (const std::string& m : g.macro_sets) macros.push_back(Str(m));
  std::vector<uint64_t> out_addr, out_bytes;
  for (const auto& [a, n] : p.Outputs()) {
    out_addr.push_back(a);
    out_bytes.push_back(n);
  }
  const std::vector<fj_arg>& args = p.Args();
  fj_tune_options o{};
  o.struct_size = sizeof(o);
  o.build = &b;
  o.kernel = Str(c.entry);
  o.macro_sets = macros.data();
  o.num_macro_sets = macros.size();
  o.shapes = g.launch.data();
  o.num_shapes = g.launch.size();
  o.grid_fn = TuneGrid;
  o.grid_user = &g;
  o.args = args.data();
  o.num_args = args.size();
  o.output_addresses = out_addr.data();
  o.output_bytes = out_bytes.data();
  o.num_outputs = out_addr.size();
  o.check_fn = TuneCheck;
  o.check_user = &p;
  fj_tune_result* res = nullptr;
  REFK_RETURN_IF_ERROR(
      Fj(fj_tune(rt, &o, &res), absl::StrCat("fj_tune of ", c.name)));
  fj_tune_summary sum{};
  sum.struct_size = sizeof(sum);
  absl::Status st = Fj(fj_tune_result_summary(res, &sum), "summary");
  for (size_t i = 0; st.ok() && i < sum.num_rows; ++i) {
    fj_tune_row row{};
    row.struct_size = sizeof(row);
    st = Fj(fj_tune_result_row(res, i, &row), "row");
    if (!st.ok() || row.status != FJ_TUNE_OK) continue;
    const int k = g.shape_of[row.macro_index][row.shape_index];
    if (k < 0) continue;
    const double ms = row.median_us * 1e-3;
    r->tried.emplace_back(shapes[k], ms);
    if (i == sum.winner && ms < *best_ms) {
      *best_ms = ms;
      *best = shapes[k];
    }
  }
  if (st.ok()) {
    static const char* const kSource[] = {"", "memory", "disk", "remote"};
    const std::string how =
        sum.source == FJ_CACHE_COMPILED
            ? absl::StrFormat("tuned in %.1f s%s", sum.tune_ms * 1e-3,
                              sum.stored ? "" : " (not stored: noisy)")
            : absl::StrFormat("stored (%s), looked up in %.2f ms",
                              kSource[sum.source & 3], sum.lookup_ms);
    absl::StrAppend(&r->tuning, r->tuning.empty() ? "" : "; ", how);
  }
  fj_status_free(fj_tune_result_free(res));
  return st;
}

}  // namespace

const std::vector<Variant>& Variants() {
  static const std::vector<Variant> v = {
      {"tma", FJ_COPY_IMPL_TMA, ""},
      {"cp_async", FJ_COPY_IMPL_CP_ASYNC, ""},
      {"sync", FJ_COPY_IMPL_SYNC, ""},
      {"cp_async@compute_80", FJ_COPY_IMPL_CP_ASYNC, "compute_80"},
  };
  return v;
}

const std::vector<KernelCase>& Cases() {
  static const std::vector<KernelCase> cases = {
      RowCase(RowProblem::kRmsNorm, 8192, 4096),
      RowCase(RowProblem::kRmsNorm, 8191, 4000),
      RowCase(RowProblem::kSoftmax, 8192, 4096),
      TransposeCase(5000, 4100, "aligned"),
      TransposeCase(4097, 3001, "ragged"),
      PagedDecodeCase(),
      GemmMmaCase(4096),
  };
  return cases;
}

absl::StatusOr<std::string> Source(const KernelCase& c) {
  const bundled::BundledKernel* k = bundled::FindBundledKernel(c.example);
  if (k == nullptr) {
    return absl::NotFoundError(absl::StrCat(c.example, " is not bundled"));
  }
  return std::string(k->content);
}

std::string ShapeName(const Shape& s) {
  return absl::StrFormat("%d/%d/%d%s%s", s.threads, s.ctas_per_sm, s.stages,
                         s.define ? "," : "", s.define ? s.define : "");
}

bool ShapeHasDefine(const Shape& s, absl::string_view def) {
  if (s.define == nullptr) return false;
  for (absl::string_view d : absl::StrSplit(s.define, ' ', absl::SkipEmpty())) {
    if (d == def) return true;
  }
  return false;
}

std::vector<std::string> ShapeDefines(const KernelCase& c, int stages,
                                      const char* define) {
  std::vector<std::string> d = {
      absl::StrCat("-D", c.stages_macro, "=", stages)};
  if (define != nullptr) {
    for (absl::string_view x : absl::StrSplit(define, ' ', absl::SkipEmpty()))
      d.push_back(absl::StrCat("-D", x));
  }
  return d;
}

absl::StatusOr<fj_module*> Build(fj_runtime* rt, const KernelCase& c,
                                 const Variant& v, int stages,
                                 const std::string& target, fj_output output,
                                 const char* define) {
  absl::StatusOr<std::string> source = Source(c);
  if (!source.ok()) return source.status();
  const std::vector<std::string> defs = ShapeDefines(c, stages, define);
  const std::string name = c.example.substr(c.example.rfind('/') + 1);
  const std::string tgt = target.empty() ? v.target : target;
  std::vector<fj_str> opts;
  for (const std::string& d : defs) opts.push_back(Str(d));
  fj_build_options o{};
  o.struct_size = sizeof(o);
  o.source = Str(*source);
  o.name = Str(name);
  o.nvrtc_options = opts.data();
  o.num_nvrtc_options = opts.size();
  o.target = Str(tgt);
  o.copy_impl = v.impl;
  o.output = output;
  fj_module* m = nullptr;
  REFK_RETURN_IF_ERROR(Fj(fj_module_build(rt, &o, &m),
                          absl::StrCat("building ", c.example, " (", v.name,
                                       tgt.empty() ? "" : " for ", tgt, ")")));
  return m;
}

absl::StatusOr<std::vector<Result>> Run(const RunOptions& options,
                                        std::string* device_name) {
  absl::StatusOr<std::unique_ptr<Gpu>> gpu_or = Gpu::Open(options.device);
  if (!gpu_or.ok()) return gpu_or.status();
  Gpu& gpu = **gpu_or;
  if (device_name != nullptr) *device_name = gpu.name();
  std::vector<Result> results;
  uint32_t seed = std::random_device{}();
  for (const KernelCase& c : Cases()) {
    if (!options.filter.empty() &&
        c.name.find(options.filter) == std::string::npos) {
      continue;
    }
    absl::StatusOr<std::unique_ptr<Problem>> p =
        c.make(gpu.rt(), gpu.device(), seed++);
    if (!p.ok()) return p.status();
    for (const Variant& v : Variants()) {
      if (!options.variant.empty() && options.variant != v.name) continue;
      Result r;
      r.kernel = c.name;
      r.impl = v.name;
      // 1. Each shape briefly; the fastest is kept.
      std::vector<Shape> shapes = c.shapes;
      if (!options.sweep) shapes.resize(1);
      if (options.shape.threads > 0) shapes = {options.shape};
      double best = 1e30;
      std::string why;
      // Shapes this device's shared memory per block cannot hold (the table
      // is sized for 227 KiB; consumer Blackwell has 99 KiB) are not built:
      // the launch check would refuse each of them.
      size_t too_big = 0;
      for (auto it = shapes.begin(); it != shapes.end();) {
        fj_launch_config cfg{};
        cfg.struct_size = sizeof(cfg);
        (*p)->Configure(*it, gpu.sms(), v.impl, &cfg);
        if (gpu.shared_optin() > 0 &&
            cfg.shared_bytes > static_cast<uint32_t>(gpu.shared_optin())) {
          it = shapes.erase(it);
          ++too_big;
        } else {
          ++it;
        }
      }
      if (too_big > 0) {
        why = absl::StrCat(too_big,
                           " shape(s) need more shared memory than "
                           "this GPU's ",
                           gpu.shared_optin(), " bytes per block");
      }
      if (options.tune && options.shape.threads <= 0) {
        // fj_tune, one call per ArgsGroup; the fastest winner is kept.
        std::vector<int> groups;
        for (const Shape& s : shapes) {
          const int gi = (*p)->ArgsGroup(s);
          if (std::find(groups.begin(), groups.end(), gi) == groups.end())
            groups.push_back(gi);
        }
        // Poisoned outputs: every check run starts from them (fj_tune
        // restores its saved copy), so a shape that skips an element fails.
        REFK_RETURN_IF_ERROR((*p)->Poison());
        for (int gi : groups) {
          std::vector<Shape> in_group;
          for (const Shape& s : shapes) {
            if ((*p)->ArgsGroup(s) == gi) in_group.push_back(s);
          }
          absl::Status st = TuneShapes(gpu.rt(), gpu.sms(), c, v, **p, in_group,
                                       &r, &r.shape, &best);
          if (!st.ok()) why = std::string(st.message());
        }
        shapes.clear();  // the loop below times nothing more
      }
      for (const Shape& s : shapes) {
        absl::StatusOr<std::unique_ptr<Built>> b =
            BuildKernel(gpu.rt(), c, v, s);
        if (!b.ok()) {
          why = std::string(b.status().message());
          break;
        }
        fj_launch_config cfg{};
        cfg.struct_size = sizeof(cfg);
        cfg.stream = gpu.stream();
        (*p)->Configure(s, gpu.sms(), v.impl, &cfg);
        const std::vector<fj_arg>& args = (*p)->Args();
        fj_kernel* k = (*b)->kernel;
        absl::StatusOr<double> ms = gpu.TimeMs(
            [&] {
              return Fj(fj_launch(k, &cfg, args.data(), args.size()),
                        "fj_launch");
            },
            3, 3);
        if (!ms.ok()) {
          why = std::string(ms.status().message());  // e.g. SMEM refused
          continue;
        }
        r.tried.emplace_back(s, *ms);
        if (*ms < best) {
          best = *ms;
          r.shape = s;
        }
      }
      if (r.tried.empty()) {
        r.skipped = why.empty() ? "no shape launched" : why;
        results.push_back(r);
        if (options.on_result) options.on_result(results.back());
        continue;
      }
      // 2. The fastest fully, right after the anchor; then verified.
      absl::StatusOr<std::unique_ptr<Built>> b =
          BuildKernel(gpu.rt(), c, v, r.shape);
      if (!b.ok()) return b.status();
      fj_launch_config cfg{};
      cfg.struct_size = sizeof(cfg);
      cfg.stream = gpu.stream();
      (*p)->Configure(r.shape, gpu.sms(), v.impl, &cfg);
      const std::vector<fj_arg>& args = (*p)->Args();
      fj_kernel* k = (*b)->kernel;
      auto launch = [&] {
        return Fj(fj_launch(k, &cfg, args.data(), args.size()), "fj_launch");
      };
      absl::StatusOr<double> copy_ms =
          gpu.CopyMs(c.copy_bytes, options.samples, options.batch);
      if (!copy_ms.ok()) return copy_ms.status();
      absl::StatusOr<double> ms =
          gpu.TimeMs(launch, options.samples, options.batch);
      if (!ms.ok()) return ms.status();
      r.ms = *ms;
      r.copy_ms = *copy_ms;
      r.fraction = r.copy_ms / r.ms;
      r.dynamic_smem = static_cast<int>(cfg.shared_bytes);
      fj_kernel_info info{};
      info.struct_size = sizeof(info);
      REFK_RETURN_IF_ERROR(
          Fj(fj_kernel_info_get(k, &info), "fj_kernel_info_get"));
      r.regs = info.num_regs;
      r.static_smem = info.static_shared_bytes;
      REFK_RETURN_IF_ERROR(gpu.Sync());
      REFK_RETURN_IF_ERROR((*p)->Poison());
      REFK_RETURN_IF_ERROR(launch());
      REFK_RETURN_IF_ERROR(gpu.Sync());
      absl::Status ok = (*p)->Verify(gpu.rt());
      r.verified = ok.ok() ? "ok" : std::string(ok.message());
      results.push_back(r);
      if (options.on_result) options.on_result(results.back());
    }
  }
  return results;
}

absl::Status Problem::Verify(fj_runtime* rt) const {
  std::vector<std::vector<unsigned char>> host;
  std::vector<const void*> ptrs;
  for (const auto& [address, bytes] : Outputs()) {
    host.emplace_back(bytes);
    REFK_RETURN_IF_ERROR(
        Fj(fj_memcpy_dtoh(rt, host.back().data(), address, bytes, nullptr),
           "read back"));
  }
  for (const auto& h : host) ptrs.push_back(h.data());
  return Check(ptrs.data());
}

std::string FormatTable(const std::vector<Result>& results) {
  std::string out = absl::StrFormat(
      "%-36s %-20s %8s %9s %9s %5s %8s %-16s %s\n", "kernel", "impl", "of copy",
      "us", "copy us", "regs", "smem B", "shape thr/cta/st", "check");
  for (const Result& r : results) {
    if (!r.skipped.empty()) {
      absl::StrAppendFormat(&out, "%-36s %-20s not measured: %s\n", r.kernel,
                            r.impl, r.skipped);
      continue;
    }
    absl::StrAppendFormat(
        &out, "%-36s %-20s %8.3f %9.1f %9.1f %5d %8d %-16s %s\n", r.kernel,
        r.impl, r.fraction, r.ms * 1e3, r.copy_ms * 1e3, r.regs,
        r.static_smem + r.dynamic_smem, ShapeName(r.shape), r.verified);
  }
  return out;
}

}  // namespace fleetjit::refk
