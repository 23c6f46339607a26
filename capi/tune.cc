// The C ABI of tuning (fj_tune, fj_tune_result_*), over Runtime::Tune
// (runtime/tuning/tune_kernel.cc). Kept out of fleetjit.cc so the shim's other
// entries stay as they are; the same rules apply (entry.h, convert.h).
#include <cstring>

#include "base/raw_enum.h"
#include "base/status_macros.h"
#include "capi/convert.h"
#include "capi/entry.h"
#include "fleetjit/fleetjit.h"

using namespace fleetjit;        // NOLINT: the shim is a thin layer
using namespace fleetjit::capi;  // NOLINT

namespace {

// What an fj_tune_result handle names.
struct TuneResultObject {
  TuneOutcome outcome;
};

absl::StatusOr<TuneResultObject*> GetTuneResult(const fj_tune_result* h) {
  return LookUp<TuneResultObject>(h, HandleType::kTuneResult, "result");
}

fj_str StrOf(const std::string& s) { return fj_str{s.c_str(), s.size()}; }

fj_cache_result CacheResultOf(CacheSource s) {
  switch (s) {  // no default: a new tier needs a public name
    case CacheSource::kCompiled:
      return FJ_CACHE_COMPILED;
    case CacheSource::kMemory:
      return FJ_CACHE_MEMORY_HIT;
    case CacheSource::kDisk:
    case CacheSource::kBundle:
      return FJ_CACHE_DISK_HIT;
    case CacheSource::kRemote:
      return FJ_CACHE_REMOTE_HIT;
  }
  return FJ_CACHE_COMPILED;
}

// The shapes array, read with the stride shapes[0].struct_size.
absl::StatusOr<std::vector<tune::TuneShape>> ReadShapes(
    const fj_tune_shape* shapes, size_t n) {
  if (n == 0) {
    return absl::InvalidArgumentError(
        "options->num_shapes is 0: the space needs at least one shape");
  }
  if (shapes == nullptr) return NullArgument("options->shapes");
  const size_t stride = shapes[0].struct_size;
  if (stride < sizeof(fj_tune_shape) || stride % alignof(fj_tune_shape) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options->shapes[0].struct_size is ", stride, "; at least ",
        sizeof(fj_tune_shape), " (and a multiple of ", alignof(fj_tune_shape),
        ") expected"));
  }
  std::vector<tune::TuneShape> out;
  const auto* base = reinterpret_cast<const unsigned char*>(shapes);
  for (size_t i = 0; i < n; ++i) {
    const auto* s = reinterpret_cast<const fj_tune_shape*>(base + i * stride);
    if (s->struct_size != stride) {
      return absl::InvalidArgumentError(absl::StrCat(
          "options->shapes[", i, "].struct_size is ", s->struct_size,
          "; every element must carry shapes[0]'s (", stride, ")"));
    }
    tune::TuneShape t;
    for (int d = 0; d < 3; ++d) {
      t.block[d] = s->block[d];
      t.cluster[d] = s->cluster[d];
    }
    t.shared_bytes = s->shared_bytes;
    out.push_back(t);
  }
  return out;
}

absl::StatusOr<TuneRequest> ReadTuneOptions(const fj_tune_options* options) {
  fj_tune_options o;
  FJ_RETURN_IF_ERROR(
      ReadStruct(options, "options", sizeof(fj_tune_options), o));
  if (o.build == nullptr) return NullArgument("options->build");
  TuneRequest r;
  FJ_ASSIGN_OR_RETURN(r.build, ReadBuildSpec(o.build), "options->build");
  FJ_ASSIGN_OR_RETURN(r.kernel, ReadStr(o.kernel, "options->kernel"));
  if (r.kernel.empty()) {
    return absl::InvalidArgumentError("options->kernel is empty");
  }
  FJ_ASSIGN_OR_RETURN(
      r.space.macro_sets,
      ReadStrArray(o.macro_sets, o.num_macro_sets, "options->macro_sets"));
  FJ_ASSIGN_OR_RETURN(r.space.shapes, ReadShapes(o.shapes, o.num_shapes));
  for (int d = 0; d < 3; ++d) {
    r.space.grid.fixed[d] = o.grid[d];
    r.space.grid.extent[d] = o.grid_extent[d];
    FJ_ASSIGN_OR_RETURN(r.space.grid.divisor[d],
                        ReadStr(o.grid_divisor[d], "options->grid_divisor"));
  }
  if (o.grid_fn != nullptr) {
    auto fn = o.grid_fn;
    void* user = o.grid_user;
    r.space.grid.fn = [fn, user](const tune::TuneCandidate& c,
                                 uint32_t grid[3]) -> absl::Status {
      fj_tune_shape shape{};
      shape.struct_size = sizeof(shape);
      for (int d = 0; d < 3; ++d) {
        shape.block[d] = c.shape.block[d];
        shape.cluster[d] = c.shape.cluster[d];
      }
      shape.shared_bytes = c.shape.shared_bytes;
      const int32_t rc =
          fn(user, c.candidate_index, StrOf(c.macros), &shape, grid);
      if (rc != 0) {
        return absl::OutOfRangeError(
            absl::StrCat("grid_fn returned ", rc, " for this candidate"));
      }
      return absl::OkStatus();
    };
  }
  FJ_ASSIGN_OR_RETURN(size_t stride, ReadArgStride(o.args, o.num_args));
  r.args = o.args;
  r.num_args = o.num_args;
  r.arg_stride = stride;
  if (o.num_outputs > 0) {
    if (o.output_addresses == nullptr) {
      return NullArgument("options->output_addresses");
    }
    if (o.output_bytes == nullptr) return NullArgument("options->output_bytes");
  }
  for (size_t i = 0; i < o.num_outputs; ++i) {
    if (o.output_addresses[i] == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("options->output_addresses[", i, "] is 0"));
    }
    if (o.output_bytes[i] == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("options->output_bytes[", i, "] is 0"));
    }
    r.outputs.emplace_back(o.output_addresses[i], o.output_bytes[i]);
  }
  if (o.check_fn == nullptr && o.num_outputs == 0) {
    return absl::InvalidArgumentError(
        "options: neither outputs nor a check_fn: a wrong candidate could "
        "win (name the buffers the kernel writes)");
  }
  if (o.check_fn != nullptr) {
    auto fn = o.check_fn;
    void* user = o.check_user;
    r.check =
        [fn, user](
            size_t candidate,
            const std::vector<std::string>& outputs) -> absl::StatusOr<bool> {
      std::vector<const void*> data;
      std::vector<uint64_t> bytes;
      for (const std::string& o : outputs) {
        data.push_back(o.data());
        bytes.push_back(o.size());
      }
      return fn(user, candidate, data.data(), bytes.data(), outputs.size()) ==
             1;
    };
  }
  static_assert(FJ_TUNE_MAX_COUNT == tune::kMaxCount);
  for (const auto& [name, count] :
       {std::pair{"warmup", o.warmup}, std::pair{"samples", o.samples}}) {
    if (count > FJ_TUNE_MAX_COUNT) {
      return absl::InvalidArgumentError(
          absl::StrCat("options->", name, " is ", count, "; at most ",
                       FJ_TUNE_MAX_COUNT, " (FJ_TUNE_MAX_COUNT)"));
    }
  }
  if (o.warmup != 0) r.settings.warmup = o.warmup;
  if (o.samples != 0) r.settings.samples = o.samples;
  if (o.noise_threshold < 0 || o.noise_threshold != o.noise_threshold) {
    return absl::InvalidArgumentError(
        "options->noise_threshold must be >= 0 (0 = the default, 0.10)");
  }
  if (o.noise_threshold > 0) r.settings.noise_threshold = o.noise_threshold;
  if (o.timeout_ms != 0) {
    r.settings.deadline = absl::Milliseconds(o.timeout_ms);
  }
  if ((o.flags & ~uint32_t{FJ_TUNE_NO_CACHE_READ | FJ_TUNE_NO_CACHE_WRITE}) !=
      0) {
    return absl::InvalidArgumentError(
        absl::StrCat("options->flags has unknown bits: ", o.flags));
  }
  r.read_cache = (o.flags & FJ_TUNE_NO_CACHE_READ) == 0;
  r.write_cache = (o.flags & FJ_TUNE_NO_CACHE_WRITE) == 0;
  return r;
}

}  // namespace

extern "C" {

FJ_API fj_status* fj_tune(fj_runtime* runtime, const fj_tune_options* options,
                          fj_tune_result** out_result) {
  return OnRuntime(runtime, [&](Runtime* rt) -> absl::Status {
    if (out_result == nullptr) return NullArgument("out_result");
    FJ_ASSIGN_OR_RETURN(TuneRequest request, ReadTuneOptions(options));
    RuntimePin pin(rt);
    absl::StatusOr<TuneOutcome> tuned;
    {
      OutsideGate blocking;  // a tuning run: destroys need not wait
      tuned = rt->Tune(request);
    }
    FJ_ASSIGN_OR_RETURN(TuneOutcome outcome, std::move(tuned));
    auto* object = new TuneResultObject{std::move(outcome)};
    uint64_t h = RegisterHandle(HandleType::kTuneResult, object);
    if (h == 0) {
      delete object;
      return absl::ResourceExhaustedError("too many live handles");
    }
    *out_result = AsHandle<fj_tune_result>(h);
    return absl::OkStatus();
  });
}

FJ_API fj_status* fj_tune_result_summary(const fj_tune_result* result,
                                         fj_tune_summary* out_summary) {
  return OnHandle<GetTuneResult>(result, [&](TuneResultObject* r) {
    FJ_RETURN_IF_ERROR(
        CheckOutStruct(out_summary, "out_summary", sizeof(fj_tune_summary)));
    const TuneOutcome& o = r->outcome;
    fj_tune_summary s{};
    s.struct_size = sizeof(s);
    s.num_rows = o.record.rows.size();
    s.winner = o.record.winner;
    s.source = CacheResultOf(o.source);
    s.noisy = o.record.noisy ? 1 : 0;
    s.stored = o.stored ? 1 : 0;
    s.tune_ms = o.record.tune_ms;
    s.lookup_ms = o.lookup_ms;
    std::snprintf(s.key, sizeof(s.key), "%s", o.key_digest.c_str());
    return WriteOutStruct(s, out_summary);
  });
}

FJ_API fj_status* fj_tune_result_row(const fj_tune_result* result, size_t index,
                                     fj_tune_row* out_row) {
  return OnHandle<GetTuneResult>(result, [&](TuneResultObject* r) {
    FJ_RETURN_IF_ERROR(CheckOutStruct(out_row, "out_row", sizeof(fj_tune_row)));
    const std::vector<tune::TuneRow>& rows = r->outcome.record.rows;
    if (index >= rows.size()) {
      return absl::OutOfRangeError(absl::StrCat(
          "index ", index, " is past the table's ", rows.size(), " rows"));
    }
    const tune::TuneRow& row = rows[index];
    fj_tune_row out{};
    out.struct_size = sizeof(out);
    out.macro_index = row.macro_index;
    out.shape_index = row.shape_index;
    out.macros = StrOf(row.macros);
    for (int d = 0; d < 3; ++d) {
      out.block[d] = row.block[d];
      out.cluster[d] = row.cluster[d];
      out.grid[d] = row.grid[d];
    }
    out.shared_bytes = row.shared_bytes;
    out.status = static_cast<fj_tune_status>(static_cast<int>(row.status));
    out.message = StrOf(row.message);
    out.median_us = row.median_us;
    out.min_us = row.min_us;
    out.spread = row.spread;
    out.noisy = row.noisy ? 1 : 0;
    out.samples = row.samples;
    out.batch = row.batch;
    return WriteOutStruct(out, out_row);
  });
}

FJ_API fj_status* fj_tune_result_free(fj_tune_result* result) {
  return Guard([&]() -> absl::Status {
    if (result == nullptr) return absl::OkStatus();
    FJ_RETURN_IF_ERROR(CheckCanWaitHere());
    FJ_ASSIGN_OR_RETURN(
        TuneResultObject * r,
        Take<TuneResultObject>(result, HandleType::kTuneResult, "result"));
    OutsideGate outside;
    WaitForCallsInFlight();  // a getter may be reading it
    delete r;
    return absl::OkStatus();
  });
}

FJ_API const char* fj_tune_status_name(fj_tune_status status) {
  const int32_t s = RawEnum(status);
  if (s < 0 || s > FJ_TUNE_STATUS_LAST) return "unknown";
  return tune::RowStatusName(static_cast<tune::RowStatus>(s)).data();
}

}  // extern "C"
