#include "conformance/matrix.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "conformance/embedded_kernels.h"

namespace fleetjit::selftest::internal {

Matrix::~Matrix() {
  if (stream_ != nullptr) fj_status_free(fj_stream_synchronize(stream_));
  for (uint64_t a : {in_, out_, aux_}) {
    if (a != 0) fj_status_free(fj_mem_free(rt_, a));
  }
  if (stream_ != nullptr) fj_status_free(fj_stream_destroy(stream_));
  for (auto& r : rows_) fj_status_free(fj_module_destroy(r->module));
}

absl::Status Matrix::Init(const fj_device_info& info) {
  info_ = info;
  FJ_CT_RETURN_IF_ERROR(
      Fj(fj_stream_create(rt_, device_, &stream_), "creating a stream"), "");
  FJ_CT_RETURN_IF_ERROR(
      Fj(fj_mem_alloc(rt_, device_, kArenaBytes, &in_), "allocating"), "");
  FJ_CT_RETURN_IF_ERROR(
      Fj(fj_mem_alloc(rt_, device_, kArenaBytes, &out_), "allocating"), "");
  FJ_CT_RETURN_IF_ERROR(
      Fj(fj_mem_alloc(rt_, device_, kAuxBytes, &aux_), "allocating"), "");
  return absl::OkStatus();
}

void Matrix::AddRow(RowSpec spec) {
  auto r = std::make_unique<Row>();
  r->spec = std::move(spec);
  r->clusters = info_.cluster_launch != 0 && r->spec.target_cc >= 90;
  rows_.push_back(std::move(r));
}

// Builds every row's module in parallel (NVRTC, then the driver's load
// and, for PTX rows, its JIT).
void Matrix::BuildAll(const std::function<void(const std::string&)>& log) {
  const EmbeddedKernel* file = nullptr;
  for (size_t i = 0; i < kConformanceKernelsCount; ++i) {
    if (kConformanceKernels[i].path == kKernelFile)
      file = &kConformanceKernels[i];
  }
  if (file == nullptr) {
    for (auto& r : rows_) {
      r->build_error =
          absl::StrCat(kKernelFile, " is not embedded in this build");
    }
    return;
  }
  const std::string source(file->content);
  std::vector<std::thread> threads;
  for (auto& r : rows_) {
    Row* row = r.get();
    threads.emplace_back([this, row, &source] { Build(*row, source); });
  }
  for (auto& t : threads) t.join();
  if (log) {
    for (auto& r : rows_) {
      log(r->build_error.empty()
              ? absl::StrFormat("  %-22s %s", r->spec.name, r->build_note)
              : absl::StrFormat("  %-22s BUILD FAILED: %s", r->spec.name,
                                r->build_error));
    }
  }
}

// Runs `launches` launches of variant `v` on `row` into `t`. A non-OK
// status means the device is unusable (poisoned by a fault).
absl::Status Matrix::RunVariant(Row& row, const Variant& v,
                                const std::string& feature, Tally& t) {
  const int n = v.launches * scale_;
  for (int i = 0; i < n; ++i) {
    Rng rng(Mix(seed_ ^ Mix(HashName(v.name) + static_cast<uint64_t>(i))));
    Ctx c{row, v, feature, i, rng, t};
    absl::Status s;
    switch (v.kind) {
      case Kind::kBarrier:
        s = Barrier(c);
        break;
      case Kind::kSpanLoad:
        s = SpanLoad(c);
        break;
      case Kind::kSpanStore:
        s = SpanStore(c);
        break;
      case Kind::kGroups:
        s = Groups(c);
        break;
      case Kind::kTileLoad:
        s = TileLoad(c);
        break;
      case Kind::kTileStore:
        s = TileStore(c);
        break;
      case Kind::kPipeline:
        s = Pipeline(c);
        break;
      case Kind::kScatter:
        s = Scatter(c);
        break;
      case Kind::kGather:
        s = GatherIndex(c);
        break;
    }
    if (s.ok()) continue;
    if (absl::StartsWith(s.message(), "the device stopped working")) return s;
    // A selftest bug or a failed copy to/from the device: a failed case.
    ++t.cases;
    t.Fail(1, absl::StrCat(Repro(c), " ", s.message()));
    absl::Status healthy = Healthy(c, s);
    if (!healthy.ok()) return healthy;
  }
  return absl::OkStatus();
}

void Matrix::Build(Row& row, const std::string& source) {
  const auto t0 = Clock::now();
  fj_build_options o{};
  o.struct_size = sizeof(o);
  o.source = Str(source);
  const std::string name = kKernelFile;
  o.name = Str(name);
  o.target = Str(row.spec.target);
  o.device = device_;
  o.copy_impl = row.spec.impl;
  o.output = FJ_OUTPUT_AUTO;
  absl::Status s =
      Fj(fj_module_build(rt_, &o, &row.module),
         absl::StrCat("building ", kKernelFile, " for ", row.spec.name));
  if (!s.ok()) {
    row.module = nullptr;
    row.build_error = std::string(s.message());
    return;
  }
  fj_module_info mi{};
  mi.struct_size = sizeof(mi);
  s = Fj(fj_module_info_get(row.module, &mi), "module info");
  const double build_s =
      std::chrono::duration<double>(Clock::now() - t0).count();
  // Loading the first kernel loads the module (and JITs PTX) on the device.
  const auto t1 = Clock::now();
  auto k = Kernel(row, "fj_ct_barrier");
  if (!k.ok()) {
    row.build_error = std::string(k.status().message());
    return;
  }
  const double load_s =
      std::chrono::duration<double>(Clock::now() - t1).count();
  if (s.ok()) {
    row.built_for = mi.target;
    if (mi.copy_impl != row.spec.impl) {
      row.build_error =
          absl::StrCat("the module was built with copy implementation ",
                       fj_copy_impl_name(mi.copy_impl), ", not ",
                       fj_copy_impl_name(row.spec.impl));
      return;
    }
    row.build_note = absl::StrFormat(
        "%s, %s, %s in %.2f s, loaded in %.2f s", mi.target,
        mi.output == FJ_OUTPUT_PTX ? "PTX (driver JIT)" : "cubin",
        mi.cache_result == FJ_CACHE_COMPILED   ? "compiled"
        : mi.cache_result == FJ_CACHE_DISK_HIT ? "disk cache hit"
                                               : "memory cache hit",
        build_s, load_s);
  }
}

absl::StatusOr<fj_kernel*> Matrix::Kernel(Row& row, const std::string& name) {
  {
    std::lock_guard<std::mutex> l(kernels_mu_);
    auto it = row.kernels.find(name);
    if (it != row.kernels.end()) return it->second;
  }
  if (row.module == nullptr) return absl::FailedPreconditionError("no module");
  fj_kernel* k = nullptr;
  FJ_CT_RETURN_IF_ERROR(
      Fj(fj_module_get_kernel(row.module, Str(name), device_, &k),
         absl::StrCat("loading kernel ", name)),
      "");
  fj_kernel_info ki{};
  ki.struct_size = sizeof(ki);
  FJ_CT_RETURN_IF_ERROR(Fj(fj_kernel_info_get(k, &ki), "kernel info"), "");
  std::lock_guard<std::mutex> l(kernels_mu_);
  row.kernels[name] = k;
  row.max_threads[name] =
      ki.max_threads_per_block > 0 ? ki.max_threads_per_block : 1024;
  return k;
}

// A block size: any 1-D size works; favour the common ones.
int Matrix::PickThreads(Rng& rng, Row& row, const std::string& kernel) {
  static constexpr int kSizes[] = {1,   32,  33,  64,  96,  128,
                                   128, 160, 256, 256, 384, 512};
  int t = kSizes[rng.Int(0, sizeof(kSizes) / sizeof(kSizes[0]) - 1)];
  if (Kernel(row, kernel).ok()) {  // a failure here shows at the launch
    std::lock_guard<std::mutex> l(kernels_mu_);
    t = std::min(t, row.max_threads[kernel]);
  }
  return std::max(t, 1);
}

int Matrix::WholeWarps(Row& row, const std::string& kernel, int t) {
  if (Kernel(row, kernel).ok()) {  // a failure here shows at the launch
    std::lock_guard<std::mutex> l(kernels_mu_);
    t = std::min(t, row.max_threads[kernel]);
  }
  return std::max(t / 32 * 32, 32);
}

std::string Matrix::Label(const Ctx& c) const {
  return absl::StrCat(c.feature, "/", c.row.spec.name, " ", c.v.name, " case ",
                      c.index, " (seed ", seed_, ")");
}

std::string Matrix::Repro(const Ctx& c) const {
  return absl::StrCat("[impl ", c.row.spec.name, ", feature ", c.feature,
                      ", variant ", c.v.name, ", seed ", seed_, ", case ",
                      c.index, "; rerun: fleetjit selftest --seed ", seed_,
                      " --impl ", c.row.spec.name, " --feature ", c.feature,
                      " --variant ", c.v.name, "]");
}

absl::Status Matrix::Upload(uint64_t dst, const void* src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  return Fj(fj_memcpy_htod(rt_, dst, src, bytes, stream_),
            "copying to the device");
}

absl::Status Matrix::Download(void* dst, uint64_t src, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  return Fj(fj_memcpy_dtoh(rt_, dst, src, bytes, stream_),
            "copying to the host");
}

absl::Status Matrix::Poison(uint64_t dst, uint8_t value, size_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  return Fj(fj_memset_d8(rt_, dst, value, bytes, stream_), "poisoning");
}

// The pipeline of every cell: stages the inputs, poisons the output,
// launches, reads back, synchronises, and tallies `compare`'s verdict.
absl::Status Matrix::RunCell(Ctx& c, CellLaunch& l,
                             const std::function<Verdict()>& compare) {
  for (const Staged& in : l.inputs) {
    FJ_CT_RETURN_IF_ERROR(Upload(in.dst, in.src, in.bytes), "");
  }
  FJ_CT_RETURN_IF_ERROR(Poison(l.poison_at, l.poison, l.poison_bytes), "");
  auto ok = LaunchAndWait(
      c, l, [&] { return Download(l.got, l.got_from, l.got_bytes); });
  if (!ok.ok()) return ok.status();
  if (!*ok) return absl::OkStatus();
  const Verdict v = compare();
  if (v.bad > 0)
    c.t.Fail(v.bad, absl::StrCat(Repro(c), " ", l.what, ": ", v.text));
  return absl::OkStatus();
}

// Launches, downloads (`after` queues the copies back) and synchronises.
// A launch or run error is a failure of all the launch's cases; false is
// returned and the caller skips the comparison. A non-OK status means the
// device no longer works.
absl::StatusOr<bool> Matrix::LaunchAndWait(
    Ctx& c, const CellLaunch& l, const std::function<absl::Status()>& after) {
  const std::string& kernel = l.kernel;
  const Shape& s = l.shape;
  ++c.t.launches;
  c.t.cases += l.cases;
  auto k = Kernel(c.row, kernel);
  absl::Status st = k.status();
  if (st.ok()) {
    fj_launch_config cfg = LaunchConfig(s.grid, s.block, s.smem);
    if (s.cluster > 1) cfg.cluster[0] = s.cluster;
    cfg.stream = stream_;
    st = Fj(fj_launch(*k, &cfg, l.args.data(), l.args.size()),
            absl::StrCat("launching ", kernel));
  }
  if (st.ok() && after) st = after();
  if (st.ok()) {
    watchdog_.Enter(absl::StrCat(Label(c), ", kernel ", kernel));
    st = Fj(fj_stream_synchronize(stream_), absl::StrCat("running ", kernel));
    watchdog_.Leave();
  }
  if (st.ok()) return true;
  c.t.Fail(l.cases, absl::StrCat(Repro(c), " ", l.what, ": ", st.message()));
  absl::Status healthy = Healthy(c, st);
  if (!healthy.ok()) return healthy;
  return false;
}

// Whether the device still works after `error` (a fault poisons it).
absl::Status Matrix::Healthy(const Ctx& c, const absl::Status& error) {
  fj_status_free(fj_stream_synchronize(stream_));
  absl::Status probe = Poison(aux_, 0, 16);
  if (probe.ok()) probe = Fj(fj_stream_synchronize(stream_), "synchronising");
  if (probe.ok()) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("the device stopped working after ", Label(c), ": ",
                   error.message(), " (then: ", probe.message(), ")"));
}

// For the tile kernels: fills the tensor argument for `g` at `base` and
// counts it; returns `data`, the coordinates and the predicates to stage.
std::vector<Matrix::Staged> Matrix::StageTiles(
    Ctx& c, const GenTensor& g, uint64_t base, Staged data,
    const std::vector<int32_t>& coords, const std::vector<uint8_t>& preds,
    fj_tensor* tensor, fj_tensor_arg* targ) {
  g.Fill(base, device_, tensor, targ);
  CountTma(c, *targ);
  return {data,
          {aux_, coords.data(), coords.size() * 4},
          {aux_ + kAuxPredsOffset, preds.data(), preds.size()}};
}

// Why TMA cannot describe `a` ("" when it can), from the C ABI's check.
std::string CheckTensor(const fj_tensor_arg& a) {
  fj_tensor_check check{};
  check.struct_size = sizeof(check);
  fj_status* st = fj_tensor_arg_check(&a, &check);
  if (st != nullptr) {
    std::string message = fj_status_message(st, nullptr);
    fj_status_free(st);
    return message;
  }
  return check.tma ? "" : check.reason;
}

// Counts tensor maps vs fallbacks on tma rows (the runtime's own rules).
void Matrix::CountTma(Ctx& c, const fj_tensor_arg& a) {
  if (c.row.spec.impl != FJ_COPY_IMPL_TMA) return;
  if (CheckTensor(a).empty()) {
    ++c.t.maps;
  } else {
    ++c.t.fallbacks;
  }
}

std::string Matrix::TensorText(const Ctx& c, const GenTensor& g,
                               const fj_tensor_arg& a, int threads) const {
  std::string tma = "n/a";
  if (c.row.spec.impl == FJ_COPY_IMPL_TMA) {
    const std::string why = CheckTensor(a);
    tma = why.empty() ? "yes" : absl::StrCat("no (", why, ")");
  }
  return absl::StrCat(
      fj::dtype_info(g.p.dtype).name, " rank ", g.p.rank, " shape ",
      Outer(g.p.shape, g.p.rank), " strides ", Outer(g.p.stride, g.p.rank),
      g.pass_strides ? "" : " (passed as NULL)", " box ",
      Outer(g.p.box, g.p.rank), " (outermost-first), base +", g.shift, " B",
      g.split_offset ? " (byte_offset)" : "", ", oob ", OobName(g.p.oob),
      ", TMA map: ", tma, ", ", threads, " threads/block");
}

}  // namespace fleetjit::selftest::internal
