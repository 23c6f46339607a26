#include "jit/thunk/thunk_jit.h"

#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/exit_gate.h"
#include "jit/thunk/llvm.h"
#include "jit/thunk/thunk_codegen.h"

namespace fleetjit::jit {

// Appears in exported signatures, so it holds no LLVM type (those are
// hidden): the JITDylib is kept opaque.
class ThunkLibrary {
 public:
  llvm::orc::JITDylib& dylib() const {
    return *static_cast<llvm::orc::JITDylib*>(opaque_dylib);
  }
  std::string object;  // the bytes, to tell objects apart
  void* opaque_dylib = nullptr;
  std::map<std::string, std::unique_ptr<LaunchThunk>> thunks;
};

struct __attribute__((visibility("hidden"))) ThunkJit::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  llvm::Triple::ArchType arch = llvm::Triple::UnknownArch;
  mutable absl::Mutex mu;
  uint64_t next_id ABSL_GUARDED_BY(mu) = 0;
  // Hash of the object's bytes -> libraries with that hash.
  std::multimap<size_t, std::unique_ptr<ThunkLibrary>> libraries
      ABSL_GUARDED_BY(mu);
  ThunkJitStats stats ABSL_GUARDED_BY(mu);
  // Separate lock: ORC may report while Load holds `mu`.
  absl::Mutex error_mu;
  std::string session_error ABSL_GUARDED_BY(error_mu);
};

namespace {

absl::Status FromLlvm(llvm::Error error, absl::string_view context) {
  std::string message = llvm::toString(std::move(error));
  return absl::InternalError(absl::StrCat(context, ": ", message));
}

}  // namespace

ThunkJit::ThunkJit(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ThunkJit::~ThunkJit() = default;

absl::StatusOr<std::unique_ptr<ThunkJit>> ThunkJit::Create() {
  InitializeLlvmOnce();
  llvm::Triple triple(ThunkTargetTriple());
  llvm::orc::JITTargetMachineBuilder machine(triple);
  machine.setCPU("generic");
  machine.setRelocationModel(llvm::Reloc::PIC_);
  machine.setCodeModel(llvm::CodeModel::Small);
  // No platform: no initialisers, no atexit hooks, no symbols from the
  // process. Thunk objects reference nothing outside themselves.
  auto jit = llvm::orc::LLJITBuilder()
                 .setJITTargetMachineBuilder(std::move(machine))
                 .setPlatformSetUp(llvm::orc::setUpInactivePlatform)
                 .create();
  if (!jit) {
    return absl::UnavailableError(
        absl::StrCat("launch thunks: cannot start LLVM's JIT for ",
                     triple.str(), ": ", llvm::toString(jit.takeError())));
  }
  auto impl = std::make_unique<Impl>();
  impl->jit = std::move(*jit);
  impl->arch = triple.getArch();
  Impl* raw = impl.get();
  // ORC reports link errors here as well as to the caller; keep them off
  // stderr (the host process owns it) and attach them to the status.
  impl->jit->getExecutionSession().setErrorReporter([raw](llvm::Error error) {
    std::string message = llvm::toString(std::move(error));
    absl::MutexLock lock(&raw->error_mu);
    raw->session_error = std::move(message);
  });
  return std::unique_ptr<ThunkJit>(new ThunkJit(std::move(impl)));
}

absl::StatusOr<ThunkLibrary*> ThunkJit::Load(absl::string_view object) {
  // LLVM's statics must outlive the link (base/exit_gate.h).
  absl::StatusOr<ExitGate::Pass> pass = ExitGate::Enter("launch thunks");
  if (!pass.ok()) return pass.status();
  const auto start = std::chrono::steady_clock::now();
  const size_t hash = std::hash<std::string_view>()(
      std::string_view(object.data(), object.size()));
  absl::MutexLock lock(&impl_->mu);
  auto range = impl_->libraries.equal_range(hash);
  for (auto it = range.first; it != range.second; ++it) {
    if (it->second->object == object) {
      ++impl_->stats.load_hits;
      return it->second.get();
    }
  }

  // Parse before handing the bytes to the linker: a truncated or foreign
  // object must be a status, not a fault inside RuntimeDyld.
  llvm::MemoryBufferRef ref(llvm::StringRef(object.data(), object.size()),
                            "fleetjit_thunks");
  auto parsed = llvm::object::ObjectFile::createObjectFile(ref);
  if (!parsed) {
    return absl::DataLossError(
        absl::StrCat("launch thunks: malformed object: ",
                     llvm::toString(parsed.takeError())));
  }
  const llvm::object::ObjectFile& file = *parsed->get();
  if (!file.isELF()) {
    return absl::DataLossError("launch thunks: the object is not ELF");
  }
  if (file.getArch() != impl_->arch) {
    return absl::FailedPreconditionError(absl::StrCat(
        "launch thunks: the object is for ",
        llvm::Triple::getArchTypeName(file.getArch()).str(), ", this host is ",
        llvm::Triple::getArchTypeName(impl_->arch).str()));
  }
  std::vector<std::string> names;
  for (const llvm::object::SymbolRef& symbol : file.symbols()) {
    auto name = symbol.getName();
    auto flags = symbol.getFlags();
    if (!name || !flags) {
      llvm::consumeError(name.takeError());
      llvm::consumeError(flags.takeError());
      return absl::DataLossError("launch thunks: unreadable symbol table");
    }
    if ((*flags & llvm::object::SymbolRef::SF_Undefined) != 0) {
      return absl::DataLossError(
          absl::StrCat("launch thunks: the object needs an external symbol '",
                       name->str(), "'; thunk objects must be self-contained"));
    }
    if ((*flags & llvm::object::SymbolRef::SF_Global) != 0 &&
        name->startswith("fj_thunk_")) {
      names.push_back(name->str());
    }
  }

  auto library = std::make_unique<ThunkLibrary>();
  library->object = std::string(object);
  auto dylib = impl_->jit->createJITDylib(
      absl::StrCat("fleetjit_thunks_", impl_->next_id++));
  if (!dylib)
    return FromLlvm(dylib.takeError(), "launch thunks: creating a JITDylib");
  library->opaque_dylib = &*dylib;
  auto release = [&] {
    llvm::consumeError(
        impl_->jit->getExecutionSession().removeJITDylib(library->dylib()));
  };
  if (llvm::Error error = impl_->jit->addObjectFile(
          library->dylib(), llvm::MemoryBuffer::getMemBufferCopy(
                                llvm::StringRef(object.data(), object.size()),
                                "fleetjit_thunks"))) {
    release();
    return FromLlvm(std::move(error), "launch thunks: adding the object");
  }
  // Link now (the first lookup materialises the object), so Find never
  // touches LLVM and a link failure surfaces here.
  for (const std::string& name : names) {
    auto symbol = impl_->jit->lookup(library->dylib(), name);
    if (!symbol) {
      absl::Status status = FromLlvm(
          symbol.takeError(), absl::StrCat("launch thunks: linking ", name));
      absl::MutexLock error_lock(&impl_->error_mu);
      if (!impl_->session_error.empty()) {
        status = absl::InternalError(
            absl::StrCat(status.message(), " (", impl_->session_error, ")"));
        impl_->session_error.clear();
      }
      release();
      return status;
    }
    auto thunk = std::make_unique<LaunchThunk>();
    thunk->fn = reinterpret_cast<FjThunkFn>(
        static_cast<uintptr_t>(symbol->getAddress()));
    thunk->symbol = name;
    library->thunks.emplace(name, std::move(thunk));
  }
  ThunkLibrary* out = library.get();
  impl_->libraries.emplace(hash, std::move(library));
  const double ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start)
                        .count();
  ++impl_->stats.objects_loaded;
  impl_->stats.load_ms_total += ms;
  impl_->stats.last_load_ms = ms;
  return out;
}

absl::StatusOr<const LaunchThunk*> ThunkJit::Find(ThunkLibrary* library,
                                                  const KernelEntry& entry,
                                                  CopyImpl impl) {
  if (library == nullptr) return absl::InvalidArgumentError("no thunk library");
  const std::string name = ThunkSymbol(entry, impl);
  absl::MutexLock lock(&impl_->mu);
  auto it = library->thunks.find(name);
  if (it == library->thunks.end()) {
    return absl::NotFoundError(absl::StrCat("launch thunks: no ", name,
                                            " for kernel '", entry.name,
                                            "' in the object"));
  }
  return it->second.get();
}

absl::Status ThunkJit::Unload(ThunkLibrary* library) {
  if (library == nullptr) return absl::OkStatus();
  absl::MutexLock lock(&impl_->mu);
  for (auto it = impl_->libraries.begin(); it != impl_->libraries.end(); ++it) {
    if (it->second.get() != library) continue;
    llvm::Error error =
        impl_->jit->getExecutionSession().removeJITDylib(library->dylib());
    impl_->libraries.erase(it);
    if (error) return FromLlvm(std::move(error), "launch thunks: unloading");
    return absl::OkStatus();
  }
  return absl::NotFoundError("launch thunks: unknown library");
}

ThunkJitStats ThunkJit::stats() const {
  absl::MutexLock lock(&impl_->mu);
  return impl_->stats;
}

}  // namespace fleetjit::jit
