//! The 1.1 calls that are not builds or copies: images built elsewhere
//! (`fj_module_load`), the cache flush, CUDA's header folders, wrapped
//! streams, device-to-device copies and the tensor-argument check.
use super::*;
use std::time::Duration;

c_enum!(
    /// The format of an image given to [`Runtime::load_module`]
    /// (`fj_image_kind`).
    #[derive(Default)]
    ImageKind: sys::fj_image_kind {
        /// Sniffed: ELF = cubin, fatbin magic, PTX text.
        #[default]
        Auto = sys::FJ_IMAGE_AUTO,
        Cubin = sys::FJ_IMAGE_CUBIN,
        Ptx = sys::FJ_IMAGE_PTX,
        Fatbin = sys::FJ_IMAGE_FATBIN,
    }
);

/// An image built elsewhere and how to read it (`fj_module_load_options`).
#[derive(Debug, Clone, Default)]
pub struct LoadOptions<'a> {
    image: &'a [u8],
    kind: ImageKind,
    name: String,
    target: String,
}

impl<'a> LoadOptions<'a> {
    /// `fleetjit build -o` output, another runtime's [`Module::image`],
    /// nvcc's cubin or fatbin. The bytes are copied by the load.
    pub fn new(image: &'a [u8]) -> Self {
        LoadOptions {
            image,
            ..Default::default()
        }
    }
    pub fn kind(mut self, k: ImageKind) -> Self {
        self.kind = k;
        self
    }
    /// A name for messages (default "image").
    pub fn name(mut self, n: impl Into<String>) -> Self {
        self.name = n.into();
        self
    }
    /// "sm_XX" / "compute_XX" overriding what the image says.
    pub fn target(mut self, t: impl Into<String>) -> Self {
        self.target = t.into();
        self
    }
}

/// One folder of CUDA's headers that every build searches, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncludeDir {
    pub path: String,
    /// "CUDA_HOME", "/usr/local/cuda", ...
    pub origin: String,
}

/// How the tma implementation would move a tensor argument
/// (`fj_tensor_check`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorCheck {
    /// A TMA tensor map describes it (else it falls back to cp.async).
    pub tma: bool,
    /// Why not ("" when `tma`).
    pub reason: String,
}

/// Checks a tensor argument as a launch would (rank, dtype, shape, strides,
/// box, oob); an argument a launch would refuse is that error. Needs no
/// runtime and no GPU.
///
/// It takes a [`TensorArg`] (from [`Tensor::arg`](crate::Tensor::arg), or
/// the `unsafe` [`TensorArg::from_raw`] for a raw `fj_tensor_arg`), never
/// a raw struct: the library dereferences the struct's tensor pointer, so
/// a safe function taking one would let safe code pass a forged address.
pub fn tensor_check(arg: &TensorArg<'_>) -> Result<TensorCheck> {
    let mut out = zeroed_struct!(sys::fj_tensor_check);
    // SAFETY: a TensorArg's pointers are valid while it lives (its borrow of
    // the Tensor, or from_raw's contract).
    check(unsafe { sys::fj_tensor_arg_check(arg.as_raw(), &mut out) })?;
    Ok(TensorCheck {
        tma: out.tma != 0,
        reason: fixed_string(&out.reason),
    })
}

impl Runtime {
    /// Makes a module of an image built elsewhere (the image is copied).
    /// A cubin's parameters come from the driver, so loading one needs a
    /// GPU it runs on; PTX needs none until a kernel is looked up.
    pub fn load_module(&self, options: &LoadOptions<'_>) -> Result<Module<'_>> {
        no_nul("the image name", &options.name)?;
        no_nul("the target", &options.target)?;
        let mut o = zeroed_struct!(sys::fj_module_load_options);
        o.image = ptr_or_null(options.image).cast();
        o.image_size = options.image.len();
        o.kind = options.kind.raw();
        o.name = sys::fj_str::from_str(&options.name);
        o.target = sys::fj_str::from_str(&options.target);
        let mut m = ptr::null_mut();
        check(unsafe { sys::fj_module_load(self.raw.as_ptr(), &o, &mut m) })?;
        Module::from_created(m, "fj_module_load returned no module")
    }

    /// Waits until the cache work earlier builds left to the background is
    /// done: disk entries written, remote publications sent (at most
    /// `timeout` for those: `DeadlineExceeded` if some are still queued).
    pub fn flush_cache(&self, timeout: Duration) -> Result<()> {
        let ms = timeout.as_millis().min(u32::MAX as u128) as u32;
        check(unsafe { sys::fj_cache_flush(self.raw.as_ptr(), ms) })
    }

    /// CUDA's header folders every build searches after the caller's, in
    /// order, each with why it is searched.
    pub fn include_dirs(&self) -> Result<Vec<IncludeDir>> {
        let mut n = 0usize;
        check(unsafe {
            sys::fj_runtime_include_dir(
                self.raw.as_ptr(),
                0,
                &mut n,
                ptr::null_mut(),
                ptr::null_mut(),
            )
        })?;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            let (mut p, mut o) = (ptr::null(), ptr::null());
            check(unsafe {
                sys::fj_runtime_include_dir(self.raw.as_ptr(), i, ptr::null_mut(), &mut p, &mut o)
            })?;
            out.push(IncludeDir {
                path: unsafe { c_string(p) },
                origin: unsafe { c_string(o) },
            });
        }
        Ok(out)
    }

    /// Wraps a `CUstream` the caller owns (another library's stream, 0 or 1
    /// for the legacy default stream, 2 for the per-thread one) as a
    /// [`Stream`] of `device`: work on it is ordered with the caller's.
    /// The CUstream is borrowed: dropping the wrapper only forgets it.
    ///
    /// # Safety
    /// `cu_stream` must be 0, 1, 2 or a live CUstream, and stay alive while
    /// the wrapper is used: the driver dereferences it, so a forged or freed
    /// pointer is undefined behaviour (a stream of another context or device
    /// is refused).
    pub unsafe fn wrap_stream(&self, device: i32, cu_stream: u64) -> Result<Stream<'_>> {
        let mut s = ptr::null_mut();
        check(unsafe { sys::fj_stream_wrap(self.raw.as_ptr(), device, cu_stream, &mut s) })?;
        Stream::from_created(s, "fj_stream_wrap returned no stream")
    }
}

impl<T: DeviceCopy> DeviceBuffer<'_, T> {
    /// Copies `src` (exactly `len()` elements) into this buffer, device to
    /// device, complete on return.
    pub fn copy_from_device(&mut self, src: &DeviceBuffer<'_, T>) -> Result<()> {
        self.same_len("the source buffer", src.len())?;
        check(unsafe {
            sys::fj_memcpy_dtod(
                self.rt.as_raw(),
                self.address,
                src.address,
                self.bytes(),
                ptr::null_mut(),
            )
        })
    }
}
