#include "reference/measure.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace fleetjit::measure {
namespace {

// CheckNvrtc's job without linking the platform layer (this library is
// linked by programs that use only the C ABI).
absl::Status Check(const NvrtcApi& api, nvrtcResult result, const char* call) {
  if (result == NVRTC_SUCCESS) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat(call, ": ", api.nvrtcGetErrorString(result)));
}

}  // namespace

double NowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

void OnThreadsTogether(int threads, const std::function<void(int)>& body) {
  std::atomic<int> ready{0};
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < threads) std::this_thread::yield();
      body(t);
    });
  }
  for (std::thread& t : pool) t.join();
}

double TimeMs(const std::function<void()>& run,
              const std::function<void()>& sync, int samples, int batch,
              int warmup) {
  for (int i = 0; i < warmup; ++i) run();
  sync();
  std::vector<double> ms;
  for (int s = 0; s < samples; ++s) {
    const double t0 = NowMs();
    for (int i = 0; i < batch; ++i) run();
    sync();
    ms.push_back((NowMs() - t0) / batch);
  }
  return Median(ms);
}

std::vector<double> InterleavedMedians(
    const std::vector<std::function<void()>>& cases,
    const std::function<void()>& settle, int rounds, int warmup, int batch) {
  std::vector<std::vector<double>> us(cases.size());
  for (int round = 0; round < warmup + rounds; ++round) {
    for (size_t c = 0; c < cases.size(); ++c) {
      const double t0 = NowMs();
      for (int i = 0; i < batch; ++i) cases[c]();
      const double per_call = (NowMs() - t0) * 1000 / batch;
      if (round >= warmup) us[c].push_back(per_call);
      settle();
    }
  }
  std::vector<double> medians;
  for (auto& u : us) medians.push_back(Median(std::move(u)));
  return medians;
}

std::string UniqueSource(absl::string_view source) {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat(source, "\n// unique ", counter++, " ", getpid(), " ",
                      NowMs(), "\n");
}

absl::StatusOr<double> BareNvrtcMs(const NvrtcApi& api,
                                   const std::string& source,
                                   const std::vector<std::string>& options,
                                   const std::vector<Header>& headers,
                                   bool* pch_created) {
  std::vector<const char*> names, contents, opts;
  for (const Header& h : headers) {
    names.push_back(h.name);
    contents.push_back(h.content);
  }
  bool cubin = false;
  for (const std::string& o : options) {
    opts.push_back(o.c_str());
    cubin = cubin || absl::StartsWith(o, "-arch=sm_") ||
            absl::StartsWith(o, "--gpu-architecture=sm_");
  }
  const double t0 = NowMs();
  nvrtcProgram p = nullptr;
  absl::Status status =
      Check(api,
            api.nvrtcCreateProgram(&p, source.c_str(), "bench.cu",
                                   static_cast<int>(names.size()),
                                   contents.data(), names.data()),
            "nvrtcCreateProgram");
  if (!status.ok()) return status;
  const nvrtcResult compiled =
      api.nvrtcCompileProgram(p, static_cast<int>(opts.size()), opts.data());
  size_t n = 0;
  if (compiled == NVRTC_SUCCESS) {
    if (pch_created != nullptr) {  // the entry point is optional (NVRTC 12.8+)
      *pch_created = api.nvrtcGetPCHCreateStatus != nullptr &&
                     api.nvrtcGetPCHCreateStatus(p) == NVRTC_SUCCESS;
    }
    std::string image;
    status = Check(
        api, cubin ? api.nvrtcGetCUBINSize(p, &n) : api.nvrtcGetPTXSize(p, &n),
        "getting the image size");
    image.resize(n);
    if (status.ok()) {
      status = Check(api,
                     cubin ? api.nvrtcGetCUBIN(p, image.data())
                           : api.nvrtcGetPTX(p, image.data()),
                     "getting the image");
    }
  }
  const double ms = NowMs() - t0;
  if (compiled != NVRTC_SUCCESS) {
    size_t log_size = 0;
    api.nvrtcGetProgramLogSize(p, &log_size);
    std::string log(log_size, '\0');
    api.nvrtcGetProgramLog(p, log.data());
    status =
        absl::InternalError(absl::StrCat("bare NVRTC compile failed: ", log));
  }
  api.nvrtcDestroyProgram(&p);
  if (!status.ok()) return status;
  return ms;
}

}  // namespace fleetjit::measure
