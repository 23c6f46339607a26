// fleetjit_xla: an XLA FFI handler that launches a fleetjit kernel on the
// stream XLA hands it, on XLA's own buffers.
//
// Built by fleetjit.jax_ffi.build() against the headers jaxlib ships
// (jax.ffi.include_dir()) and <fleetjit/fleetjit.h>; it does not link
// libfleetjit: the Python side passes the addresses of fj_launch and
// fj_stream_wrap that the binding loaded, with the kernel and runtime
// handles, as attributes of the call.
//
// Attributes:
//   launch_fn, wrap_fn, message_fn, free_fn
//                        addresses of fj_launch, fj_stream_wrap,
//                        fj_status_message and fj_status_free
//   runtime, kernel      the fj_runtime* and fj_kernel* handles
//   device               the CUDA ordinal of the kernel
//   grid, block          launch shape; grid 0 = ceil(elements of result 0 /
//                        block)
//   shared_bytes         dynamic shared memory
//   order                the kernel's parameters, in order: k >= 0 is
//                        buffer k (the inputs, then the results), -1 the
//                        next entry of f32s, -2 the next of i32s, -3 the
//                        element count of result 0 as an int32
//   f32s, i32s           the scalar values (padded: at least one entry)
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "fleetjit/fleetjit.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace {

using LaunchFn = fj_status* (*)(fj_kernel*, const fj_launch_config*,
                                const fj_arg*, size_t);
using WrapFn = fj_status* (*)(fj_runtime*, int32_t, uint64_t, fj_stream**);
using MessageFn = const char* (*)(const fj_status*, size_t*);
using FreeFn = void (*)(fj_status*);

// One fj_stream per (runtime, CUstream): wrapping is bookkeeping in the
// library, done once per stream XLA uses; they live as long as the process.
std::mutex g_mu;
std::map<std::pair<uint64_t, uint64_t>, fj_stream*> g_streams;

ffi::Error Fail(const std::string& what) {
  return ffi::Error(ffi::ErrorCode::kInternal, "fleetjit_launch: " + what);
}

// The failed call's message, and the status freed.
ffi::Error FailStatus(const char* call, fj_status* st, uint64_t message_fn,
                      uint64_t free_fn) {
  std::string text = call;
  if (message_fn != 0) {
    size_t size = 0;
    const char* m = reinterpret_cast<MessageFn>(message_fn)(st, &size);
    if (m != nullptr) text += ": " + std::string(m, size);
  }
  if (free_fn != 0) reinterpret_cast<FreeFn>(free_fn)(st);
  return Fail(text);
}

ffi::Error Launch(void* stream, ffi::RemainingArgs args,
                  ffi::RemainingRets rets, uint64_t launch_fn, uint64_t wrap_fn,
                  uint64_t message_fn, uint64_t free_fn, uint64_t runtime,
                  uint64_t kernel, int64_t device, int64_t grid, int64_t block,
                  int64_t shared_bytes, ffi::Span<const int64_t> order,
                  ffi::Span<const float> f32s, ffi::Span<const int32_t> i32s) {
  if (launch_fn == 0 || wrap_fn == 0 || runtime == 0 || kernel == 0) {
    return Fail("launch_fn, wrap_fn, runtime and kernel are required");
  }
  std::vector<void*> buffers;
  int64_t result0_elements = -1;
  for (size_t i = 0; i < args.size(); ++i) {
    auto b = args.get<ffi::AnyBuffer>(i);
    if (!b.has_value()) return Fail("input " + std::to_string(i));
    buffers.push_back(b->untyped_data());
  }
  for (size_t i = 0; i < rets.size(); ++i) {
    auto r = rets.get<ffi::AnyBuffer>(i);
    if (!r.has_value()) return Fail("result " + std::to_string(i));
    buffers.push_back((*r)->untyped_data());
    if (i == 0) result0_elements = static_cast<int64_t>((*r)->element_count());
  }
  std::vector<fj_arg> packed(order.size());
  size_t next_f32 = 0, next_i32 = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    fj_arg& a = packed[i];
    a = fj_arg{};
    a.struct_size = sizeof(fj_arg);
    int64_t o = order[i];
    if (o >= 0) {
      if (static_cast<size_t>(o) >= buffers.size()) {
        return Fail("order names buffer " + std::to_string(o) + " of " +
                    std::to_string(buffers.size()));
      }
      a.kind = FJ_ARG_POINTER;
      a.v.pointer = reinterpret_cast<uint64_t>(buffers[o]);
    } else if (o == -1) {
      if (next_f32 >= f32s.size()) return Fail("too few f32s");
      a.kind = FJ_ARG_F32;
      a.v.f32 = f32s[next_f32++];
    } else if (o == -2) {
      if (next_i32 >= i32s.size()) return Fail("too few i32s");
      a.kind = FJ_ARG_I32;
      a.v.i32 = i32s[next_i32++];
    } else if (o == -3) {
      if (result0_elements < 0 || result0_elements > INT32_MAX) {
        return Fail("no result 0, or over 2^31 elements, for -3");
      }
      a.kind = FJ_ARG_I32;
      a.v.i32 = static_cast<int32_t>(result0_elements);
    } else {
      return Fail("unknown order entry " + std::to_string(o));
    }
  }
  if (block <= 0) return Fail("block must be positive");
  if (grid <= 0) {
    if (result0_elements < 0) return Fail("grid 0 needs a result");
    grid = (result0_elements + block - 1) / block;
    if (grid == 0) return ffi::Error::Success();  // nothing to do
  }

  uint64_t cu = reinterpret_cast<uint64_t>(stream);
  fj_stream* fjs = nullptr;
  if (cu != 0) {
    std::lock_guard<std::mutex> lock(g_mu);
    auto key = std::make_pair(runtime, cu);
    auto it = g_streams.find(key);
    if (it != g_streams.end()) {
      fjs = it->second;
    } else {
      fj_status* st = reinterpret_cast<WrapFn>(wrap_fn)(
          reinterpret_cast<fj_runtime*>(runtime), static_cast<int32_t>(device),
          cu, &fjs);
      if (st != nullptr) {
        return FailStatus("fj_stream_wrap", st, message_fn, free_fn);
      }
      g_streams[key] = fjs;
    }
  }
  fj_launch_config cfg{};
  cfg.struct_size = sizeof(cfg);
  cfg.grid[0] = static_cast<uint32_t>(grid);
  cfg.grid[1] = cfg.grid[2] = 1;
  cfg.block[0] = static_cast<uint32_t>(block);
  cfg.block[1] = cfg.block[2] = 1;
  cfg.shared_bytes = static_cast<uint32_t>(shared_bytes);
  cfg.stream = fjs;
  fj_status* st = reinterpret_cast<LaunchFn>(launch_fn)(
      reinterpret_cast<fj_kernel*>(kernel), &cfg, packed.data(), packed.size());
  if (st != nullptr) return FailStatus("fj_launch", st, message_fn, free_fn);
  return ffi::Error::Success();
}

}  // namespace

XLA_FFI_DEFINE_HANDLER_SYMBOL(FleetjitLaunch, Launch,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<void*>>()
                                  .RemainingArgs()
                                  .RemainingRets()
                                  .Attr<uint64_t>("launch_fn")
                                  .Attr<uint64_t>("wrap_fn")
                                  .Attr<uint64_t>("message_fn")
                                  .Attr<uint64_t>("free_fn")
                                  .Attr<uint64_t>("runtime")
                                  .Attr<uint64_t>("kernel")
                                  .Attr<int64_t>("device")
                                  .Attr<int64_t>("grid")
                                  .Attr<int64_t>("block")
                                  .Attr<int64_t>("shared_bytes")
                                  .Attr<ffi::Span<const int64_t>>("order")
                                  .Attr<ffi::Span<const float>>("f32s")
                                  .Attr<ffi::Span<const int32_t>>("i32s"));
