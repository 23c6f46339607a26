// fleetjit checked builds: the notes a checked kernel leaves for the host.
//
// A module built with FJ_CHECK=1 (FLEETJIT_CHECK=1 adds it to every build)
// under the tma implementation records, once per call site, a tile copy
// that left the tensor map for a reason of its own call (an innermost start
// coordinate not 16-byte aligned, SMEM not aligned, a store crossing the
// tensor's edge, a load in a group). The device cannot log, so it writes
// the note into the module's global `fj_check_notes`; after a launch of
// such a kernel, with the runtime's log level at debug, the runtime reads
// the table and logs each note once (runtime/launch/check_notes.cc).
//
// The table: FJ_CHECK_NOTE_SLOTS pairs of 64-bit words. Word 0 of a pair is
// the note's key, 0 while the slot is free: bits 32..63 the call site's
// line (__builtin_LINE of the fj:: call), bits 8..15 the fj_check_call, bits
// 0..7 the fj_check_reason. Word 1 is what the first such tile showed: the
// innermost start coordinate (bits 0..31, two's complement) and the element
// size in bytes (bits 32..39) for FJ_CHECK_UNALIGNED_START, the SMEM
// address modulo the alignment it needed (bits 0..31) for
// FJ_CHECK_UNALIGNED_SMEM, 0 otherwise. A full table drops further notes.
//
// Builtin types only: compiled by the host compiler and, embedded, by
// NVRTC.
#ifndef FLEETJIT_COPY_CHECK_NOTES_H_
#define FLEETJIT_COPY_CHECK_NOTES_H_

#define FJ_CHECK_NOTE_SLOTS 32
// The name of the table in a checked module (cuModuleGetGlobal).
#define FJ_CHECK_NOTES_SYMBOL "fj_check_notes"

namespace fj {

// The fj:: call a note or a checked-mode message is about. Values are
// shared with the host: append only.
enum check_call : int {
  check_load_tile = 1,
  check_load_tile_multicast = 2,
  check_load_tiles = 3,
  check_gather_tiles = 4,
  check_store_tile = 5,
  check_store_tiles = 6,
  check_scatter_tiles = 7,
  check_call_last = 7,
};

// Why a tile copy left the tensor map. Values are shared with the host.
enum check_reason : int {
  // c0 * elem_bytes % 16 != 0 (docs/copy-guide.md, 2.): cp.async loads,
  // thread stores.
  check_unaligned_start = 1,
  // The SMEM tile is not 128-byte aligned (or at the swizzle's repeat).
  check_unaligned_smem = 2,
  // A tile store that crosses the tensor's edge: clipped thread stores.
  check_edge_store = 3,
  // A load completing in a group (fj::in_group): TMA loads complete only
  // on a barrier, so group loads are cp.async.
  check_group_load = 4,
  // An fp8 tensor under oob_nan: TMA has no fp8 NaN fill.
  check_fp8_nan = 5,
  check_reason_last = 5,
};

}  // namespace fj

#endif  // FLEETJIT_COPY_CHECK_NOTES_H_
