"""fleetjit kernels as PyTorch custom ops (torch.library).

A custom op is opaque to torch.compile (no graph break: dynamo records the
call and runs its fake implementation to learn the output's shape), and
it launches on torch's current stream, so it is ordered with torch's own
kernels and is recorded by CUDA graph capture (torch.cuda.graph). Build
the kernel and run the op once before capturing: building and the first
launch on a new stream are host work that capture does not record.

    import torch, fleetjit
    from fleetjit import torch_ops
    rt = fleetjit.Runtime()
    scale = torch_ops.KernelCache(rt, SCALE_SRC, "scale")   # built on first use

    @torch.library.custom_op("mylib::scale", mutates_args=())
    def scale_op(x: torch.Tensor, a: float) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        torch_ops.launch(scale.get(x.device), grid=(x.numel() + 255) // 256,
                         block=256, args=[out, x, a, x.numel()])
        return out

    # The fake must give the layout the op returns (contiguous here):
    # torch.compile checks the real output's strides against it.
    scale_op.register_fake(lambda x, a: x.new_empty(x.shape))

`saxpy` below is such an op over examples/saxpy.cu: fleetjit::saxpy(x, y, a)
returns a * x + y.
"""

import threading

import torch

from .runtime import Runtime

_SAXPY = r"""
extern "C" __global__ void saxpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
"""


# torch's current CUstream as an int, without making a Stream object (the
# call inductor's generated code uses); torch.cuda.current_stream otherwise.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)


def current_stream(device):
    """torch's current stream of `device` (an ordinal) as an integer CUstream."""
    if _raw_stream is not None:
        return _raw_stream(device)
    return torch.cuda.current_stream(device).cuda_stream


def launch(kernel, grid, block, args, shared_bytes=0):
    """Launches `kernel` on torch's current stream of the kernel's device."""
    kernel.launch(grid, block, args, stream=current_stream(kernel.device),
                  shared_bytes=shared_bytes)


class KernelCache:
    """One kernel of a source, built on first use for each device."""

    def __init__(self, runtime, source, name, **build_options):
        self._runtime = runtime
        self._source = source
        self._name = name
        self._options = build_options
        self._kernels = {}
        self._lock = threading.Lock()

    def get(self, device=None):
        """The kernel on `device` (a torch.device or ordinal; None: current)."""
        if device is None:
            index = torch.cuda.current_device()
        elif isinstance(device, int):
            index = device
        else:
            index = device.index if device.index is not None else torch.cuda.current_device()
        k = self._kernels.get(index)
        if k is None:
            with self._lock:
                k = self._kernels.get(index)
                if k is None:
                    module = self._runtime.build(self._source, name=f"{self._name}.cu",
                                                 device=index, **self._options)
                    k = module.kernel(self._name, device=index)
                    self._kernels[index] = k
        return k


_default = {}
_default_lock = threading.Lock()


def default_runtime():
    """The process's shared Runtime for the ops of this module."""
    with _default_lock:
        rt = _default.get("rt")
        if rt is None or rt.closed:
            rt = _default["rt"] = Runtime()
        return rt


_saxpy_kernel = None


def _saxpy():
    global _saxpy_kernel
    if _saxpy_kernel is None:
        _saxpy_kernel = KernelCache(default_runtime(), _SAXPY, "saxpy")
    return _saxpy_kernel


@torch.library.custom_op("fleetjit::saxpy", mutates_args=(), device_types="cuda")
def saxpy(x: torch.Tensor, y: torch.Tensor, a: float) -> torch.Tensor:
    """a * x + y for float32 CUDA tensors of one shape, by a fleetjit kernel."""
    if x.shape != y.shape or x.dtype != torch.float32 or y.dtype != torch.float32:
        raise ValueError("fleetjit::saxpy takes two float32 tensors of one shape")
    out = y.contiguous().clone()
    n = out.numel()
    if n:
        launch(_saxpy().get(out.device), grid=(n + 255) // 256, block=256,
               args=[out, x.contiguous(), float(a), n])
    return out


@saxpy.register_fake
def _saxpy_fake(x, y, a):
    return torch.empty_like(y, memory_format=torch.contiguous_format)
