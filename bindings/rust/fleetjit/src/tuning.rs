//! `fj_tune` (since 1.3): the fastest of a kernel's candidate builds and
//! launch shapes on the live device, stored like a module (docs/tuning.md).
//! The grid comes from `grid` or `grid_extent`/`grid_divisor`; outputs are
//! compared byte for byte with the first candidate that runs.
use crate::{
    check, fj_strs, no_nul, ptr_or_null, sys, Arg, BuildOptions, CacheResult, Code, Error, Result,
    Runtime,
};
use std::ffi::CStr;
use std::ptr;

/// One launch shape of a space (`fj_tune_shape`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TuneShape {
    pub block: [u32; 3],
    pub shared_bytes: u32,
    pub cluster: [u32; 3],
}

impl TuneShape {
    /// A 1-D block of `x` threads.
    pub fn block(x: u32) -> Self {
        TuneShape {
            block: [x, 0, 0],
            ..Default::default()
        }
    }
}

/// What to tune (`fj_tune_options`, without callbacks).
#[derive(Debug, Clone, Default)]
pub struct TuneOptions<'a> {
    pub build: BuildOptions,
    pub kernel: String,
    pub macro_sets: Vec<String>,
    pub shapes: Vec<TuneShape>,
    pub grid: [u32; 3],
    pub grid_extent: [u64; 3],
    pub grid_divisor: [String; 3],
    pub args: Vec<Arg<'a>>,
    /// (device address, bytes) of each buffer the kernel writes.
    pub outputs: Vec<(u64, u64)>,
    pub warmup: u32,
    pub samples: u32,
    pub noise_threshold: f64,
    pub timeout_ms: u32,
    pub retune: bool,
    pub no_store: bool,
}

/// One candidate's row (`fj_tune_row`).
#[derive(Debug, Clone)]
pub struct TuneRow {
    pub macro_index: usize,
    pub shape_index: usize,
    pub macros: String,
    pub block: [u32; 3],
    pub shared_bytes: u32,
    pub cluster: [u32; 3],
    pub grid: [u32; 3],
    pub status: String,
    pub message: String,
    pub median_us: f64,
    pub min_us: f64,
    pub spread: f64,
    pub noisy: bool,
    pub samples: u32,
    pub batch: u32,
}

/// `fj_tune`'s result, copied out.
#[derive(Debug, Clone)]
pub struct TuneResult {
    pub winner: usize,
    pub source: CacheResult,
    pub noisy: bool,
    pub stored: bool,
    pub tune_ms: f64,
    pub lookup_ms: f64,
    pub key: String,
    pub rows: Vec<TuneRow>,
}

/// `fj_tune_status_name`: "ok", "wrong_output", ...; "unknown" out of range.
pub fn tune_status_name(status: u32) -> String {
    unsafe { CStr::from_ptr(sys::fj_tune_status_name(status)) }
        .to_string_lossy()
        .into_owned()
}

fn text(s: sys::fj_str) -> String {
    if s.size == 0 {
        return String::new();
    }
    let bytes = unsafe { std::slice::from_raw_parts(s.data as *const u8, s.size) };
    String::from_utf8_lossy(bytes).into_owned()
}

impl Runtime {
    /// Runs `fj_tune`: the stored result, or a tuning run on the device of
    /// `options.build`. Every argument kind of [`Kernel::launch`] is passed
    /// as a launch passes it (by-value bytes, `C64`, `C128` and tensor
    /// arguments included).
    ///
    /// # Safety
    /// A tuning run launches the kernel, arbitrary device code, with
    /// `options.args` once per candidate and sample, so the contract is
    /// [`Kernel::launch`]'s: every pointer argument must be valid for what
    /// the kernel does with it. The library also reads, restores and
    /// compares `options.outputs` between candidates: each `(address,
    /// bytes)` must be device memory of that many bytes, allocated for the
    /// whole call. (All launches are complete when the call returns.)
    ///
    /// [`Kernel::launch`]: crate::Kernel::launch
    pub unsafe fn tune(&self, options: &TuneOptions<'_>) -> Result<TuneResult> {
        // The base build converts as `Runtime::build` converts it: the same
        // embedded-NUL and UTF-8 checks and errors, include folders included.
        let build = options.build.to_raw()?;
        no_nul("the kernel name", &options.kernel)?;
        for set in &options.macro_sets {
            no_nul("a macro set", set)?;
        }
        for divisor in &options.grid_divisor {
            no_nul("a grid divisor", divisor)?;
        }
        let sets = fj_strs(&options.macro_sets);
        let shapes: Vec<sys::fj_tune_shape> = options
            .shapes
            .iter()
            .map(|s| sys::fj_tune_shape {
                struct_size: std::mem::size_of::<sys::fj_tune_shape>(),
                ext: ptr::null(),
                block: s.block,
                shared_bytes: s.shared_bytes,
                cluster: s.cluster,
            })
            .collect();
        // As a launch passes them (Arg::raw, the same helper): C128, bytes
        // and tensors point at memory `options` borrows for this call.
        let args: Vec<sys::fj_arg> = options
            .args
            .iter()
            .map(|a| a.raw())
            .collect::<Result<_>>()?;
        let addresses: Vec<u64> = options.outputs.iter().map(|o| o.0).collect();
        let bytes: Vec<u64> = options.outputs.iter().map(|o| o.1).collect();
        let mut o = zeroed_struct!(sys::fj_tune_options);
        o.build = &build.raw;
        o.kernel = sys::fj_str::from_str(&options.kernel);
        o.macro_sets = ptr_or_null(&sets);
        o.num_macro_sets = sets.len();
        o.shapes = ptr_or_null(&shapes);
        o.num_shapes = shapes.len();
        o.grid = options.grid;
        o.grid_extent = options.grid_extent;
        for d in 0..3 {
            o.grid_divisor[d] = sys::fj_str::from_str(&options.grid_divisor[d]);
        }
        o.args = ptr_or_null(&args);
        o.num_args = args.len();
        o.output_addresses = ptr_or_null(&addresses);
        o.output_bytes = ptr_or_null(&bytes);
        o.num_outputs = addresses.len();
        o.warmup = options.warmup;
        o.samples = options.samples;
        o.noise_threshold = options.noise_threshold;
        o.timeout_ms = options.timeout_ms;
        if options.retune {
            o.flags |= sys::FJ_TUNE_NO_CACHE_READ;
        }
        if options.no_store {
            o.flags |= sys::FJ_TUNE_NO_CACHE_WRITE;
        }
        let mut h = ptr::null_mut();
        check(unsafe { sys::fj_tune(self.raw.as_ptr(), &o, &mut h) })?;
        if h.is_null() {
            return Err(Error::new(Code::Internal, "fj_tune returned no result"));
        }
        let out = read_result(h);
        check(unsafe { sys::fj_tune_result_free(h) })?;
        out
    }
}

fn read_result(h: *mut sys::fj_tune_result) -> Result<TuneResult> {
    let mut s = zeroed_struct!(sys::fj_tune_summary);
    check(unsafe { sys::fj_tune_result_summary(h, &mut s) })?;
    let key = unsafe { CStr::from_ptr(s.key.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let mut rows = Vec::with_capacity(s.num_rows);
    for i in 0..s.num_rows {
        let mut r = zeroed_struct!(sys::fj_tune_row);
        check(unsafe { sys::fj_tune_result_row(h, i, &mut r) })?;
        rows.push(TuneRow {
            macro_index: r.macro_index,
            shape_index: r.shape_index,
            macros: text(r.macros),
            block: r.block,
            shared_bytes: r.shared_bytes,
            cluster: r.cluster,
            grid: r.grid,
            status: tune_status_name(r.status),
            message: text(r.message),
            median_us: r.median_us,
            min_us: r.min_us,
            spread: r.spread,
            noisy: r.noisy != 0,
            samples: r.samples,
            batch: r.batch,
        });
    }
    Ok(TuneResult {
        winner: s.winner,
        source: CacheResult::from_raw(s.source),
        noisy: s.noisy != 0,
        stored: s.stored != 0,
        tune_ms: s.tune_ms,
        lookup_ms: s.lookup_ms,
        key,
        rows,
    })
}
