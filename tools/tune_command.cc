// fleetjit tune FILE.cu --space SPACE.json: one fj_tune run from the
// command line (the schema: docs/tuning.md). The CLI allocates and fills
// the space's buffers, tunes (or finds the stored result), prints the table
// and the winner, and says where the result came from and how long the
// lookup took. --isolate tunes in a child process and, when a candidate
// faults (which poisons a CUDA context for good), tunes again without it.
#include <chrono>
#include <cstring>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "tools/child_process.h"
#include "tools/cli_app.h"
#include "tools/cli_util.h"
#include "tools/commands.h"
#include "tools/tune_space_json.h"

namespace fleetjit::cli {

bool LoadKernelSource(const std::string& file, std::string* source);

namespace {

const char* SourceName(fj_cache_result r) {
  switch (r) {
    case FJ_CACHE_COMPILED:
      return "tuned";
    case FJ_CACHE_MEMORY_HIT:
      return "memory hit";
    case FJ_CACHE_DISK_HIT:
      return "disk hit";
    case FJ_CACHE_REMOTE_HIT:
      return "remote hit";
  }
  return "unknown";
}

fj_arg ScalarArg(const TuneArgSpec& a) {
  fj_arg arg{};
  arg.struct_size = sizeof(arg);
  arg.kind = a.kind;
  switch (a.kind) {
    case FJ_ARG_I32:
      arg.v.i32 = static_cast<int32_t>(a.i);
      break;
    case FJ_ARG_U32:
      arg.v.u32 = static_cast<uint32_t>(a.i);
      break;
    case FJ_ARG_I64:
      arg.v.i64 = a.i;
      break;
    case FJ_ARG_U64:
      arg.v.u64 = static_cast<uint64_t>(a.i);
      break;
    case FJ_ARG_F32:
      arg.v.f32 = static_cast<float>(a.f);
      break;
    case FJ_ARG_F64:
      arg.v.f64 = a.f;
      break;
    default:
      break;
  }
  return arg;
}

// The excluded candidates ("M/S" pairs) refuse their grid; the others get
// the space's grid rule, computed here as fj_tune would.
struct GridCtx {
  const TuneSpec* spec;
  std::set<std::pair<size_t, size_t>> excluded;
  std::vector<std::string> macro_sets;
};

int32_t IsolatedGrid(void* user, size_t candidate, fj_str macros,
                     const fj_tune_shape* shape, uint32_t out_grid[3]) {
  auto* ctx = static_cast<GridCtx*>(user);
  const size_t shapes = ctx->spec->shapes.size();
  if (ctx->excluded.count({candidate / shapes, candidate % shapes})) return 1;
  const TuneSpec& s = *ctx->spec;
  const bool by_extent =
      s.grid_extent[0] || s.grid_extent[1] || s.grid_extent[2];
  const std::string m(macros.data, macros.size);
  for (int i = 0; i < 3; ++i) {
    if (!by_extent) {
      out_grid[i] = s.grid[i];
      continue;
    }
    uint64_t d = 1;
    const std::string& name = s.grid_divisor[i];
    if (name == "block.x" || name == "block.y" || name == "block.z") {
      d = shape->block[name.back() - 'x'];
    } else if (!name.empty()) {
      std::smatch hit;
      const std::regex re("(^|\\s)-D" + name + "=(0[xX][0-9a-fA-F]+|[0-9]+)");
      if (!std::regex_search(m, hit, re)) return 2;
      d = std::stoull(hit[2].str(), nullptr, 0);
    }
    if (d == 0) d = 1;
    const uint64_t e = s.grid_extent[i] == 0 ? 1 : s.grid_extent[i];
    out_grid[i] = static_cast<uint32_t>((e + d - 1) / d);
  }
  return 0;
}

// --isolate: the same command in a child, again without each candidate
// that faulted, at most `tries` times.
int RunIsolated(std::vector<std::string> argv, int tries) {
  std::vector<std::string> excluded;
  for (int attempt = 0; attempt < tries; ++attempt) {
    std::vector<std::string> child = argv;
    if (!excluded.empty()) {
      std::string list;
      for (const std::string& e : excluded) {
        list += (list.empty() ? "" : ",") + e;
      }
      child.push_back("--exclude");
      child.push_back(list);
    }
    absl::StatusOr<ChildResult> r = RunChild(child, {}, stdout, 16 << 10);
    if (!r.ok()) {
      std::fprintf(stderr, "fleetjit tune: %s\n",
                   std::string(r.status().message()).c_str());
      return kExitFailure;
    }
    if (r->passed()) return kExitOk;
    std::smatch hit;
    static const std::regex kFault(
        "candidate ([0-9]+)/([0-9]+) [^\\n]*faulted");
    if (!std::regex_search(r->output_tail, hit, kFault)) {
      return r->exit_code > 0 ? r->exit_code : kExitFailure;
    }
    const std::string bad = hit[1].str() + "/" + hit[2].str();
    std::fprintf(stderr,
                 "fleetjit tune: candidate %s faulted in the child; tuning "
                 "again without it\n",
                 bad.c_str());
    excluded.push_back(bad);
  }
  std::fprintf(stderr, "fleetjit tune: gave up after %d faulting candidates\n",
               tries);
  return kExitFailure;
}

}  // namespace

int RunTune(std::vector<std::string> args) {
  const std::vector<std::string> original = args;
  std::string file, space_path, kernel, exclude;
  int device = 0;
  bool as_json = false, retune = false, no_store = false, isolate = false,
       key_only = false;
  CLI::App app(
      "Tunes KERNEL of FILE.cu over the space of SPACE.json (docs/tuning.md) "
      "on the live device, or prints the stored result (memory, disk, or the "
      "fleet's remote tier) without timing anything.",
      "fleetjit tune");
  app.add_option("file", file, "the CUDA source (required)");
  app.add_option("--space", space_path, "the search space, JSON (required)");
  app.add_option("--kernel", kernel,
                 "the kernel (else the space's \"kernel\")");
  app.add_option("--device", device, "the device ordinal (default 0)");
  app.add_flag("--json", as_json, "print the result as JSON");
  app.add_flag("--retune", retune, "tune even if a result is stored");
  app.add_flag("--no-store", no_store, "do not store the result");
  app.add_flag("--isolate", isolate,
               "tune in a child process; a candidate that faults is dropped "
               "and the tuning runs again without it");
  app.add_option("--exclude", exclude,
                 "candidates M/S (macro set/shape) to skip, comma-separated");
  if (auto rc = ParseCommandLine(app, std::move(args))) return *rc;
  if (file.empty() || space_path.empty()) {
    std::fprintf(stderr, "fleetjit tune: FILE.cu and --space are required\n%s",
                 app.help().c_str());
    return kExitUsage;
  }
  if (isolate) {
    std::vector<std::string> argv = {"/proc/self/exe", "tune"};
    for (const std::string& a : original) {
      if (a != "--isolate") argv.push_back(a);
    }
    return RunIsolated(argv, 8);
  }
  std::string source, space_text;
  if (!LoadKernelSource(file, &source)) {
    std::fprintf(stderr, "fleetjit tune: cannot read '%s': %s\n", file.c_str(),
                 std::strerror(errno));
    return kExitFailure;
  }
  if (!ReadFile(space_path, &space_text)) {
    std::fprintf(stderr, "fleetjit tune: cannot read '%s': %s\n",
                 space_path.c_str(), std::strerror(errno));
    return kExitFailure;
  }
  absl::StatusOr<TuneSpec> spec = ParseTuneSpec(space_text);
  if (!spec.ok()) {
    std::fprintf(stderr, "fleetjit tune: %s: %s\n", space_path.c_str(),
                 std::string(spec.status().message()).c_str());
    return kExitUsage;
  }
  if (kernel.empty()) kernel = spec->kernel;
  if (kernel.empty()) {
    std::fprintf(stderr,
                 "fleetjit tune: no kernel: give --kernel or \"kernel\" in "
                 "the space\n");
    return kExitUsage;
  }
  GridCtx grid_ctx{&*spec, {}, spec->macro_sets};
  for (const std::string& e : SplitComma(exclude)) {
    size_t m = 0, s = 0;
    if (std::sscanf(e.c_str(), "%zu/%zu", &m, &s) != 2) {
      std::fprintf(stderr, "fleetjit tune: --exclude: '%s' is not M/S\n",
                   e.c_str());
      return kExitUsage;
    }
    grid_ctx.excluded.insert({m, s});
  }

  int create_rc = kExitFailure;
  fj_runtime* rt = CreateRuntime(&create_rc);
  if (rt == nullptr) return create_rc;
  int32_t count = 0;
  fj_device_count(rt, &count);
  if (count <= device) {
    std::fprintf(stderr, "fleetjit tune: no GPU %d (%d visible)%s%s\n", device,
                 count, count == 0 ? ": " : "", fj_runtime_driver_error(rt));
    fj_runtime_destroy(rt);
    return kExitNoGpu;
  }

  // The arguments: buffers allocated and filled here.
  std::mt19937_64 rng(std::random_device{}());
  std::vector<fj_arg> fj_args;
  std::vector<uint64_t> buffers, out_addresses, out_bytes;
  bool failed = false;
  for (const TuneArgSpec& a : spec->args) {
    if (a.kind != FJ_ARG_POINTER) {
      fj_args.push_back(ScalarArg(a));
      continue;
    }
    uint64_t p = 0;
    if (Failed(fj_mem_alloc(rt, device, a.bytes, &p), "allocating a buffer")) {
      failed = true;
      break;
    }
    buffers.push_back(p);
    std::vector<uint8_t> fill(a.bytes, a.fill_byte);
    if (a.fill == TuneArgSpec::Fill::kRandom) {
      for (auto& b : fill) b = static_cast<uint8_t>(rng());
    } else if (a.fill == TuneArgSpec::Fill::kZero) {
      std::fill(fill.begin(), fill.end(), 0);
    }
    if (Failed(fj_memcpy_htod(rt, p, fill.data(), a.bytes, nullptr),
               "filling a buffer")) {
      failed = true;
      break;
    }
    fj_arg arg{};
    arg.struct_size = sizeof(arg);
    arg.kind = FJ_ARG_POINTER;
    arg.v.pointer = p;
    fj_args.push_back(arg);
    if (a.output) {
      out_addresses.push_back(p);
      out_bytes.push_back(a.bytes);
    }
  }
  int rc = failed ? kExitFailure : kExitOk;
  fj_tune_result* result = nullptr;
  if (!failed) {
    std::vector<fj_str> options, exprs, sets;
    for (const std::string& o : spec->options) options.push_back(Str(o));
    for (const std::string& e : spec->name_expressions) exprs.push_back(Str(e));
    for (const std::string& m : spec->macro_sets) sets.push_back(Str(m));
    std::vector<fj_tune_shape> shapes;
    for (const TuneSpec::Shape& s : spec->shapes) {
      fj_tune_shape t{};
      t.struct_size = sizeof(t);
      for (int d = 0; d < 3; ++d) {
        t.block[d] = s.block[d];
        t.cluster[d] = s.cluster[d];
      }
      t.shared_bytes = s.shared_bytes;
      shapes.push_back(t);
    }
    fj_build_options b{};
    b.struct_size = sizeof(b);
    b.source = Str(source);
    b.name = Str(file);
    b.device = device;
    b.nvrtc_options = options.data();
    b.num_nvrtc_options = options.size();
    b.name_expressions = exprs.data();
    b.num_name_expressions = exprs.size();
    fj_tune_options o{};
    o.struct_size = sizeof(o);
    o.build = &b;
    o.kernel = Str(kernel);
    o.macro_sets = sets.data();
    o.num_macro_sets = sets.size();
    o.shapes = shapes.data();
    o.num_shapes = shapes.size();
    for (int d = 0; d < 3; ++d) {
      o.grid[d] = spec->grid[d];
      o.grid_extent[d] = spec->grid_extent[d];
      o.grid_divisor[d] = Str(spec->grid_divisor[d]);
    }
    if (!grid_ctx.excluded.empty()) {
      o.grid_fn = IsolatedGrid;
      o.grid_user = &grid_ctx;
    }
    o.args = fj_args.data();
    o.num_args = fj_args.size();
    o.output_addresses = out_addresses.data();
    o.output_bytes = out_bytes.data();
    o.num_outputs = out_addresses.size();
    o.warmup = spec->warmup;
    o.samples = spec->samples;
    o.noise_threshold = spec->noise_threshold;
    o.timeout_ms = spec->timeout_ms;
    o.flags = (retune ? FJ_TUNE_NO_CACHE_READ : 0u) |
              (no_store ? FJ_TUNE_NO_CACHE_WRITE : 0u);
    const auto start = std::chrono::steady_clock::now();
    fj_status* st = fj_tune(rt, &o, &result);
    const double call_ms = std::chrono::duration<double, std::milli>(
                               std::chrono::steady_clock::now() - start)
                               .count();
    if (Failed(st, ("tuning " + kernel).c_str())) {
      rc = kExitFailure;
    } else {
      fj_tune_summary s{};
      s.struct_size = sizeof(s);
      fj_tune_result_summary(result, &s);
      nlohmann::ordered_json j;
      j["kernel"] = kernel;
      j["source"] = SourceName(s.source);
      j["key"] = s.key;
      j["call_ms"] = call_ms;
      j["lookup_ms"] = s.lookup_ms;
      j["tune_ms"] = s.tune_ms;
      j["noisy"] = s.noisy != 0;
      j["stored"] = s.stored != 0;
      j["winner"] = s.winner;
      nlohmann::ordered_json rows = nlohmann::ordered_json::array();
      for (size_t i = 0; i < s.num_rows; ++i) {
        fj_tune_row row{};
        row.struct_size = sizeof(row);
        fj_tune_result_row(result, i, &row);
        nlohmann::ordered_json r;
        r["macros"] = std::string(row.macros.data, row.macros.size);
        r["block"] = {row.block[0], row.block[1], row.block[2]};
        r["shared_bytes"] = row.shared_bytes;
        r["cluster"] = {row.cluster[0], row.cluster[1], row.cluster[2]};
        r["grid"] = {row.grid[0], row.grid[1], row.grid[2]};
        r["status"] = fj_tune_status_name(row.status);
        r["median_us"] = row.median_us;
        r["min_us"] = row.min_us;
        r["spread"] = row.spread;
        r["noisy"] = row.noisy != 0;
        r["samples"] = row.samples;
        r["batch"] = row.batch;
        r["message"] = std::string(row.message.data, row.message.size);
        rows.push_back(r);
      }
      j["rows"] = rows;
      if (as_json) {
        std::printf("%s\n", DumpJson(j).c_str());
      } else {
        std::printf("%-4s %-28s %-14s %-10s %-14s %10s %10s %7s\n", "row",
                    "macros", "block", "grid.x", "status", "median_us",
                    "min_us", "spread");
        for (size_t i = 0; i < rows.size(); ++i) {
          const auto& r = rows[i];
          const std::string block =
              std::to_string(r["block"][0].get<uint32_t>()) + "x" +
              std::to_string(r["block"][1].get<uint32_t>()) + "x" +
              std::to_string(r["block"][2].get<uint32_t>());
          std::printf("%-4zu %-28s %-14s %-10u %-14s %10.2f %10.2f %7.3f%s%s\n",
                      i, r["macros"].get<std::string>().c_str(), block.c_str(),
                      r["grid"][0].get<uint32_t>(),
                      r["status"].get<std::string>().c_str(),
                      r["median_us"].get<double>(), r["min_us"].get<double>(),
                      r["spread"].get<double>(),
                      r["noisy"].get<bool>() ? " noisy" : "",
                      i == s.winner ? "  <- winner" : "");
        }
        std::printf(
            "%s: %s; lookup %.3f ms, call %.1f ms, tuning %.1f ms%s%s "
            "(key %.12s...)\n",
            kernel.c_str(), SourceName(s.source), s.lookup_ms, call_ms,
            s.tune_ms, s.noisy ? ", noisy: not stored" : "",
            s.stored ? ", stored" : "", s.key);
      }
    }
  }
  fj_tune_result_free(result);
  for (uint64_t p : buffers) fj_mem_free(rt, p);
  fj_cache_flush(rt, 5000);
  fj_runtime_destroy(rt);
  return rc;
}

}  // namespace fleetjit::cli
