"""fleetjit: CUDA kernels built at run time for the GPU they land on.

A ctypes binding of libfleetjit.so.1 (the C ABI in <fleetjit/fleetjit.h>):
no compiler is needed to install it. The library is found through
$FLEETJIT_LIBRARY (a path), else the loader's search for libfleetjit.so.1.

    import fleetjit
    with fleetjit.Runtime() as rt:
        mod = rt.build(SAXPY, name="saxpy.cu")          # NVRTC, or a cache hit
        k = mod.kernel("saxpy")
        k.launch(grid=(n + 255) // 256, block=256,
                 args=[y, x, fleetjit.f32(2.0), n],     # torch/CuPy arrays as pointers
                 stream=torch.cuda.current_stream())

Every failure is a FleetjitError with .code ("BUILD_ERROR", ...), .message
and, for compile errors, .build_log; each code has its subclass
(BuildError, InvalidArgumentError - also a ValueError -,
DeadlineExceededError - also a TimeoutError -, ...).

Launches take a compiled path (fleetjit/_fastlaunch.c, built by
scripts/dev/build-python-ext or the wheel) when it is there, else pure
ctypes. Framework ops: fleetjit.torch_ops (torch.library custom ops),
fleetjit.jax_ffi (jax.ffi.ffi_call).
"""

from . import _ffi
from ._ffi import EXPECTED_MAJOR, EXPECTED_MINOR, library_path
from .args import (Scalar, Tensor, bf16, c64, c128, f16, f32, f64, i8, i16, i32, i64,
                   pointer, u8, u16, u32, u64)
from .errors import (BuildError, CudaError, DeadlineExceededError, FailedPreconditionError,
                     FleetjitError, InternalError, InvalidArgumentError, NotFoundError,
                     OutOfRangeError, ResourceExhaustedError, UnavailableError)
from .builds import BuildFuture
from .runtime import (CacheStats, CopyPlan, Device, DeviceBuffer, Kernel, KernelInfo,
                      Module, ModuleInfo, Runtime, Stream, check_version, copy_plan,
                      library_version, tensor_check)
from .tensors import BorrowedTensor, borrow
from . import globals as _globals  # 1.3: Module/Kernel/Runtime methods (globals.py)
from .tuning import (CallbackFailure, HostOutput, Macros, TuneCallbackError, TuneOutput,  # fj_tune
                     TuneResult, TuneRow, close, tune)  # (since 1.3)
from .link import LinkInput  # noqa: F401  (and Runtime.link, since 1.3)

__version__ = _ffi.VERSION  # the library version (scripts/dev/gen-bindings)

__all__ = [
    "BorrowedTensor", "BuildError", "c64", "c128", "BuildFuture", "CudaError", "DeadlineExceededError",
    "FailedPreconditionError", "InternalError", "InvalidArgumentError", "NotFoundError",
    "OutOfRangeError", "ResourceExhaustedError", "UnavailableError", "CacheStats", "CopyPlan", "Device", "DeviceBuffer", "EXPECTED_MAJOR",
    "EXPECTED_MINOR", "FleetjitError", "Kernel", "KernelInfo", "Module", "ModuleInfo",
    "Runtime", "Scalar", "Stream", "Tensor", "bf16", "borrow", "check_version", "copy_plan",
    "f16", "f32", "f64", "i8", "i16", "i32", "i64", "library_path", "library_version",
    "pointer", "tensor_check", "u8", "u16", "u32", "u64",
    "tune", "TuneResult", "TuneRow", "TuneOutput", "TuneCallbackError", "CallbackFailure",
    "HostOutput", "Macros", "close",
]
