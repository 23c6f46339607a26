// The copy-layer conformance matrix (`fleetjit selftest`, the H200 matrix
// test): every feature of <fleetjit/copy.cuh> under every copy
// implementation the device can run, on fresh random cases, driven through
// the public C ABI (<fleetjit/fleetjit.h>) and checked against the host
// reference (conformance/reference.h).
//
// Rows ("impls"): `tma` (cc >= 9.0), `cp_async` (cc >= 8.0) and `sync`, each
// built for the live device with the implementation forced, plus PTX
// targets that run pre-Hopper code paths on a newer GPU through the driver
// JIT: `cp_async@compute_80` (cc >= 9.0) and `sync@compute_75` (cc >= 8.0).
// Any "impl@target" can be named explicitly.
//
// Columns ("features"): barrier, group_wait, copy_g2s, copy_s2g, predicate,
// tile_copy, oob_zeros, oob_nan, multicast, l2_prefetch, pipeline. A feature
// is run as a few "variants" (e.g. predicate = span_load.pred,
// span_store.pred, tile_load.pred, tile_store.pred); FeatureVariants() lists
// them. Each variant makes `launches * scale` launches; every launch is a
// fresh random configuration (block size, grid, tensor dtype/rank/shape/
// strides/box/alignment, coordinates, predicates), derived from
// (seed, variant, launch index) only, so `seed` reproduces a failure on any
// row, alone or in the full matrix. A "case" is one independently checked
// unit of a launch: one span, one tile, one barrier block or one group ring.
//
// Size at scale 1: 11 features as 23 variants, 375 launches per row (tile
// loads and stores: every one of the 13 dtypes at every rank 1..5; NaN fill:
// the 6 float dtypes at every rank), about 2,600 cases per row; on an H200
// 5 rows, 55 cells, 1,875 launches, about 13,000 cases. About 30% of the
// tensors are shaped so TMA cannot describe them (inner stride, row stride
// not a multiple of 16 bytes, base not 16-byte aligned, inner box not a
// multiple of 16 bytes, box over 256): on tma rows they take the runtime's
// per-tensor fallback.
//
// Before each launch its outputs are poisoned (a non-zero byte pattern);
// after it the outputs are copied back and compared with the reference.
// Only the contract of copy.cuh is exercised (the case rules in
// conformance_kernels.cu's header are kept and checked on the host before
// any launch).
//
// The runner drives the matrix through the C ABI, like any user: it is the
// static library fleetjit_selftest, above libfleetjit.so.1, linked by the
// CLI and the matrix test.
#ifndef FLEETJIT_CONFORMANCE_RUNNER_H_
#define FLEETJIT_CONFORMANCE_RUNNER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fleetjit/fleetjit.h"

namespace fleetjit::selftest {

struct MatrixOptions {
  int device = 0;
  uint64_t seed = 0;  // 0 = random (FreshSeed()); reported in each CellResult
  int scale = 1;      // cases multiplier (launches per variant x scale)
  // Rows to run; empty = every row the device can run (DeviceImpls()).
  std::vector<std::string> impls;
  // Columns to run; empty = every feature (MatrixFeatures()).
  std::vector<std::string> features;
  // Restricts each feature to these variants (AllVariants()); empty = all.
  // Features left with no variant are not run.
  std::vector<std::string> variants;
  // Notes while the matrix runs (module builds, seed), one line each.
  std::function<void(const std::string&)> log;
};

struct CellResult {
  std::string feature, impl;
  int cases = 0, failures = 0;  // failures: cases (or launches) that failed
  double ms = 0;                // wall time of the cell (host work included)
  std::string first_failure;    // impl, feature, variant, seed, case, bytes
  // Beyond the brief's minimum:
  int launches = 0;
  int tensor_maps = 0;  // tma rows: tensor launches the runtime gave a TMA map
  int fallbacks = 0;    // tma rows: tensors TMA cannot describe (fallback)
  uint64_t seed = 0;    // the matrix seed
  std::vector<std::string> failure_samples;  // up to 3 failure descriptions
};

// Runs the matrix on options.device. UNAVAILABLE when there is no GPU (or
// no driver); INVALID_ARGUMENT for an unknown impl/feature/variant name;
// FAILED_PRECONDITION for a row the device cannot run or when the C ABI
// library is not loaded. Build failures and case failures are not errors:
// they are failed cells. `progress` is called once per finished cell, in
// order (feature-major, rows in the order of options.impls / DeviceImpls()).
absl::StatusOr<std::vector<CellResult>> RunConformanceMatrix(
    fj_runtime* rt, const MatrixOptions& options,
    std::function<void(const CellResult&)> progress = nullptr);

// The features, in matrix order.
const std::vector<std::string>& MatrixFeatures();
// Every variant name, in matrix order, and those of one feature.
const std::vector<std::string>& AllVariants();
std::vector<std::string> FeatureVariants(absl::string_view feature);
// The rows the device can run, in matrix order.
absl::StatusOr<std::vector<std::string>> DeviceImpls(fj_runtime* rt,
                                                     int device);
// A fresh random non-zero seed.
uint64_t FreshSeed();

}  // namespace fleetjit::selftest

#endif  // FLEETJIT_CONFORMANCE_RUNNER_H_
