// fleetjit copy layer: the checks of a kernel's calls.
//
// Always on (they cost nothing where the arguments are constants):
//   - a gather's or scatter's dimension must be one of the tensor's:
//     fj::dim<D> fails to compile otherwise (static_assert), an int traps
//     with a message.
// In a checked build (FJ_CHECK=1; FLEETJIT_CHECK=1 adds it to every build
// the runtime makes for a caller, and `fleetjit matrix` rehearses with it):
//   - FJ_CHECK_TENSORS (copy.cuh: a tensor that is not the kernel's
//     __grid_constant__ parameter);
//   - every tile a load reads from a tensor under oob_promise_in_bounds
//     lies inside it (a gather's gathered dimension excepted: its bad
//     indices read the fill by contract);
//   - sizeof(T) of the kernel's fj::tensor<T, R> is the tensor's element
//     size;
//   - under tma, a tile that leaves the tensor map for a reason of its own
//     call is noted once per call site for the host (check_notes.h).
// A failed check prints one line naming the call (the fj:: function, the
// function and source line that called it, the coordinates, box and shape,
// dimension 0 first as in fj::at) from the calling team's first thread,
// then every thread of the team traps: the launch fails.
//
// Internal to <fleetjit/copy.cuh>, which includes it after the
// implementation it uses.
#ifndef FLEETJIT_COPY_CHECK_CUH_
#define FLEETJIT_COPY_CHECK_CUH_

#include <fleetjit/copy/check_notes.h>

#include <fleetjit/copy/common.cuh>

#ifndef FJ_CHECK
#define FJ_CHECK 0
#endif
#if FJ_CHECK && !defined(FJ_CHECK_TENSORS)
#define FJ_CHECK_TENSORS 1
#endif
// The notes table exists in whole-program builds of checked tma modules:
// a relocatable build (-dc, the slow-path library) would define it once
// per object.
#if FJ_CHECK && FJ_COPY_IMPL == 2 && defined(__CUDA_ARCH__) && \
    !defined(__CUDACC_RDC__) && !defined(FJ_SLOW_PATHS_LIBRARY)
#define FJ_CHECK_NOTES 1
extern "C" {
__device__ unsigned long long fj_check_notes[2 * FJ_CHECK_NOTE_SLOTS];
}
#else
#define FJ_CHECK_NOTES 0
#endif

namespace fj {

// A dimension known at compile time, for fj::gather_tiles and
// fj::scatter_tiles: fj::dim<1> (dimension 1, the rows of a 2-D tensor).
// One the tensor does not have fails to compile.
template <int D>
struct dim_t {
  enum : int { value = D };
};
#if __cplusplus >= 201402L
template <int D>
constexpr dim_t<D> dim{};
#endif

namespace detail {

// Where an fj:: call was made: the builtins evaluate at the caller's call
// (a defaulted argument of every tile call), so a message can name it: the
// calling function and line. (NVRTC 13's __builtin_FILE() is empty, so the
// file is not named.) A plain build keeps none of it.
struct site {
  unsigned line;
  const char* func;
  static FJ_DEV site here(unsigned line = __builtin_LINE(),
                          const char* func = __builtin_FUNCTION()) {
    site s;
    s.line = line;
    s.func = func;
    return s;
  }
};

FJ_DEV const char* call_name(int call) {
  switch (call) {
    case check_load_tile:
      return "fj::load_tile";
    case check_load_tile_multicast:
      return "fj::load_tile_multicast";
    case check_load_tiles:
      return "fj::load_tiles";
    case check_gather_tiles:
      return "fj::gather_tiles";
    case check_store_tile:
      return "fj::store_tile";
    case check_store_tiles:
      return "fj::store_tiles";
    default:
      return "fj::scatter_tiles";
  }
}

// The end of a failed check: the team's first thread has printed; the
// scope's barrier keeps every other thread from trapping before it did.
FJ_DEV void fail(block_t) {
  __syncthreads();
  __trap();
}
FJ_DEV void fail(warp_t) {
  __syncwarp();
  __trap();
}

// ------------------------------------------------ the dimension of a gather
// The reports that are not templates are `inline`: a relocatable build (the
// slow-path library's route) links two objects that both define them.
__device__ __noinline__ inline void report_dim(int call, int d, int rank,
                                               const site& s) {
  printf(
      "fleetjit: %s in %s, line %u: dimension %d is not a dimension of this "
      "rank-%d tensor (0, the innermost, to %d): the index list would be "
      "ignored. Pass fj::dim<D> to have this checked at compile time.\n",
      call_name(call), s.func, s.line, d, rank, rank - 1);
}
template <int R, class Scope>
FJ_DEV int checked_dim(Scope sc, int call, int d, const site& s) {
  if ((unsigned)d >= (unsigned)R) {
    if (team_of(sc).rank == 0) report_dim(call, d, R, s);
    fail(sc);
  }
  return d;
}
template <int R, class Scope, int D>
FJ_DEV int checked_dim(Scope, int, dim_t<D>, const site&) {
  static_assert(D >= 0 && D < R,
                "fj::gather_tiles / fj::scatter_tiles: fj::dim<D> is not a "
                "dimension of this tensor: a rank-R tensor has dimensions 0 "
                "(the innermost) to R - 1");
  return D;
}

// ------------------------------------------------------- checked builds
#if FJ_CHECK
template <int R>
static __device__ __noinline__ void report_outside(int call,
                                                   const tensor_param& p,
                                                   const coords& c,
                                                   const site& s) {
  const int* v = c.v;
  const int* b = p.box;
  const long long* n = p.shape;
  const char* fn = call_name(call);
#define FJ_CHECK_HEAD "fleetjit check: %s in %s, line %u: the tile at("
#define FJ_CHECK_TAIL                                                       \
  ", which promised its tiles in bounds (oob_promise_in_bounds; dimension " \
  "0 first, as fj::at): pass it with oob zeros or nan to read its edges "   \
  "as the fill\n"
  FJ_IF_CONSTEXPR(R == 1) {
    printf(FJ_CHECK_HEAD
           "%d) with box {%d} leaves the tensor of shape {%lld}" FJ_CHECK_TAIL,
           fn, s.func, s.line, v[0], b[0], n[0]);
  }
  else FJ_IF_CONSTEXPR(R == 2) {
    printf(FJ_CHECK_HEAD
           "%d, %d) with box {%d, %d} leaves the tensor of shape {%lld, "
           "%lld}" FJ_CHECK_TAIL,
           fn, s.func, s.line, v[0], v[1], b[0], b[1], n[0], n[1]);
  }
  else FJ_IF_CONSTEXPR(R == 3) {
    printf(FJ_CHECK_HEAD
           "%d, %d, %d) with box {%d, %d, %d} leaves the tensor of shape "
           "{%lld, %lld, %lld}" FJ_CHECK_TAIL,
           fn, s.func, s.line, v[0], v[1], v[2], b[0], b[1], b[2], n[0], n[1],
           n[2]);
  }
  else FJ_IF_CONSTEXPR(R == 4) {
    printf(FJ_CHECK_HEAD
           "%d, %d, %d, %d) with box {%d, %d, %d, %d} leaves the tensor of "
           "shape {%lld, %lld, %lld, %lld}" FJ_CHECK_TAIL,
           fn, s.func, s.line, v[0], v[1], v[2], v[3], b[0], b[1], b[2], b[3],
           n[0], n[1], n[2], n[3]);
  }
  else {
    printf(FJ_CHECK_HEAD
           "%d, %d, %d, %d, %d) with box {%d, %d, %d, %d, %d} leaves the "
           "tensor of shape {%lld, %lld, %lld, %lld, %lld}" FJ_CHECK_TAIL,
           fn, s.func, s.line, v[0], v[1], v[2], v[3], v[4], b[0], b[1], b[2],
           b[3], b[4], n[0], n[1], n[2], n[3], n[4]);
  }
#undef FJ_CHECK_HEAD
#undef FJ_CHECK_TAIL
}
__device__ __noinline__ inline void report_elem(int call, int declared,
                                                int passed, int dtype,
                                                const site& s) {
  printf(
      "fleetjit check: %s in %s, line %u: the kernel's fj::tensor has "
      "%d-byte elements but the tensor passed has %d-byte elements (dtype "
      "code %d): declare FJ_TENSOR with the tensor's element type\n",
      call_name(call), s.func, s.line, declared, passed, dtype);
}
#endif  // FJ_CHECK

// The tile at `c` lies inside `p` in every dimension but `skip` (-1: none).
template <int R>
FJ_DEV bool inside_but(const tensor_param& p, const coords& c, int skip) {
  bool in = true;
#pragma unroll
  for (int d = 0; d < R; ++d) {
    if (d != skip)
      in = in && c.v[d] >= 0 && (i64)c.v[d] + p.box[d] <= p.shape[d];
  }
  return in;
}

// Checked builds: the element size of the kernel's tensor<T, R>.
template <class T, class Scope>
FJ_DEV void check_elem(Scope sc, int call, const tensor_param& p,
                       const site& s) {
#if FJ_CHECK
  if (p.elem_bytes == (int)sizeof(T)) return;
  if (team_of(sc).rank == 0)
    report_elem(call, (int)sizeof(T), p.elem_bytes, p.dtype, s);
  fail(sc);
#endif
}

// Checked builds: a tile a load reads under oob_promise_in_bounds lies
// inside the tensor (dimension `skip` excepted).
template <int R, class Scope>
FJ_DEV void check_inside(Scope sc, int call, const tensor_param& p,
                         const coords& c, bool pred, int skip, const site& s) {
#if FJ_CHECK
  if (!pred || p.oob != oob_promise_in_bounds || inside_but<R>(p, c, skip))
    return;
  if (team_of(sc).rank == 0) report_outside<R>(call, p, c, s);
  fail(sc);
#endif
}

// Checked tma builds: notes a tile copy that leaves the tensor map for a
// reason of its own call, once per call site (check_notes.h). Tensors
// without a map are the host's to report (fj_tensor_arg_check, the launch's
// info line).
FJ_DEV void note(int call, int reason, const site& s, u64 detail_word) {
#if FJ_CHECK_NOTES
  const u64 key =
      ((u64)s.line << 32) | ((u64)(call & 0xFF) << 8) | (u64)(reason & 0xFF);
  for (int i = 0; i < FJ_CHECK_NOTE_SLOTS; ++i) {
    const u64 old = atomicCAS(&fj_check_notes[2 * i], 0ull, key);
    if (old == 0) {
      fj_check_notes[2 * i + 1] = detail_word;
      return;
    }
    if (old == key) return;
  }
#endif
}
template <int R, class Scope>
FJ_DEV void note_tma(Scope sc, int call, const tensor_param& p, const coords& c,
                     const void* smem, bool pred, bool store, const site& s) {
#if FJ_CHECK_NOTES
  if (!pred || (p.flags & FJ_TP_HAS_TMAP) == 0 || team_of(sc).rank != 0) return;
  if (!tma_impl::tmap_coords_ok(p, c)) {
    note(call, check_unaligned_start, s,
         (u64)(unsigned)c.v[0] | ((u64)(unsigned)p.elem_bytes << 32));
  } else if ((addr(smem) & (tma_impl::tmap_smem_align(p) - 1)) != 0) {
    note(call, check_unaligned_smem, s,
         addr(smem) & (tma_impl::tmap_smem_align(p) - 1));
  } else if (store && !tma_impl::tile_inside<R>(p, c)) {
    note(call, check_edge_store, s, 0);
  } else if (!store && p.oob == oob_nan &&
             (p.dtype == dtype_f8e4m3 || p.dtype == dtype_f8e5m2)) {
    note(call, check_fp8_nan, s, 0);
  }
#endif
}
template <class Scope>
FJ_DEV void note_group_load(Scope sc, int call, const tensor_param& p,
                            bool pred, const site& s) {
#if FJ_CHECK_NOTES
  if (pred && (p.flags & FJ_TP_HAS_TMAP) != 0 && team_of(sc).rank == 0)
    note(call, check_group_load, s, 0);
#endif
}

// What a checked build does at every tile call: the element size, the
// bounds of a promise-in-bounds load, the tma notes. Nothing otherwise.
template <class T, int R, class Scope>
FJ_DEV void check_tile(Scope sc, int call, const tensor_param& p,
                       const coords& c, const void* smem, bool pred, bool load,
                       const site& s) {
#if FJ_CHECK
  check_elem<T>(sc, call, p, s);
  if (load) check_inside<R>(sc, call, p, c, pred, -1, s);
  note_tma<R>(sc, call, p, c, smem, pred, !load, s);
#endif
}
// The same for the k tiles of a list (load_tiles, store_tiles) or of a
// gather or scatter along `skip` (whose bad indices are defined: the fill,
// or no write; the other dimensions are checked at `base`).
// `group`: the loads complete in the open group (cp.async under tma).
template <class T, int R, class Scope, class Coords>
FJ_DEV void check_tiles(Scope sc, int call, const tensor_param& p,
                        const Coords& cs, int k, const void* smem, bool pred,
                        bool load, bool group, int skip, const site& s) {
#if FJ_CHECK
  // The list may be SMEM the block wrote right before the call, which the
  // call's own barrier publishes: read it after one here too.
  enter_scope(sc);
  check_elem<T>(sc, call, p, s);
  if (group) note_group_load(sc, call, p, pred && k > 0, s);
  const unsigned bb = box_bytes(p, R);
  for (int i = 0; i < k; ++i) {
    if (!cs.ok(i)) continue;
    const coords c = cs(i);
    if (load) check_inside<R>(sc, call, p, c, pred, skip, s);
    if (!group)
      note_tma<R>(sc, call, p, c, (const unsigned char*)smem + i * bb, pred,
                  !load, s);
  }
#endif
}
// Whether loads given `Done` complete in the open group.
template <class Done>
struct is_group {
  enum { value = 0 };
};
template <>
struct is_group<in_group_t> {
  enum { value = 1 };
};
template <>
struct is_group<const in_group_t> {
  enum { value = 1 };
};

}  // namespace detail
}  // namespace fj

#endif  // FLEETJIT_COPY_CHECK_CUH_
