//! Device linking (`fj_module_link`, since 1.3): several inputs, CUDA
//! sources and prebuilt cubin, PTX, fatbin, LTO-IR or device libraries, linked
//! by nvJitLink into one [`Module`] that is used like a built one.
//!
//! ```no_run
//! use fleetjit::{LinkInput, LinkOptions, Runtime, RuntimeOptions};
//! let rt = Runtime::new(&RuntimeOptions::new())?;
//! let module = rt.link(
//!     &LinkOptions::new()
//!         .input(LinkInput::source("extern \"C\" __device__ float f(float);\n\
//!             extern \"C\" __global__ void k(float* y) { y[0] = f(y[0]); }"))
//!         .input(LinkInput::source("extern \"C\" __device__ float f(float x) { return 2 * x; }"))
//!         .target("sm_90"),
//! )?;
//! # Ok::<(), fleetjit::Error>(())
//! ```
use crate::{check, fj_strs, no_nul, ptr_or_null, sys, Module, Result, Runtime};
use std::ptr;

/// What one link input is (`fj_link_input_kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkInputKind {
    /// CUDA C++, compiled by NVRTC for the link (-dc, or -dlto with LTO).
    Source,
    Cubin,
    Ptx,
    Fatbin,
    LtoIr,
    /// An archive of device objects (`nvcc -lib`).
    Library,
    /// Any other value, passed as is (the library refuses it).
    Raw(u32),
}

impl LinkInputKind {
    fn raw(self) -> sys::fj_link_input_kind {
        match self {
            LinkInputKind::Source => sys::FJ_LINK_SOURCE,
            LinkInputKind::Cubin => sys::FJ_LINK_CUBIN,
            LinkInputKind::Ptx => sys::FJ_LINK_PTX,
            LinkInputKind::Fatbin => sys::FJ_LINK_FATBIN,
            LinkInputKind::LtoIr => sys::FJ_LINK_LTOIR,
            LinkInputKind::Library => sys::FJ_LINK_LIBRARY,
            LinkInputKind::Raw(v) => v,
        }
    }
}

/// One input of a link (`fj_link_input`).
#[derive(Debug, Clone)]
pub struct LinkInput {
    kind: LinkInputKind,
    name: String,
    data: Vec<u8>,
    nvrtc_options: Vec<String>,
    name_expressions: Vec<String>,
}

impl LinkInput {
    /// An input of `kind` holding `data` (a source's text or an object).
    pub fn new(kind: LinkInputKind, data: impl Into<Vec<u8>>) -> Self {
        LinkInput {
            kind,
            name: String::new(),
            data: data.into(),
            nvrtc_options: Vec::new(),
            name_expressions: Vec::new(),
        }
    }
    /// A CUDA source.
    pub fn source(text: impl Into<String>) -> Self {
        LinkInput::new(LinkInputKind::Source, text.into().into_bytes())
    }
    /// A name for messages and nvJitLink's log.
    pub fn name(mut self, n: impl Into<String>) -> Self {
        self.name = n.into();
        self
    }
    /// An extra NVRTC option (sources only).
    pub fn nvrtc_option(mut self, o: impl Into<String>) -> Self {
        self.nvrtc_options.push(o.into());
        self
    }
    /// A C++ kernel name to instantiate and look up (sources only).
    pub fn name_expression(mut self, e: impl Into<String>) -> Self {
        self.name_expressions.push(e.into());
        self
    }
}

/// What to link (`fj_link_options`).
#[derive(Debug, Clone, Default)]
pub struct LinkOptions {
    inputs: Vec<LinkInput>,
    name: String,
    target: String,
    device: i32,
    link_options: Vec<String>,
    include_dirs: Vec<String>,
    flags: u32,
}

impl LinkOptions {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn input(mut self, input: LinkInput) -> Self {
        self.inputs.push(input);
        self
    }
    pub fn name(mut self, n: impl Into<String>) -> Self {
        self.name = n.into();
        self
    }
    /// "sm_XX[a]"; empty = the runtime's override, else the live device.
    pub fn target(mut self, t: impl Into<String>) -> Self {
        self.target = t.into();
        self
    }
    pub fn device(mut self, d: i32) -> Self {
        self.device = d;
        self
    }
    /// An extra nvJitLink option ("-O3").
    pub fn link_option(mut self, o: impl Into<String>) -> Self {
        self.link_options.push(o.into());
        self
    }
    pub fn include_dir(mut self, d: impl Into<String>) -> Self {
        self.include_dirs.push(d.into());
        self
    }
    /// Link-time optimization: sources as LTO-IR, nvJitLink -lto.
    pub fn lto(self, on: bool) -> Self {
        self.set(sys::FJ_LINK_LTO, on)
    }
    /// Links libcudadevrt (dynamic parallelism).
    pub fn devrt(self, on: bool) -> Self {
        self.set(sys::FJ_LINK_DEVRT, on)
    }
    /// Neither read nor write any cache tier.
    pub fn no_cache(self, on: bool) -> Self {
        self.set(sys::FJ_LINK_NO_CACHE, on)
    }
    /// Raw `fj_link_flags` (unknown bits are refused by the library).
    pub fn flags(mut self, flags: u32) -> Self {
        self.flags = flags;
        self
    }
    fn set(mut self, bit: u32, on: bool) -> Self {
        if on {
            self.flags |= bit;
        } else {
            self.flags &= !bit;
        }
        self
    }
}

impl LinkOptions {
    /// Refuses an embedded NUL in any string, as `build` does (NVRTC,
    /// nvJitLink and the driver read C strings), naming the field. A
    /// source's bytes are the library's to check (it names the input).
    fn check(&self) -> Result<()> {
        no_nul("the link name", &self.name)?;
        no_nul("the target", &self.target)?;
        for (what, list) in [
            ("a link option", &self.link_options),
            ("an include folder", &self.include_dirs),
        ] {
            for item in list {
                no_nul(what, item)?;
            }
        }
        for (i, input) in self.inputs.iter().enumerate() {
            no_nul(&format!("the name of input {i}"), &input.name)?;
            for (what, list) in [
                ("an NVRTC option", &input.nvrtc_options),
                ("a name expression", &input.name_expressions),
            ] {
                for item in list {
                    no_nul(&format!("{what} of input {i}"), item)?;
                }
            }
        }
        Ok(())
    }
}

impl Runtime {
    /// Links `options`' inputs into one module with nvJitLink, or fetches it
    /// from the cache. A link error is a [`Code::BuildError`] whose
    /// `detail("link_log")` (and `build_log()`) is nvJitLink's log.
    pub fn link(&self, options: &LinkOptions) -> Result<Module<'_>> {
        options.check()?;
        let input_options: Vec<Vec<sys::fj_str>> = options
            .inputs
            .iter()
            .map(|i| fj_strs(&i.nvrtc_options))
            .collect();
        let input_names: Vec<Vec<sys::fj_str>> = options
            .inputs
            .iter()
            .map(|i| fj_strs(&i.name_expressions))
            .collect();
        let inputs: Vec<sys::fj_link_input> = options
            .inputs
            .iter()
            .enumerate()
            .map(|(n, i)| {
                let mut raw = zeroed_struct!(sys::fj_link_input);
                raw.kind = i.kind.raw();
                raw.name = sys::fj_str::from_str(&i.name);
                raw.data = ptr_or_null(&i.data).cast();
                raw.size = i.data.len();
                raw.nvrtc_options = ptr_or_null(&input_options[n]);
                raw.num_nvrtc_options = input_options[n].len();
                raw.name_expressions = ptr_or_null(&input_names[n]);
                raw.num_name_expressions = input_names[n].len();
                raw
            })
            .collect();
        let link_options = fj_strs(&options.link_options);
        let include_dirs = fj_strs(&options.include_dirs);
        let mut o = zeroed_struct!(sys::fj_link_options);
        o.inputs = ptr_or_null(&inputs);
        o.num_inputs = inputs.len();
        o.name = sys::fj_str::from_str(&options.name);
        o.target = sys::fj_str::from_str(&options.target);
        o.device = options.device;
        o.link_options = ptr_or_null(&link_options);
        o.num_link_options = link_options.len();
        o.include_dirs = ptr_or_null(&include_dirs);
        o.num_include_dirs = include_dirs.len();
        o.flags = options.flags;
        let mut m = ptr::null_mut();
        check(unsafe { sys::fj_module_link(self.as_raw(), &o, &mut m) })?;
        Module::from_created(m, "fj_module_link returned no module")
    }
}
