// The records of a module: what a build is asked for (BuildSpec) and what
// it, or an import of a prebuilt image, produces (ModuleRecord). The
// builder (runtime/builder/) makes records, the loader (runtime/load/) loads
// them, the registry hands them to callers.
#ifndef FLEETJIT_RUNTIME_LOAD_MODULE_H_
#define FLEETJIT_RUNTIME_LOAD_MODULE_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "jit/artifact.h"
#include "jit/copy_plan.h"
#include "jit/target.h"
#include "runtime/cache/module_cache.h"

namespace fleetjit {

// A built module: its artifact and where it came from. Loading on a device
// goes through the runtime, which loads each image once per context.
struct ModuleRecord {
  std::shared_ptr<const jit::Artifact> artifact;
  std::string key;  // cache digest, or a unique id when uncached
  CacheSource source = CacheSource::kCompiled;
  double build_ms = 0;
  std::string name;
};

struct BuildSpec {
  std::string source;
  std::string name = "kernel.cu";
  std::vector<std::string> options;
  // Folders searched for #include before CUDA's (after any -I in options).
  std::vector<std::string> include_dirs;
  std::vector<std::string> name_expressions;
  std::optional<jit::Target> target;  // else override, else device
  int device = 0;
  std::optional<jit::CopyImpl> copy_impl;  // else override, else chosen
  enum class Output { kAuto, kCubin, kPtx } output = Output::kAuto;
  bool use_cache = true;
  // Whether the runtime's checked mode (RuntimeOptions::check) applies: a
  // caller's build. The runtime's own kernels (fj_copy, fj_prefetch, the
  // slow-path library) set it false.
  bool checkable = true;
};

// One input of a device link (since 1.3): a CUDA source, compiled by NVRTC
// for the link (-dc, or -dlto when the link is LTO), or a prebuilt object.
struct LinkInputSpec {
  enum class Kind { kSource, kCubin, kPtx, kFatbin, kLtoIr, kLibrary };
  Kind kind = Kind::kSource;
  std::string name;                  // for messages; never empty
  std::string data;                  // the source text or the object's bytes
  std::vector<std::string> options;  // kSource: NVRTC options
  std::vector<std::string> name_expressions;  // kSource: C++ kernel names
};

// What a device link is asked for (runtime/builder/module_link.cc).
struct LinkSpec {
  std::vector<LinkInputSpec> inputs;
  std::string name = "link";
  std::vector<std::string> link_options;  // extra nvJitLink options
  // Folders searched for #include by every source (before CUDA's).
  std::vector<std::string> include_dirs;
  std::optional<jit::Target> target;  // else override, else device
  int device = 0;
  bool lto = false;    // sources as LTO-IR, nvJitLink -lto
  bool devrt = false;  // link libcudadevrt.a (dynamic parallelism)
  bool use_cache = true;
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_LOAD_MODULE_H_
