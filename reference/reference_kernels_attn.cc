// The reference kernels' table entries for examples/paged_decode.cu and
// examples/gemm_mma.cu (reference/reference_kernels.h): the problems on the GPU
// and their CPU references. The GEMM's anchor here is the D2D copy of its
// operands and result, like every row of the table; its real anchor,
// cuBLAS, is measured by bench/attn_gemm_torch.py.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "conformance/c_abi.h"
#include "reference/reference_kernels.h"
#include "reference/reference_kernels_util.h"

namespace fleetjit::refk {
namespace {

using ::fleetjit::selftest::internal::F32Arg;
using ::fleetjit::selftest::internal::I32Arg;
using ::fleetjit::selftest::internal::PtrArg;
using ::fleetjit::selftest::internal::TensorArg;

// IEEE half <-> float on the host (round to nearest even).
uint16_t FToH(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t mant = x & 0x7FFFFFu;
  const int exp = static_cast<int>((x >> 23) & 0xFFu);
  if (exp == 0xFF)
    return static_cast<uint16_t>(sign | 0x7C00u | (mant ? 0x200u : 0));
  const int e = exp - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7C00u);
  if (e <= 0) {  // subnormal half
    if (e < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - e;
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(e) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;  // may carry to inf
  return static_cast<uint16_t>(sign | h);
}
float HToF(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 31u, mant = h & 1023u;
  float f;
  if (exp == 0) {
    f = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -f : f;
  }
  uint32_t x = exp == 31 ? sign | 0x7F800000u | (mant << 13)
                         : sign | ((exp - 15 + 127) << 23) | (mant << 13);
  std::memcpy(&f, &x, 4);
  return f;
}
constexpr uint16_t kHalfNan = 0x7E00;

absl::Status CompareAt(float got, double want, double rtol, double atol,
                       const std::string& where) {
  const double d = std::fabs(static_cast<double>(got) - want);
  if (d <= rtol * std::fabs(want) + atol) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat(
      "%s is %.9g, the CPU reference %.9g (tolerance %.3g * |ref| + %.3g)",
      where, got, want, rtol, atol));
}

// ------------------------------------------------------------ paged decode
// B sequences of ragged lengths (1, 16, 17 and 4096 always among them) over
// H heads of 128, 16-token pages in a shuffled cache with 64 pages nobody
// owns. Every element of the cache that no sequence owns is NaN: unowned
// pages and each last page's rows past the length.
class DecodeProblem : public Problem {
 public:
  static constexpr int kB = 32, kH = 16, kD = 128, kPage = 16, kMaxLen = 4096;
  static constexpr int kMaxPages = kMaxLen / kPage;
  static constexpr int kChunkPages = 16;  // the example's CHUNK_PAGES
  static constexpr int kStagePages = 2;   // ... and STAGE_PAGES
  static constexpr int kChunks = kMaxPages / kChunkPages;
  static constexpr double kRtol = 1.0 / 512, kAtol = 1e-3;

  static absl::StatusOr<std::unique_ptr<Problem>> Make(fj_runtime* rt,
                                                       int device,
                                                       uint32_t seed) {
    auto p = std::unique_ptr<DecodeProblem>(new DecodeProblem(rt, device));
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> val(-1.f, 1.f);
    const std::vector<int> lens = Lengths();
    std::vector<int> seq_pages(kB);
    int used = 0;
    for (int b = 0; b < kB; ++b) {
      seq_pages[b] = (lens[b] + kPage - 1) / kPage;
      used += seq_pages[b];
    }
    const int num_pages = used + 64;
    std::vector<int> perm(num_pages);
    for (int i = 0; i < num_pages; ++i) perm[i] = i;
    std::shuffle(perm.begin(), perm.end(), rng);
    std::vector<int> table(static_cast<size_t>(kB) * kMaxPages, -1);
    for (int b = 0, off = 0; b < kB; off += seq_pages[b], ++b) {
      for (int i = 0; i < seq_pages[b]; ++i)
        table[b * kMaxPages + i] = perm[off + i];
    }
    const size_t page_elems = static_cast<size_t>(kH) * kPage * kD;
    const size_t cache_elems = page_elems * num_pages;
    std::vector<uint16_t> k(cache_elems, kHalfNan), v(cache_elems, kHalfNan);
    std::vector<uint16_t> q(static_cast<size_t>(kB) * kH * kD);
    for (auto& x : q) x = FToH(val(rng));
    // Fill the owned tokens; the rest stays NaN.
    for (int b = 0; b < kB; ++b) {
      for (int t = 0; t < lens[b]; ++t) {
        const int page = table[b * kMaxPages + t / kPage];
        for (int h = 0; h < kH; ++h) {
          const size_t row =
              (static_cast<size_t>(page) * kH + h) * kPage + t % kPage;
          for (int d = 0; d < kD; ++d) {
            k[row * kD + d] = FToH(val(rng));
            v[row * kD + d] = FToH(val(rng));
          }
        }
      }
    }
    // The CPU reference, in double from the f16 inputs.
    p->want_.resize(q.size());
    std::vector<double> s;
    for (int b = 0; b < kB; ++b) {
      for (int h = 0; h < kH; ++h) {
        const uint16_t* qh = &q[(static_cast<size_t>(b) * kH + h) * kD];
        s.assign(lens[b], 0);
        double mx = -INFINITY;
        for (int t = 0; t < lens[b]; ++t) {
          const int page = table[b * kMaxPages + t / kPage];
          const uint16_t* kr =
              &k[((static_cast<size_t>(page) * kH + h) * kPage + t % kPage) *
                 kD];
          double dot = 0;
          for (int d = 0; d < kD; ++d) dot += double(HToF(qh[d])) * HToF(kr[d]);
          s[t] = dot / std::sqrt(double(kD));
          mx = std::max(mx, s[t]);
        }
        double sum = 0;
        for (int t = 0; t < lens[b]; ++t) sum += (s[t] = std::exp(s[t] - mx));
        double* out = &p->want_[(static_cast<size_t>(b) * kH + h) * kD];
        for (int d = 0; d < kD; ++d) out[d] = 0;
        for (int t = 0; t < lens[b]; ++t) {
          const int page = table[b * kMaxPages + t / kPage];
          const uint16_t* vr =
              &v[((static_cast<size_t>(page) * kH + h) * kPage + t % kPage) *
                 kD];
          for (int d = 0; d < kD; ++d) out[d] += s[t] / sum * HToF(vr[d]);
        }
      }
    }
    Buffers& buf = p->buf_;
    absl::StatusOr<uint64_t> dk = buf.Upload(k.data(), cache_elems * 2);
    if (!dk.ok()) return dk.status();
    absl::StatusOr<uint64_t> dv = buf.Upload(v.data(), cache_elems * 2);
    if (!dv.ok()) return dv.status();
    absl::StatusOr<uint64_t> dq = buf.Upload(q.data(), q.size() * 2);
    if (!dq.ok()) return dq.status();
    absl::StatusOr<uint64_t> dt = buf.Upload(table.data(), table.size() * 4);
    if (!dt.ok()) return dt.status();
    absl::StatusOr<uint64_t> dl = buf.Upload(lens.data(), lens.size() * 4);
    if (!dl.ok()) return dl.status();
    const uint64_t part_bytes = 4ull * kB * kH * kChunks * (kD + 2);
    absl::StatusOr<uint64_t> dp = buf.Alloc(part_bytes);
    if (!dp.ok()) return dp.status();
    absl::StatusOr<uint64_t> dc = buf.Alloc(4ull * kB * kH);
    if (!dc.ok()) return dc.status();
    REFK_RETURN_IF_ERROR(buf.Fill(*dc, 0, 4ull * kB * kH));  // kept zero
    absl::StatusOr<uint64_t> dout = buf.Alloc(q.size() * 2);
    if (!dout.ok()) return dout.status();
    p->out_ = *dout;
    p->out_elems_ = q.size();
    // The caches as 2-D [pages * H * 16][128] with one page per tile.
    p->shape_[0] = static_cast<int64_t>(num_pages) * kH * kPage;
    p->shape_[1] = kD;
    const fj_dl_dtype f16{2, 16, 1};
    p->k_t_ = fj_tensor{reinterpret_cast<void*>(*dk),
                        {2, device},
                        2,
                        f16,
                        p->shape_,
                        nullptr,
                        0};
    p->v_t_ = p->k_t_;
    p->v_t_.data = reinterpret_cast<void*>(*dv);
    for (fj_tensor_arg* a : {&p->k_arg_, &p->v_arg_}) {
      a->struct_size = sizeof(fj_tensor_arg);
      a->box[0] = kPage;
      a->box[1] = kD;
      a->oob = FJ_OOB_NAN;  // a page id outside the cache reads NaN
    }
    p->k_arg_.tensor = &p->k_t_;
    p->v_arg_.tensor = &p->v_t_;
    p->args_ = {TensorArg(&p->k_arg_),
                TensorArg(&p->v_arg_),
                PtrArg(*dq),
                PtrArg(*dt),
                PtrArg(*dl),
                I32Arg(kMaxPages),
                F32Arg(static_cast<float>(1.0 / std::sqrt(double(kD)) *
                                          1.4426950408889634)),
                PtrArg(*dp),
                PtrArg(*dc),
                PtrArg(*dout)};
    return std::unique_ptr<Problem>(std::move(p));
  }
  // The lengths: fixed (so the anchor's bytes are), the data per seed.
  static std::vector<int> Lengths() {
    std::mt19937 rng(20261201);
    std::uniform_int_distribution<int> len_d(1, kMaxLen);
    std::vector<int> lens = {1, 16, 17, kMaxLen};
    while (static_cast<int>(lens.size()) < kB) lens.push_back(len_d(rng));
    return lens;
  }
  // The bytes the kernel moves: the owned pages of K and V, q and out.
  static uint64_t Bytes() {
    uint64_t pages = 0;
    for (int n : Lengths()) pages += (n + kPage - 1) / kPage;
    return pages * kH * kPage * kD * 2 * 2 + 2ull * kB * kH * kD * 2;
  }

  const std::vector<fj_arg>& Args() override { return args_; }
  void Configure(const Shape& s, int, fj_copy_impl,
                 fj_launch_config* cfg) const override {
    cfg->grid[0] = kChunks;
    cfg->grid[1] = kH;
    cfg->grid[2] = kB;
    cfg->block[0] = static_cast<uint32_t>(s.threads);
    // A shape may set STAGE_PAGES (its define); the default is the
    // example's.
    int stage_pages = kStagePages;
    for (absl::string_view d :
         absl::StrSplit(s.define ? s.define : "", ' ', absl::SkipEmpty())) {
      if (absl::ConsumePrefix(&d, "STAGE_PAGES=")) {
        stage_pages = std::atoi(std::string(d).c_str());
      }
    }
    cfg->shared_bytes = 128 + s.stages * stage_pages * 2 * kPage * kD * 2;
  }
  absl::Status Poison() override {
    return buf_.Fill(out_, 0xFF, out_elems_ * 2);
  }
  std::vector<std::pair<uint64_t, uint64_t>> Outputs() const override {
    return {{out_, out_elems_ * 2}};
  }
  absl::Status Check(const void* const* outputs) const override {
    const uint16_t* got = static_cast<const uint16_t*>(outputs[0]);
    for (size_t i = 0; i < out_elems_; ++i) {
      const size_t bh = i / kD;
      REFK_RETURN_IF_ERROR(CompareAt(
          HToF(got[i]), want_[i], kRtol, kAtol,
          absl::StrFormat("out[b=%d][h=%d][%d]", static_cast<int>(bh / kH),
                          static_cast<int>(bh % kH),
                          static_cast<int>(i % kD))));
    }
    return absl::OkStatus();
  }
  std::string Tolerance() const override {
    return absl::StrFormat("|d| <= |ref| / 512 + %g (f16 output)", kAtol);
  }

 private:
  DecodeProblem(fj_runtime* rt, int device) : buf_(rt, device) {}
  Buffers buf_;
  uint64_t out_ = 0;
  size_t out_elems_ = 0;
  int64_t shape_[2] = {};
  fj_tensor k_t_{}, v_t_{};
  fj_tensor_arg k_arg_{}, v_arg_{};
  std::vector<fj_arg> args_;
  std::vector<double> want_;
};

// -------------------------------------------------------------------- GEMM
// C = A B^T, f16 [n][n] each, in the example's default layout: 2-D tensors
// in the 128-byte swizzle, box (BM, 64) for A and (128, 64) for B. The
// CPU reference covers 4096 sampled elements of C and the whole first and
// last 16 x 16 corners (an exact reference of 4096^3 would take minutes):
// each sampled element is a full 4096-long dot product.
class GemmProblem : public Problem {
 public:
  static constexpr int kBn = 128, kBk = 64;  // the example's
  static constexpr double kRtol = 1.0 / 512, kAtol = 2e-2;

  static absl::StatusOr<std::unique_ptr<Problem>> Make(fj_runtime* rt,
                                                       int device,
                                                       uint32_t seed, int n) {
    auto p = std::unique_ptr<GemmProblem>(new GemmProblem(rt, device));
    p->n_ = n;
    const size_t elems = static_cast<size_t>(n) * n;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> val(-1.f, 1.f);
    std::vector<uint16_t> a(elems), b(elems);
    for (auto& x : a) x = FToH(val(rng));
    for (auto& x : b) x = FToH(val(rng));
    std::uniform_int_distribution<int> idx(0, n - 1);
    for (int i = 0; i < 4096; ++i) p->samples_.emplace_back(idx(rng), idx(rng));
    for (int r = 0; r < 16; ++r) {
      for (int c = 0; c < 16; ++c) {
        p->samples_.emplace_back(r, c);
        p->samples_.emplace_back(n - 1 - r, n - 1 - c);
      }
    }
    for (const auto& [r, c] : p->samples_) {
      double dot = 0;
      for (int l = 0; l < n; ++l) {
        dot += double(HToF(a[static_cast<size_t>(r) * n + l])) *
               HToF(b[static_cast<size_t>(c) * n + l]);
      }
      p->want_.push_back(dot);
    }
    absl::StatusOr<uint64_t> da = p->buf_.Upload(a.data(), elems * 2);
    if (!da.ok()) return da.status();
    absl::StatusOr<uint64_t> db = p->buf_.Upload(b.data(), elems * 2);
    if (!db.ok()) return db.status();
    absl::StatusOr<uint64_t> dc = p->buf_.Alloc(elems * 2);
    if (!dc.ok()) return dc.status();
    p->c_ = *dc;
    p->shape_[0] = n;
    p->shape_[1] = n;
    const fj_dl_dtype f16{2, 16, 1};
    p->a_t_ = fj_tensor{reinterpret_cast<void*>(*da),
                        {2, device},
                        2,
                        f16,
                        p->shape_,
                        nullptr,
                        0};
    p->b_t_ = p->a_t_;
    p->b_t_.data = reinterpret_cast<void*>(*db);
    for (fj_tensor_arg* t : {&p->a_arg_, &p->b_arg_}) {
      t->struct_size = sizeof(fj_tensor_arg);
      t->box[0] = kBn;  // A's follows the shape's BM (Configure)
      t->box[1] = kBk;
      t->swizzle = FJ_SWIZZLE_128B;
    }
    p->a_arg_.tensor = &p->a_t_;
    p->b_arg_.tensor = &p->b_t_;
    p->args_ = {TensorArg(&p->a_arg_),
                TensorArg(&p->b_arg_),
                PtrArg(*dc),
                I32Arg(n),
                I32Arg(n),
                I32Arg(n)};
    return std::unique_ptr<Problem>(std::move(p));
  }

  int ArgsGroup(const Shape& s) const override { return Bm(s); }
  // The example's BM for a shape: 256 when its define is "BM=256", else
  // 128.
  static int Bm(const Shape& s) {
    return ShapeHasDefine(s, "BM=256") ? 256 : 128;
  }

  const std::vector<fj_arg>& Args() override { return args_; }
  void Configure(const Shape& s, int, fj_copy_impl,
                 fj_launch_config* cfg) const override {
    const int bm = Bm(s);
    cfg->grid[0] = static_cast<uint32_t>(n_ / kBn);
    cfg->grid[1] = static_cast<uint32_t>(n_ / bm);
    cfg->block[0] = static_cast<uint32_t>(s.threads);
    cfg->shared_bytes = 1024 + s.stages * (bm + kBn) * kBk * 2;
    // A's box is the tile the build loads (Args points at a_arg_).
    a_arg_.box[0] = static_cast<uint32_t>(bm);
  }
  absl::Status Poison() override { return buf_.Fill(c_, 0xFF, 2ull * n_ * n_); }
  std::vector<std::pair<uint64_t, uint64_t>> Outputs() const override {
    return {{c_, 2ull * n_ * n_}};
  }
  absl::Status Check(const void* const* outputs) const override {
    const uint16_t* got = static_cast<const uint16_t*>(outputs[0]);
    const size_t elems = static_cast<size_t>(n_) * n_;
    for (size_t i = 0; i < samples_.size(); ++i) {
      const auto [r, c] = samples_[i];
      REFK_RETURN_IF_ERROR(CompareAt(HToF(got[static_cast<size_t>(r) * n_ + c]),
                                     want_[i], kRtol, kAtol,
                                     absl::StrFormat("c[%d][%d]", r, c)));
    }
    // Every element was written (no NaN left from the poison).
    for (size_t i = 0; i < elems; ++i) {
      if ((got[i] & 0x7C00u) == 0x7C00u) {
        return absl::InternalError(absl::StrFormat(
            "c[%d][%d] is not finite (0x%04x)", static_cast<int>(i / n_),
            static_cast<int>(i % n_), got[i]));
      }
    }
    return absl::OkStatus();
  }
  std::string Tolerance() const override {
    return absl::StrFormat(
        "|d| <= |ref| / 512 + %g (f16 output) on %d sampled elements, every "
        "element finite",
        kAtol, static_cast<int>(samples_.size()));
  }

 private:
  GemmProblem(fj_runtime* rt, int device) : buf_(rt, device) {}
  Buffers buf_;
  int n_ = 0;
  uint64_t c_ = 0;
  int64_t shape_[2] = {};
  fj_tensor a_t_{}, b_t_{};
  mutable fj_tensor_arg a_arg_{};  // box[0] set per shape by Configure
  fj_tensor_arg b_arg_{};
  std::vector<fj_arg> args_;
  std::vector<std::pair<int, int>> samples_;
  std::vector<double> want_;
};

}  // namespace

KernelCase PagedDecodeCase() {
  using P = DecodeProblem;
  KernelCase c;
  c.kernel = "paged_decode";
  c.name = "paged_decode B=32 H=16 d=128 f16";
  c.example = "examples/paged_decode.cu";
  c.entry = "paged_decode";
  c.stages_macro = "NSTAGES";
  // The anchor copies what the kernel reads and writes: the owned pages of
  // K and V (whole pages), q and out.
  c.copy_bytes = P::Bytes();
  // {threads = 32 x (4 consumer warps + 4 producer warps), -, stages}.
  // Fewer stages: less SMEM per CTA, more CTAs per SM (on the H200 2-3
  // stages beat 4 and 6); fewer, larger slots (four pages per barrier).
  c.shapes = {{256, 1, 3}, {256, 1, 2}, {256, 1, 2, "STAGE_PAGES=4"}};
  // One producer pair (K and V), then one producer warp for both gathers
  // (the default until 2026-12-04): fewer loads in flight where the
  // threads copy; more, smaller slots (one page each).
  for (Shape s : std::vector<Shape>{{192, 1, 2}, {192, 1, 3}}) {
    s.define = "PRODUCER=2";
    c.shapes.push_back(s);
  }
  c.shapes.push_back({192, 1, 2, "PRODUCER=2 STAGE_PAGES=4"});
  c.shapes.push_back({192, 1, 6, "PRODUCER=2 STAGE_PAGES=1"});
  for (Shape s : std::vector<Shape>{{160, 1, 3}, {160, 1, 2}}) {
    s.define = "PRODUCER=1";
    c.shapes.push_back(s);
  }
  // Registers capped for a 4th resident CTA (64 at 256 threads, against
  // 80): more loads in flight where the threads copy (sync: 1.006-1.009
  // of the copy against 0.95, H200, 2026-12-04).
  c.shapes.push_back({256, 1, 3, "MIN_CTAS=4"});
  c.shapes.push_back({256, 1, 2, "MIN_CTAS=4"});
  // Three resident CTAs (80 registers, spilling at the layer's calls): what
  // the bound without a minimum gave ptxas before the example named 2.
  c.shapes.push_back({256, 1, 3, "MIN_CTAS=3"});
  // Not here: each producer warp prefetching its next slot's pages into L2
  // before its gather. Under sync it measured 256.5 against 258.7 us (S3),
  // and with MIN_CTAS=4 it lost (289 us); docs/measurements.md.
  // Not here: PRODUCER=0 (the block issues the gathers). Measured on the
  // H200 (2026-12-03-h200-transpose-direct-decode-producer-269c5c2.txt)
  // it lost under every implementation, sync included (527 against 408
  // us): the producer warp's loads overlap the consumers' math.
  c.make = [](fj_runtime* rt, int device, uint32_t seed) {
    return DecodeProblem::Make(rt, device, seed);
  };
  return c;
}

KernelCase GemmMmaCase(int n) {
  KernelCase c;
  c.kernel = "gemm_mma";
  c.name = absl::StrFormat("gemm_mma [%d]^3 f16->f32 (anchor: copy)", n);
  c.example = "examples/gemm_mma.cu";
  c.entry = "gemm_mma";
  c.stages_macro = "NSTAGES";
  c.copy_bytes = 3ull * n * n * 2;  // A, B and C
  // {threads = 32 x (8 MMA warps + 2 producer warps), -, stages}: 128 x
  // 128 tiles (two CTAs per SM at 3 stages), 256 x 128 (64 x 64 warp
  // tiles, one CTA per SM); then two producer pairs on alternate k steps
  // (PRODUCER=4), one producer warp (PRODUCER=1) and loads by the whole
  // block (PRODUCER=0: 8 warps).
  c.shapes = {{320, 1, 3}, {320, 1, 2}, {320, 1, 4}};
  for (int stages : {3, 4}) {
    c.shapes.push_back({320, 1, stages, "BM=256"});
    c.shapes.push_back({384, 1, stages, "PRODUCER=4"});
    c.shapes.push_back({384, 1, stages, "BM=256 PRODUCER=4"});
  }
  c.shapes.push_back({288, 1, 3, "PRODUCER=1"});
  c.shapes.push_back({288, 1, 3, "BM=256 PRODUCER=1"});
  c.shapes.push_back({256, 1, 3, "PRODUCER=0"});
  c.shapes.push_back({256, 1, 2, "PRODUCER=0"});
  c.make = [n](fj_runtime* rt, int device, uint32_t seed) {
    return GemmProblem::Make(rt, device, seed, n);
  };
  return c;
}

}  // namespace fleetjit::refk
