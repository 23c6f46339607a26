//! Tensor copies, L2 prefetch and peer access (since 1.1): `fj_copy` and
//! `fj_prefetch` over slices of descriptors, `fj_peer_query/enable/disable`.
use super::*;

c_enum!(
    /// What a read outside a tensor returns (`fj_oob`).
    #[derive(Default)]
    Oob: sys::fj_oob {
        /// The kernel (or copy) never reads outside.
        #[default]
        PromiseInBounds = sys::FJ_OOB_PROMISE_IN_BOUNDS,
        Zeros = sys::FJ_OOB_ZEROS,
        /// Floating-point dtypes only.
        Nan = sys::FJ_OOB_NAN,
    }
);

c_enum!(
    /// What a prefetch does (`fj_prefetch_mode`; see the header).
    #[derive(Default)]
    PrefetchMode: sys::fj_prefetch_mode {
        #[default]
        Auto = sys::FJ_PREFETCH_AUTO,
        LocalL2 = sys::FJ_PREFETCH_LOCAL_L2,
        WarmOwnerL2 = sys::FJ_PREFETCH_WARM_OWNER_L2,
        StageLocal = sys::FJ_PREFETCH_STAGE_LOCAL,
    }
);

/// A DLPack-compatible tensor (`fj_tensor`) over memory the caller owns,
/// borrowing its shape and strides (outermost-first, in elements).
#[derive(Debug, Clone, Copy)]
pub struct Tensor<'a> {
    raw: sys::fj_tensor,
    _dims: PhantomData<&'a [i64]>,
}

// SAFETY: plain data; the pointers it holds are only read by the library.
unsafe impl Send for Tensor<'_> {}
unsafe impl Sync for Tensor<'_> {}

impl<'a> Tensor<'a> {
    /// kDLCUDA memory at `address` on GPU `device`; `strides` None =
    /// compact row-major. Only the rank is checked here (`strides`, when
    /// given, needs one entry per `shape` entry: the library reads `ndim`
    /// of each); the copy or launch that uses the tensor checks the rest.
    pub fn cuda(
        address: u64,
        device: i32,
        dtype: sys::fj_dl_dtype,
        shape: &'a [i64],
        strides: Option<&'a [i64]>,
    ) -> Result<Tensor<'a>> {
        Self::with_device(
            address,
            sys::fj_dl_device {
                device_type: 2,
                device_id: device,
            },
            dtype,
            shape,
            strides,
        )
    }

    /// Memory of any DLPack device type (kDLCUDAHost = 3 for pinned host
    /// memory, kDLCPU = 1). `strides` of another length than `shape` is an
    /// `InvalidArgument` error ("tensor has 2 shape entries but 1
    /// strides"), as in the Go binding: `fj_tensor` has one `ndim` for
    /// both arrays, so the library would read past the shorter slice.
    pub fn with_device(
        address: u64,
        device: sys::fj_dl_device,
        dtype: sys::fj_dl_dtype,
        shape: &'a [i64],
        strides: Option<&'a [i64]>,
    ) -> Result<Tensor<'a>> {
        if let Some(s) = strides {
            if s.len() != shape.len() {
                return Err(Error::new(
                    Code::InvalidArgument,
                    format!(
                        "tensor has {} shape entries but {} strides",
                        shape.len(),
                        s.len()
                    ),
                ));
            }
        }
        Ok(Tensor {
            raw: sys::fj_tensor {
                data: address as usize as *mut c_void,
                device,
                // A rank past i32 is refused by the library as too large.
                ndim: i32::try_from(shape.len()).unwrap_or(i32::MAX),
                dtype,
                // The library reads, never writes, shape and strides.
                shape: shape.as_ptr() as *mut i64,
                strides: strides.map_or(ptr::null_mut(), |s| s.as_ptr() as *mut i64),
                byte_offset: 0,
            },
            _dims: PhantomData,
        })
    }

    /// float32 (DLPack code 2, 32 bits, 1 lane).
    pub const F32: sys::fj_dl_dtype = sys::fj_dl_dtype {
        code: 2,
        bits: 32,
        lanes: 1,
    };
    /// int32 (code 0).
    pub const I32: sys::fj_dl_dtype = sys::fj_dl_dtype {
        code: 0,
        bits: 32,
        lanes: 1,
    };
    /// int64 (code 0), e.g. a gather index.
    pub const I64: sys::fj_dl_dtype = sys::fj_dl_dtype {
        code: 0,
        bits: 64,
        lanes: 1,
    };

    /// The C struct, e.g. for an [`sys::fj_tensor_arg`].
    pub fn as_raw(&self) -> &sys::fj_tensor {
        &self.raw
    }

    /// A tensor argument over this tensor (for [`Arg::Tensor`] and
    /// [`crate::tensor_check`]): `box_` outermost-first like the shape (0 =
    /// the whole extent), the out-of-bounds fill and the SMEM swizzle
    /// (`sys::FJ_SWIZZLE_*`). The [`TensorArg`] borrows the tensor: it
    /// cannot outlive it (see [`TensorArg`] for why).
    pub fn arg(&self, box_: [u32; 5], oob: Oob, swizzle: sys::fj_swizzle) -> TensorArg<'_> {
        TensorArg {
            raw: sys::fj_tensor_arg {
                struct_size: std::mem::size_of::<sys::fj_tensor_arg>(),
                ext: ptr::null(),
                tensor: &self.raw,
                box_,
                oob: oob.raw(),
                swizzle,
            },
            _tensor: PhantomData,
        }
    }
}

/// A tensor argument (`fj_tensor_arg`) made by [`Tensor::arg`], borrowing
/// its [`Tensor`] for `'t`.
///
/// Why a type of its own rather than the plain `sys::fj_tensor_arg`: the C
/// struct holds a raw pointer to the `fj_tensor` inside the [`Tensor`] (and
/// through it to the borrowed shape and strides), and a raw pointer carries
/// no lifetime. Returned bare, the argument could outlive its tensor and a
/// safe [`crate::tensor_check`] or launch would read freed stack or heap
/// memory. The `PhantomData<&'t Tensor>` makes the borrow checker hold the
/// tensor alive (and unmoved) while the argument exists;
/// `#[repr(transparent)]` keeps its layout that of `fj_tensor_arg`, so
/// [`Arg::Tensor`] passes its address to the library as is.
///
/// Only the plain-data fields can be changed safely ([`TensorArg::with_box`]
/// and friends); an argument with other pointers or sizes is made by the
/// `unsafe` [`TensorArg::from_raw`].
#[repr(transparent)]
#[derive(Debug, Clone, Copy)]
pub struct TensorArg<'t> {
    raw: sys::fj_tensor_arg,
    _tensor: PhantomData<&'t Tensor<'t>>,
}

// SAFETY: as for Tensor: plain data whose pointers the library only reads.
unsafe impl Send for TensorArg<'_> {}
unsafe impl Sync for TensorArg<'_> {}

impl<'t> TensorArg<'t> {
    /// Wraps a raw `fj_tensor_arg`, e.g. one with an `ext` chain or a
    /// tensor that is not a [`Tensor`].
    ///
    /// # Safety
    /// `raw.tensor` (and the shape and strides it points at, `ndim` entries
    /// each) and `raw.ext` must be NULL or valid for reads for all of `'t`:
    /// [`crate::tensor_check`] and launches dereference them.
    pub unsafe fn from_raw(raw: sys::fj_tensor_arg) -> TensorArg<'t> {
        TensorArg {
            raw,
            _tensor: PhantomData,
        }
    }
    /// The C struct (valid while `'t` lasts).
    pub fn as_raw(&self) -> &sys::fj_tensor_arg {
        &self.raw
    }
    /// The same argument with another box (outermost-first; 0 = whole).
    pub fn with_box(mut self, box_: [u32; 5]) -> Self {
        self.raw.box_ = box_;
        self
    }
    /// The same argument with another out-of-bounds fill.
    pub fn with_oob(mut self, oob: Oob) -> Self {
        self.raw.oob = oob.raw();
        self
    }
    /// The same argument with another SMEM swizzle (`sys::FJ_SWIZZLE_*`).
    pub fn with_swizzle(mut self, swizzle: sys::fj_swizzle) -> Self {
        self.raw.swizzle = swizzle;
        self
    }
}

/// One copy of a window of `src` into `dst` (`fj_copy_desc`): `dst[i] =
/// src[src_start + i]` inside src, the `oob` fill elsewhere; with
/// `gather_index`, the outermost source coordinate is `gather_index[i0] +
/// src_start[0]` (rows of a paged KV cache).
#[derive(Debug, Clone, Copy)]
pub struct CopyDesc<'a> {
    pub src: &'a Tensor<'a>,
    pub dst: &'a Tensor<'a>,
    /// Outermost-first; entries past src's rank must be 0.
    pub src_start: [i64; 5],
    pub oob: Oob,
    pub gather_index: Option<&'a Tensor<'a>>,
}

impl<'a> CopyDesc<'a> {
    /// All of `src` (from its origin) into `dst`, in bounds.
    pub fn new(src: &'a Tensor<'a>, dst: &'a Tensor<'a>) -> Self {
        CopyDesc {
            src,
            dst,
            src_start: [0; 5],
            oob: Oob::PromiseInBounds,
            gather_index: None,
        }
    }
    fn raw(&self) -> sys::fj_copy_desc {
        let mut d = zeroed_struct!(sys::fj_copy_desc);
        d.src = &self.src.raw;
        d.dst = &self.dst.raw;
        d.src_start = self.src_start;
        d.oob = self.oob.raw();
        d.gather_index = self
            .gather_index
            .map_or(ptr::null(), |t| &t.raw as *const _);
        d
    }
}

/// What to prefetch, for which reader, and how (`fj_prefetch_desc`): a byte
/// range, or a tile of a tensor.
#[derive(Debug, Clone, Copy, Default)]
pub struct PrefetchDesc<'a> {
    pub address: u64,
    pub bytes: u64,
    /// When set, the tile of it at `tile_start` with `tile_extent`
    /// (0 = to the end) instead of the byte range.
    pub tensor: Option<&'a Tensor<'a>>,
    pub tile_start: [i64; 5],
    pub tile_extent: [i64; 5],
    pub mode: PrefetchMode,
    /// The GPU that will read the data; -1 = the stream's GPU.
    pub reader_device: i32,
    /// `StageLocal`: the reader's buffer receiving the data, and its bytes.
    pub stage_address: u64,
    pub stage_bytes: u64,
}

impl<'a> PrefetchDesc<'a> {
    /// `bytes` bytes at `address`, for the stream's GPU, mode `Auto`.
    pub fn range(address: u64, bytes: u64) -> Self {
        PrefetchDesc {
            address,
            bytes,
            reader_device: -1,
            ..Default::default()
        }
    }
    fn raw(&self) -> sys::fj_prefetch_desc {
        let mut d = zeroed_struct!(sys::fj_prefetch_desc);
        d.address = self.address;
        d.bytes = self.bytes;
        d.tensor = self.tensor.map_or(ptr::null(), |t| &t.raw as *const _);
        d.tile_start = self.tile_start;
        d.tile_extent = self.tile_extent;
        d.mode = self.mode.raw();
        d.reader_device = self.reader_device;
        d.stage_address = self.stage_address;
        d.stage_bytes = self.stage_bytes;
        d
    }
}

fn stream_ptr(stream: Option<&Stream<'_>>) -> *mut sys::fj_stream {
    stream.map_or(ptr::null_mut(), |s| s.raw.as_ptr())
}

impl Runtime {
    /// Runs each copy in order on `stream` (None: the legacy default stream
    /// of dst's GPU). Stops at the first error, which names the descriptor
    /// (`copy 2 of 3: ...`); copies before it are already enqueued.
    ///
    /// # Safety
    /// The copies are asynchronous: host memory a tensor points at must
    /// stay alive until the stream has passed the copy. (The library checks
    /// device ranges against their allocations, dtypes, ranks, overlaps and
    /// whether host memory is pinned.)
    pub unsafe fn copy(&self, descs: &[CopyDesc<'_>], stream: Option<&Stream<'_>>) -> Result<()> {
        let s = stream_ptr(stream);
        for (i, d) in descs.iter().enumerate() {
            let raw = d.raw();
            check(unsafe { sys::fj_copy(self.raw.as_ptr(), &raw, s) })
                .map_err(|e| e.prefixed(&format!("copy {} of {}", i + 1, descs.len())))?;
        }
        Ok(())
    }

    /// Runs each prefetch in order on `stream` (None: the reader's legacy
    /// default stream). A hint for the L2 modes; `StageLocal` writes the
    /// stage buffer. Stops at the first error, naming the descriptor.
    ///
    /// # Safety
    /// As for [`Runtime::copy`]: the stage buffer and the memory read must
    /// stay allocated until the stream has passed the prefetch.
    pub unsafe fn prefetch(
        &self,
        descs: &[PrefetchDesc<'_>],
        stream: Option<&Stream<'_>>,
    ) -> Result<()> {
        let s = stream_ptr(stream);
        for (i, d) in descs.iter().enumerate() {
            let raw = d.raw();
            check(unsafe { sys::fj_prefetch(self.raw.as_ptr(), &raw, s) })
                .map_err(|e| e.prefixed(&format!("prefetch {} of {}", i + 1, descs.len())))?;
        }
        Ok(())
    }

    /// Whether GPU `reader` has a P2P path to `owner`'s memory (always for
    /// reader == owner).
    pub fn peer_query(&self, reader: i32, owner: i32) -> Result<bool> {
        let mut can = 0i32;
        check(unsafe { sys::fj_peer_query(self.raw.as_ptr(), reader, owner, &mut can) })?;
        Ok(can != 0)
    }

    /// Lets kernels on `reader` (copies included) use `owner`'s memory.
    /// Idempotent; without a P2P path `FailedPrecondition`.
    pub fn peer_enable(&self, reader: i32, owner: i32) -> Result<()> {
        check(unsafe { sys::fj_peer_enable(self.raw.as_ptr(), reader, owner) })
    }

    /// Undoes [`Runtime::peer_enable`]. Idempotent.
    pub fn peer_disable(&self, reader: i32, owner: i32) -> Result<()> {
        check(unsafe { sys::fj_peer_disable(self.raw.as_ptr(), reader, owner) })
    }
}
