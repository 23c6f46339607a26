#include "jit/thunk/thunk_codegen.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/exit_gate.h"
#include "fleetjit/fleetjit.h"
#include "jit/thunk/arg_rules.h"
#include "jit/thunk/llvm.h"
#include "jit/thunk/thunk_abi.h"

namespace fleetjit::jit {
namespace {

// The fj_arg layout the generated code reads (64-bit hosts).
static_assert(offsetof(fj_arg, struct_size) == 0);
static_assert(offsetof(fj_arg, kind) == 8 && sizeof(fj_arg_kind) == 4);
static_assert(offsetof(fj_arg, size) == 12);
static_assert(offsetof(fj_arg, v) == 16);
static_assert(sizeof(void*) == 8, "thunks assume a 64-bit host");
static_assert(offsetof(FjThunkContext, encode_tensor) == 0);
static_assert(offsetof(FjThunkContext, encoder) == 8);

// Copies and zero-fills of up to this many bytes are unrolled; longer ones
// become a loop of 8-byte moves.
constexpr uint32_t kUnrollBytes = 256;

double MsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - start)
      .count();
}

uint64_t Fnv1a(uint64_t h, uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    h ^= (v >> (8 * i)) & 0xff;
    h *= 0x100000001b3ull;
  }
  return h;
}

// Builds one module of thunks. LLVM 14: typed pointers, so every address
// is an i8* plus a constant offset, cast to the accessed type.
class ThunkModuleBuilder {
 public:
  ThunkModuleBuilder(llvm::LLVMContext& ctx, llvm::Module& module)
      : ctx_(ctx), module_(module), b_(ctx) {
    i8_ = b_.getInt8Ty();
    i16_ = b_.getInt16Ty();
    i32_ = b_.getInt32Ty();
    i64_ = b_.getInt64Ty();
    i8p_ = b_.getInt8PtrTy();
    encode_ty_ = llvm::FunctionType::get(
        i32_, {i8p_, i32_, i8p_, i32_, i32_, i32_, i8p_}, false);
  }

  // Each argument is one block on the common path: its struct_size and kind
  // checked with one bit test, its value stored, and a branch to the next
  // argument. By-value structs, complex values and tensors, and every
  // refusal, sit on a side block. The first refused argument returns at
  // once. Under FastISel (MakeTargetMachine) few values live across blocks,
  // so few are spilled: a select chain carrying the first failure through
  // straight-line code cost about 45 instructions per pointer argument,
  // this about a third of it.
  void AddThunk(const KernelEntry& entry, CopyImpl impl,
                const std::string& name) {
    auto* fn_ty =
        llvm::FunctionType::get(i32_, {i8p_, i64_, i64_, i8p_, i8p_}, false);
    fn_ = llvm::Function::Create(fn_ty, llvm::GlobalValue::ExternalLinkage,
                                 name, module_);
    fn_->addFnAttr(llvm::Attribute::NoUnwind);
    fn_->setDSOLocal(true);
    auto arg_it = fn_->arg_begin();
    llvm::Value* args = &*arg_it++;
    llvm::Value* n = &*arg_it++;
    llvm::Value* stride = &*arg_it++;
    buffer_ = &*arg_it++;
    llvm::Value* ctx = &*arg_it++;
    args->setName("args");
    n->setName("n");
    stride->setName("stride");
    buffer_->setName("buffer");
    ctx->setName("ctx");

    auto* entry_bb = llvm::BasicBlock::Create(ctx_, "entry", fn_);
    auto* bad_count = llvm::BasicBlock::Create(ctx_, "bad_count", fn_);
    auto* body = llvm::BasicBlock::Create(ctx_, "body", fn_);
    b_.SetInsertPoint(bad_count);
    b_.CreateRet(b_.getInt32(kThunkBadCount));
    b_.SetInsertPoint(entry_bb);
    b_.CreateCondBr(b_.CreateICmpEQ(n, b_.getInt64(entry.params.size())), body,
                    bad_count);

    b_.SetInsertPoint(body);
    bool has_tensor = false;
    for (const ParamSpec& p : entry.params)
      has_tensor |= AcceptedArgsFor(p).tensor;
    llvm::Value* encode_fn = nullptr;
    llvm::Value* encoder = nullptr;
    if (has_tensor) {
      encode_fn = b_.CreateBitCast(LoadAt(i8p_, ctx, 0),
                                   encode_ty_->getPointerTo(), "encode_tensor");
      encoder = LoadAt(i8p_, ctx, 8, "encoder");
    }
    for (size_t i = 0; i < entry.params.size(); ++i) {
      llvm::Value* p =
          i == 0 ? args
                 : b_.CreateInBoundsGEP(i8_, args,
                                        b_.CreateMul(stride, b_.getInt64(i)),
                                        absl::StrCat("p", i));
      auto* next =
          llvm::BasicBlock::Create(ctx_, absl::StrCat("arg", i + 1), fn_);
      auto* fail = llvm::BasicBlock::Create(ctx_, absl::StrCat("bad", i), fn_);
      EmitArg(entry.params[i], i, impl, p, stride, encode_fn, encoder, next,
              fail);
      b_.SetInsertPoint(fail);
      b_.CreateRet(b_.getInt32(static_cast<int32_t>(i + 1)));
      b_.SetInsertPoint(next);
    }
    ZeroGaps(entry);
    b_.CreateRet(b_.getInt32(0));
  }

 private:
  llvm::Value* Addr(llvm::Type* ty, llvm::Value* base, uint64_t offset) {
    llvm::Value* p =
        offset ? b_.CreateConstInBoundsGEP1_64(i8_, base, offset) : base;
    return b_.CreateBitCast(p, ty->getPointerTo());
  }
  llvm::Value* LoadAt(llvm::Type* ty, llvm::Value* base, uint64_t offset,
                      const llvm::Twine& name = "") {
    return b_.CreateAlignedLoad(ty, Addr(ty, base, offset), llvm::MaybeAlign(1),
                                name);
  }
  void StoreAt(llvm::Value* v, llvm::Value* base, uint64_t offset) {
    b_.CreateAlignedStore(v, Addr(v->getType(), base, offset),
                          llvm::MaybeAlign(1));
  }
  llvm::Type* IntOfBytes(uint32_t bytes) {
    return bytes == 1 ? i8_ : bytes == 2 ? i16_ : bytes == 4 ? i32_ : i64_;
  }

  // Continues the current block into `next` when argument i is acceptable
  // and packed, into `fail` when it is not. A scalar's value is stored
  // before its check (the buffer is discarded on failure); by-value structs
  // (a copy through the caller's pointer) and tensors (a call) run only
  // after theirs.
  void EmitArg(const ParamSpec& spec, size_t i, CopyImpl impl, llvm::Value* p,
               llvm::Value* stride, llvm::Value* encode_fn,
               llvm::Value* encoder, llvm::BasicBlock* next,
               llvm::BasicBlock* fail) {
    const AcceptedArgs accepted = AcceptedArgsFor(spec);
    llvm::Value* size_ok =
        b_.CreateICmpEQ(LoadAt(i64_, p, offsetof(fj_arg, struct_size),
                               absl::StrCat("struct_size", i)),
                        stride);
    llvm::Value* kind =
        LoadAt(i32_, p, offsetof(fj_arg, kind), absl::StrCat("kind", i));
    // Each side form's block falls through to the next form's test.
    auto side = [&](const char* what) {
      return llvm::BasicBlock::Create(ctx_, absl::StrCat(what, i), fn_);
    };

    // Scalars: every accepted kind has the parameter's size. One bit test
    // of the kind against the accepted set: kinds are 1..30, so bit 0 and
    // bit 31 are never set, and any kind outside them (a negative one
    // too, unsigned) tests bit 31.
    if (accepted.scalar_kinds != 0) {
      StoreAt(LoadAt(IntOfBytes(spec.size), p, offsetof(fj_arg, v)), buffer_,
              spec.offset);
      static_assert(FJ_ARG_KIND_LAST < 31, "kinds fit a 31-bit mask");
      llvm::Value* clamped = b_.CreateSelect(
          b_.CreateICmpULT(kind, b_.getInt32(31)), kind, b_.getInt32(31));
      llvm::Value* bit = b_.CreateTrunc(
          b_.CreateLShr(b_.getInt32(accepted.scalar_kinds), clamped),
          b_.getInt1Ty());
      auto* other = side("other");
      b_.CreateCondBr(b_.CreateAnd(size_ok, bit), next, other);
      b_.SetInsertPoint(other);
    }
    // By-value struct: size must match exactly and the pointer be set.
    if (accepted.bytes) {
      llvm::Value* src =
          LoadAt(i8p_, p, offsetof(fj_arg, v), absl::StrCat("src", i));
      llvm::Value* bytes_ok = b_.CreateAnd(
          b_.CreateAnd(b_.CreateICmpEQ(kind, b_.getInt32(FJ_ARG_BYTES)),
                       b_.CreateICmpEQ(LoadAt(i32_, p, offsetof(fj_arg, size)),
                                       b_.getInt32(spec.size))),
          b_.CreateIsNotNull(src));
      auto* copy = side("copy");
      auto* after = side("not_bytes");
      b_.CreateCondBr(b_.CreateAnd(bytes_ok, size_ok), copy, after);
      b_.SetInsertPoint(copy);
      CopyBytes(src, spec.offset, spec.size);
      b_.CreateBr(next);
      b_.SetInsertPoint(after);
    }
    // A cuDoubleComplex: 16 bytes at v.bytes, which must be set.
    if (accepted.c128) {
      llvm::Value* src =
          LoadAt(i8p_, p, offsetof(fj_arg, v), absl::StrCat("c128_src", i));
      llvm::Value* c128_ok =
          b_.CreateAnd(b_.CreateICmpEQ(kind, b_.getInt32(FJ_ARG_C128)),
                       b_.CreateIsNotNull(src));
      auto* copy = side("c128_");
      auto* after = side("not_c128_");
      b_.CreateCondBr(b_.CreateAnd(c128_ok, size_ok), copy, after);
      b_.SetInsertPoint(copy);
      CopyBytes(src, spec.offset, 16);
      b_.CreateBr(next);
      b_.SetInsertPoint(after);
    }
    // Tensor: the encoder validates, reuses or encodes, and writes 320 bytes.
    if (accepted.tensor) {
      llvm::Value* is_tensor =
          b_.CreateICmpEQ(kind, b_.getInt32(FJ_ARG_TENSOR));
      auto* call = side("tensor");
      b_.CreateCondBr(b_.CreateAnd(is_tensor, size_ok), call, fail);
      b_.SetInsertPoint(call);
      llvm::Value* tensor = LoadAt(i8p_, p, offsetof(fj_arg, v), "tensor_arg");
      llvm::Value* dst =
          b_.CreateConstInBoundsGEP1_64(i8_, buffer_, spec.offset);
      llvm::Value* r = b_.CreateCall(
          encode_ty_, encode_fn,
          {encoder, b_.getInt32(static_cast<uint32_t>(i)), tensor,
           b_.getInt32(spec.tensor_rank), b_.getInt32(spec.tensor_dtype),
           b_.getInt32(static_cast<int32_t>(impl)), dst});
      b_.CreateCondBr(b_.CreateICmpEQ(r, b_.getInt32(0)), next, fail);
      return;
    }
    b_.CreateBr(fail);
  }

  // buffer[offset, offset+size) = src[0, size), src of any alignment.
  void CopyBytes(llvm::Value* src, uint32_t offset, uint32_t size) {
    uint32_t done = 0;
    if (size > kUnrollBytes) {
      done = size / 8 * 8;
      Loop8(done, [&](llvm::Value* index) {
        llvm::Value* from = b_.CreateInBoundsGEP(i8_, src, index);
        llvm::Value* to = b_.CreateInBoundsGEP(
            i8_, b_.CreateConstInBoundsGEP1_64(i8_, buffer_, offset), index);
        llvm::Value* v = b_.CreateAlignedLoad(
            i64_, b_.CreateBitCast(from, i64_->getPointerTo()),
            llvm::MaybeAlign(1));
        b_.CreateAlignedStore(v, b_.CreateBitCast(to, i64_->getPointerTo()),
                              llvm::MaybeAlign(1));
      });
    }
    for (uint32_t chunk : {8u, 4u, 2u, 1u}) {
      while (size - done >= chunk) {
        StoreAt(LoadAt(IntOfBytes(chunk), src, done), buffer_, offset + done);
        done += chunk;
      }
    }
  }

  // buffer[offset, offset+size) = 0.
  void ZeroBytes(uint32_t offset, uint32_t size) {
    uint32_t done = 0;
    if (size > kUnrollBytes) {
      done = size / 8 * 8;
      Loop8(done, [&](llvm::Value* index) {
        llvm::Value* to = b_.CreateInBoundsGEP(
            i8_, b_.CreateConstInBoundsGEP1_64(i8_, buffer_, offset), index);
        b_.CreateAlignedStore(b_.getInt64(0),
                              b_.CreateBitCast(to, i64_->getPointerTo()),
                              llvm::MaybeAlign(1));
      });
    }
    for (uint32_t chunk : {8u, 4u, 2u, 1u}) {
      while (size - done >= chunk) {
        StoreAt(llvm::ConstantInt::get(IntOfBytes(chunk), 0), buffer_,
                offset + done);
        done += chunk;
      }
    }
  }

  // for (index = 0; index < bytes; index += 8) body(index); bytes > 0.
  template <typename Body>
  void Loop8(uint32_t bytes, Body body) {
    llvm::BasicBlock* before = b_.GetInsertBlock();
    auto* loop = llvm::BasicBlock::Create(ctx_, "loop", fn_);
    auto* after = llvm::BasicBlock::Create(ctx_, "after", fn_);
    b_.CreateBr(loop);
    b_.SetInsertPoint(loop);
    llvm::PHINode* index = b_.CreatePHI(i64_, 2, "index");
    index->addIncoming(b_.getInt64(0), before);
    body(index);
    llvm::Value* advanced = b_.CreateAdd(index, b_.getInt64(8));
    index->addIncoming(advanced, b_.GetInsertBlock());
    b_.CreateCondBr(b_.CreateICmpULT(advanced, b_.getInt64(bytes)), loop,
                    after);
    b_.SetInsertPoint(after);
  }

  // Zeroes every byte of the buffer that no parameter covers, so the
  // buffer's content never depends on what was there before.
  void ZeroGaps(const KernelEntry& entry) {
    std::vector<std::pair<uint32_t, uint32_t>> spans;
    for (const ParamSpec& p : entry.params)
      spans.emplace_back(p.offset, p.offset + p.size);
    std::sort(spans.begin(), spans.end());
    uint32_t at = 0;
    for (const auto& [begin, end] : spans) {
      if (begin > at) ZeroBytes(at, begin - at);
      at = std::max(at, end);
    }
    if (entry.param_bytes > at) ZeroBytes(at, entry.param_bytes - at);
  }

  llvm::LLVMContext& ctx_;
  llvm::Module& module_;
  llvm::IRBuilder<> b_;
  llvm::Type* i8_;
  llvm::Type* i16_;
  llvm::Type* i32_;
  llvm::Type* i64_;
  llvm::PointerType* i8p_;
  llvm::FunctionType* encode_ty_;
  llvm::Function* fn_ = nullptr;
  llvm::Value* buffer_ = nullptr;
};

absl::StatusOr<std::unique_ptr<llvm::TargetMachine>> MakeTargetMachine() {
  InitializeLlvmOnce();
  const std::string triple = ThunkTargetTriple();
  std::string error;
  const llvm::Target* target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (target == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "launch thunks: LLVM has no target for '", triple, "': ", error));
  }
  llvm::TargetOptions options;
  // FastISel (CodeGenOpt::None): the IR is already unrolled, with one
  // block per argument on the common path, so the optimising selector
  // would buy a few instructions per argument (FastISel spills what lives
  // across blocks) for 5-10x the code generation time (measured: 12
  // thunks in ~3.5 ms instead of 20-40 ms).
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, "generic", "", options, llvm::Reloc::PIC_, llvm::CodeModel::Small,
      llvm::CodeGenOpt::None));
  if (machine == nullptr) {
    return absl::InternalError(absl::StrCat(
        "launch thunks: cannot create a target machine for ", triple));
  }
  return machine;
}

// Target machines, reused across thunk generations. Creating one (and its
// subtarget, which the machine caches) was a large part of each object's
// emission time. A TargetMachine is not safe to use from two threads at
// once, so each generation takes one out of the pool for its whole run and
// gives it back after; concurrent generations each get their own. The
// pool is process-wide (a TargetMachine holds no per-runtime state: only
// the triple and options below), heap-allocated and never destroyed, so no
// destructor runs at exit while another thread might still use one. It
// holds at most as many machines as generations ever ran at once.
class TargetMachinePool {
 public:
  static TargetMachinePool& Get() {
    static TargetMachinePool* pool = new TargetMachinePool();
    return *pool;
  }
  absl::StatusOr<std::unique_ptr<llvm::TargetMachine>> Take() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        std::unique_ptr<llvm::TargetMachine> machine = std::move(free_.back());
        free_.pop_back();
        return machine;
      }
    }
    return MakeTargetMachine();
  }
  void Give(std::unique_ptr<llvm::TargetMachine> machine) {
    if (machine == nullptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(machine));
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<llvm::TargetMachine>> free_;
};

struct BuiltModule {
  BuiltModule() = default;
  BuiltModule(BuiltModule&&) = default;
  BuiltModule& operator=(BuiltModule&&) = default;
  // The module and context go first: they are built against the machine.
  ~BuiltModule() {
    module.reset();
    context.reset();
    TargetMachinePool::Get().Give(std::move(machine));
  }
  std::unique_ptr<llvm::TargetMachine> machine;
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;
  int thunks = 0;
  int skipped = 0;
};

absl::StatusOr<BuiltModule> BuildModule(absl::Span<const KernelEntry> kernels,
                                        CopyImpl impl) {
  BuiltModule built;
  auto machine = TargetMachinePool::Get().Take();
  if (!machine.ok()) return machine.status();
  built.machine = std::move(*machine);
  built.context = std::make_unique<llvm::LLVMContext>();
  built.module =
      std::make_unique<llvm::Module>("fleetjit_thunks", *built.context);
  built.module->setTargetTriple(built.machine->getTargetTriple().str());
  built.module->setDataLayout(built.machine->createDataLayout());
  ThunkModuleBuilder builder(*built.context, *built.module);
  std::map<std::string, bool> emitted;
  for (const KernelEntry& entry : kernels) {
    if (!ValidateKernelLayout(entry).ok()) {
      ++built.skipped;
      continue;
    }
    std::string name = ThunkSymbol(entry, impl);
    if (!emitted.emplace(name, true).second) continue;
    builder.AddThunk(entry, impl, name);
    ++built.thunks;
  }
  std::string problems;
  llvm::raw_string_ostream os(problems);
  if (llvm::verifyModule(*built.module, &os)) {
    os.flush();
    return absl::InternalError(absl::StrCat(
        "launch thunks: generated IR does not verify: ", problems));
  }
  return built;
}

}  // namespace

void InitializeLlvmOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

std::string ThunkTargetTriple() { return llvm::sys::getProcessTriple(); }

std::string ThunkSymbol(const KernelEntry& entry, CopyImpl impl) {
  uint64_t h = 0xcbf29ce484222325ull;
  h = Fnv1a(h, kThunkCodegenVersion);
  h = Fnv1a(h, static_cast<uint64_t>(impl));
  h = Fnv1a(h, entry.param_bytes);
  h = Fnv1a(h, entry.params.size());
  for (const ParamSpec& p : entry.params) {
    h = Fnv1a(h, static_cast<uint64_t>(p.kind));
    h = Fnv1a(h, p.offset);
    h = Fnv1a(h, p.size);
    h = Fnv1a(h, static_cast<uint32_t>(p.tensor_rank));
    h = Fnv1a(h, static_cast<uint32_t>(p.tensor_dtype));
  }
  return absl::StrFormat("fj_thunk_%016x", h);
}

absl::StatusOr<std::string> ThunkModuleIR(absl::Span<const KernelEntry> kernels,
                                          CopyImpl impl) {
  auto built = BuildModule(kernels, impl);
  if (!built.ok()) return built.status();
  std::string text;
  llvm::raw_string_ostream os(text);
  built->module->print(os, nullptr);
  os.flush();
  return text;
}

absl::StatusOr<std::string> EmitThunkObject(
    absl::Span<const KernelEntry> kernels, CopyImpl impl,
    ThunkCodegenStats* stats) {
  // LLVM's statics must outlive the code generation (base/exit_gate.h).
  absl::StatusOr<ExitGate::Pass> pass = ExitGate::Enter("launch thunks");
  if (!pass.ok()) return pass.status();
  auto start = std::chrono::steady_clock::now();
  auto built = BuildModule(kernels, impl);
  if (!built.ok()) return built.status();
  const double ir_ms = MsSince(start);

  start = std::chrono::steady_clock::now();
  llvm::SmallVector<char, 0> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager passes;
  if (built->machine->addPassesToEmitFile(passes, os, nullptr,
                                          llvm::CGFT_ObjectFile)) {
    return absl::InternalError(
        "launch thunks: the target machine cannot emit object files");
  }
  passes.run(*built->module);
  if (stats != nullptr) {
    stats->ir_ms = ir_ms;
    stats->codegen_ms = MsSince(start);
    stats->thunks = built->thunks;
    stats->skipped = built->skipped;
    stats->object_bytes = object.size();
  }
  return std::string(object.data(), object.size());
}

}  // namespace fleetjit::jit
