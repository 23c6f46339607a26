// Loads built modules into device contexts: each image once per (record
// key, device), however many modules share it, and each kernel once per
// image, at the parameter offsets this driver uses. The loaded kernels live
// as long as the loader (LoadedKernel* stay valid); ~ModuleLoader unloads
// every image.
#ifndef FLEETJIT_RUNTIME_LOAD_MODULE_LOADER_H_
#define FLEETJIT_RUNTIME_LOAD_MODULE_LOADER_H_

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "base/thread_shards.h"
#include "jit/artifact.h"
#include "platform/driver_api.h"
#include "runtime/device/device.h"
#include "runtime/load/kernel.h"
#include "runtime/load/module.h"

namespace fleetjit {

class ModuleLoader {
 public:
  // `driver` (null without one), `devices` and `logger` (may be null; its
  // kernels report TMA fallbacks to it) outlive the loader.
  ModuleLoader(const DriverApi* driver, const DeviceList& devices,
               const Logger* logger = nullptr);
  ~ModuleLoader();  // unloads every image (not in a forked child)

  struct Loaded {
    LoadedKernel* kernel;
    bool is_new;  // loaded by this call: the caller attaches its thunk
    // The artifact the kernel's image was loaded from (it lives as long as
    // the loader).
    const jit::Artifact* image_artifact;
  };
  // The kernel `name` of `module` loaded on device `ordinal`. NOT_FOUND
  // (listing the kernels it has) when the module has no such kernel;
  // FAILED_PRECONDITION when its target cannot run on the device. A kernel
  // whose driver layout differs from the artifact's gets a relaid entry.
  // A kernel loaded before is found in this thread's shard of the loader
  // (base/thread_shards.h): the lookup writes nothing other threads write.
  // A kernel is loaded whole (cuFuncLoad after lazy loading), so launching
  // it never loads code; the loading runs in relaxed stream-capture mode
  // and goes through LoadModuleImage (module_image.h): during a capture it
  // works from CUDA 12.3 on and is FAILED_PRECONDITION before.
  absl::StatusOr<Loaded> LoadKernel(const ModuleRecord& module,
                                    absl::string_view name, int ordinal);

  // A module global (__device__ / __constant__ variable) on one device.
  struct Global {
    std::string symbol;  // the name in the image
    CUdeviceptr address = 0;
    uint64_t bytes = 0;
    Device* device = nullptr;
    CUcontext context = nullptr;
  };
  // The global `name` (a name expression of the build, else the symbol) of
  // `module` on device `ordinal`, loading the image there if needed
  // (cuModuleGetGlobal). NOT_FOUND naming the module's global name
  // expressions when there is none. Leaves the device's context current.
  // Loads as LoadKernel does (relaxed capture mode, LoadModuleImage).
  absl::StatusOr<Global> LoadGlobal(const ModuleRecord& module,
                                    absl::string_view name, int ordinal);

  // The kernels loaded from the images of `record_key` that pack by the
  // artifact's layout (not relaid): those a thunk of the artifact can serve.
  std::vector<LoadedKernel*> ThunkableKernels(const std::string& record_key);

 private:
  struct LoadedImage;
  // The loaded kernel of (record key, device ordinal, kernel name).
  struct KernelKey {
    absl::string_view record_key;
    int ordinal;
    absl::string_view name;
    bool operator==(const KernelKey& o) const {
      return ordinal == o.ordinal && record_key == o.record_key &&
             name == o.name;
    }
    template <typename H>
    friend H AbslHashValue(H h, const KernelKey& k) {
      return H::combine(std::move(h), k.record_key, k.ordinal, k.name);
    }
  };
  struct KnownKernel {
    std::string storage;  // record key + name, which the map's key views
    LoadedKernel* kernel;
    const jit::Artifact* image_artifact;
  };
  struct Shard {
    ShardMutex mu;
    // Kernels this shard has seen loaded; they never unload before
    // ~ModuleLoader.
    absl::flat_hash_map<KernelKey, std::unique_ptr<KnownKernel>> known
        ABSL_GUARDED_BY(mu);
  };
  std::unique_ptr<CacheLinePadded<Shard>[]> shards_ {
    new CacheLinePadded<Shard>[ kThreadShards ]
  };
  // The slow path of LoadKernel: loads what is missing (in relaxed capture
  // mode: module_image.h).
  absl::StatusOr<Loaded> Load(const ModuleRecord& module,
                              absl::string_view name, int ordinal);
  // Sets image.check_notes when the image has the checked mode's table.
  void FindCheckNotes(absl::string_view name, LoadedImage& image);
  // The image of `module` on device `ordinal`, loaded once; makes the
  // device's context current.
  absl::StatusOr<LoadedImage*> ImageFor(const ModuleRecord& module,
                                        int ordinal);
  // LoadGlobal's work, in relaxed capture mode.
  absl::StatusOr<Global> FindGlobal(const ModuleRecord& module,
                                    absl::string_view name, int ordinal);
  // Load's second half: the kernel `entry` of a loaded image, loaded once.
  absl::StatusOr<Loaded> AddKernel(const ModuleRecord& module,
                                   LoadedImage& image,
                                   const jit::KernelEntry& entry,
                                   absl::string_view name, Device* dev,
                                   CUcontext ctx);

  const DriverApi* driver_;
  const DeviceList& devices_;
  const Logger* logger_;
  absl::Mutex images_mu_;
  // (record key, device ordinal) -> the loaded image and its kernels.
  std::map<std::pair<std::string, int>, std::unique_ptr<LoadedImage>> images_
      ABSL_GUARDED_BY(images_mu_);
};

}  // namespace fleetjit

#endif  // FLEETJIT_RUNTIME_LOAD_MODULE_LOADER_H_
