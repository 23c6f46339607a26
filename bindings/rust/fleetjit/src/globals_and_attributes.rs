//! ABI 1.3's module entries (`fleetjit.h`: "Module globals", "Kernel
//! attributes and occupancy", `fj_launch_flags`, stream priorities, the
//! persisting L2): globals read and written on a stream, the NVRTC build
//! log, kernel attributes and occupancy, cooperative / dependent /
//! L2-window launches, priority streams and the L2 set-aside. Complex
//! arguments are [`Arg::C64`](crate::Arg::C64) and
//! [`Arg::C128`](crate::Arg::C128).
use std::ffi::{c_char, c_void};
use std::ptr;

use crate::{
    check, fixed_string, no_nul, ptr_or_null, sys, with_raw_args, Arg, Kernel, LaunchConfig,
    Module, Result, Runtime, Stream,
};

/// A module's `__device__` / `__constant__` variable on one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalInfo {
    pub address: u64,
    pub bytes: u64,
    pub lowered_name: String,
}

/// `fj_kernel_info`'s 1.3 fields (cuFuncGetAttribute).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelAttributes {
    pub const_bytes: i32,
    pub local_bytes: i32,
    pub max_dynamic_shared_bytes: i32,
    pub ptx_version: i32,
    pub binary_version: i32,
    pub cache_mode_ca: bool,
    pub preferred_carveout: i32,
}

/// What [`Kernel::set_attribute`] sets (`fj_kernel_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelAttr {
    /// `[0, opt-in limit - static shared bytes]`.
    MaxDynamicSharedBytes,
    /// Percent of the most shared memory, `0..=100`, or -1 (the default).
    PreferredCarveout,
}

/// The 1.3 launch flags and L2 window of [`Kernel::launch_ex`].
#[derive(Debug, Clone, Copy, Default)]
pub struct LaunchAttrs {
    /// `FJ_LAUNCH_COOPERATIVE`: every block co-resident (`grid.sync()`).
    pub cooperative: bool,
    /// `FJ_LAUNCH_PROGRAMMATIC_DEPENDENT` (sm_90+).
    pub programmatic: bool,
    /// `(base, bytes, hit_ratio)`: a persisting L2 access-policy window.
    pub l2_window: Option<(u64, u64, f32)>,
}

fn stream_ptr(s: Option<&Stream<'_>>) -> *mut sys::fj_stream {
    s.map_or(ptr::null_mut(), |s| s.as_raw())
}

/// Waits for the stream a global was copied on, so that the host buffer the
/// copy reads or writes (borrowed only for the call) is done with before
/// the call returns; without a stream the copy was synchronous.
fn wait_for(stream: Option<&Stream<'_>>) -> Result<()> {
    stream.map_or(Ok(()), Stream::synchronize)
}

impl Module<'_> {
    /// NVRTC's log of the build that made the module, warnings included; a
    /// cache hit returns the log of the compile that made the entry.
    pub fn build_log(&self) -> Result<String> {
        let mut p: *const c_char = ptr::null();
        let mut n = 0usize;
        check(unsafe { sys::fj_module_build_log(self.as_raw(), &mut p, &mut n) })?;
        let bytes = unsafe { std::slice::from_raw_parts(p as *const u8, n) };
        Ok(String::from_utf8_lossy(bytes).into_owned())
    }

    /// The global `name` (its symbol, or a name expression of the build
    /// such as `"&ns::table"`) on `device`. A name with an embedded NUL is
    /// refused (the driver reads a C string: `"counter\0junk"` would find
    /// `counter`), as by [`Module::write_global`] and [`Module::read_global`].
    pub fn global(&self, name: &str, device: i32) -> Result<GlobalInfo> {
        no_nul("the global name", name)?;
        let mut g = zeroed_struct!(sys::fj_global_info);
        check(unsafe {
            sys::fj_module_get_global(self.as_raw(), sys::fj_str::from_str(name), device, &mut g)
        })?;
        Ok(GlobalInfo {
            address: g.address,
            bytes: g.bytes,
            lowered_name: fixed_string(&g.lowered_name),
        })
    }

    /// Writes `data` into the global, `offset` bytes in, complete on
    /// return. With a stream the copy is ordered after the stream's earlier
    /// work and the call then waits for the stream (as the Go binding
    /// does): the copy reads `data`, which is borrowed only for the call,
    /// so it must be done before the call returns. Without one it is
    /// synchronous.
    pub fn write_global(
        &self,
        name: &str,
        device: i32,
        offset: u64,
        data: &[u8],
        stream: Option<&Stream<'_>>,
    ) -> Result<()> {
        no_nul("the global name", name)?;
        check(unsafe {
            sys::fj_module_global_write(
                self.as_raw(),
                sys::fj_str::from_str(name),
                device,
                offset,
                data.as_ptr() as *const c_void,
                data.len() as u64,
                stream_ptr(stream),
            )
        })?;
        wait_for(stream)
    }

    /// Reads the global into `out`, `offset` bytes in; `out` is filled on
    /// return (with a stream, the call waits for it: see
    /// [`Module::write_global`]).
    pub fn read_global(
        &self,
        name: &str,
        device: i32,
        offset: u64,
        out: &mut [u8],
        stream: Option<&Stream<'_>>,
    ) -> Result<()> {
        no_nul("the global name", name)?;
        check(unsafe {
            sys::fj_module_global_read(
                self.as_raw(),
                sys::fj_str::from_str(name),
                device,
                offset,
                out.as_mut_ptr() as *mut c_void,
                out.len() as u64,
                stream_ptr(stream),
            )
        })?;
        wait_for(stream)
    }
}

impl Kernel<'_> {
    pub fn attributes(&self) -> Result<KernelAttributes> {
        let mut i = zeroed_struct!(sys::fj_kernel_info);
        check(unsafe { sys::fj_kernel_info_get(self.as_raw(), &mut i) })?;
        Ok(KernelAttributes {
            const_bytes: i.const_bytes,
            local_bytes: i.local_bytes,
            max_dynamic_shared_bytes: i.max_dynamic_shared_bytes,
            ptx_version: i.ptx_version,
            binary_version: i.binary_version,
            cache_mode_ca: i.cache_mode_ca != 0,
            preferred_carveout: i.preferred_carveout,
        })
    }

    /// Sets a kernel attribute; a value out of range is `OUT_OF_RANGE`.
    pub fn set_attribute(&self, attr: KernelAttr, value: i32) -> Result<()> {
        let a = match attr {
            KernelAttr::MaxDynamicSharedBytes => sys::FJ_KERNEL_ATTR_MAX_DYNAMIC_SHARED_BYTES,
            KernelAttr::PreferredCarveout => sys::FJ_KERNEL_ATTR_PREFERRED_CARVEOUT,
        };
        check(unsafe { sys::fj_kernel_set_attribute(self.as_raw(), a, value) })
    }

    /// Blocks of `block_threads` threads with `dynamic_shared` bytes per SM.
    pub fn occupancy(&self, block_threads: u32, dynamic_shared: u32) -> Result<i32> {
        let mut n = 0i32;
        check(unsafe {
            sys::fj_kernel_occupancy(self.as_raw(), block_threads, dynamic_shared, &mut n)
        })?;
        Ok(n)
    }

    /// `(block threads, minimum grid)` for the most occupancy.
    pub fn suggest_block(&self, dynamic_shared: u32) -> Result<(i32, i32)> {
        let (mut b, mut g) = (0i32, 0i32);
        check(unsafe {
            sys::fj_kernel_suggest_block(self.as_raw(), dynamic_shared, &mut b, &mut g)
        })?;
        Ok((b, g))
    }

    /// [`Kernel::launch`] with the 1.3 launch flags and L2 window.
    ///
    /// # Safety
    /// As for [`Kernel::launch`].
    pub unsafe fn launch_ex(
        &self,
        config: &LaunchConfig<'_>,
        attrs: &LaunchAttrs,
        args: &[Arg<'_>],
    ) -> Result<()> {
        let mut c = config.to_raw();
        if attrs.cooperative {
            c.flags |= sys::FJ_LAUNCH_COOPERATIVE;
        }
        if attrs.programmatic {
            c.flags |= sys::FJ_LAUNCH_PROGRAMMATIC_DEPENDENT;
        }
        if let Some((base, bytes, ratio)) = attrs.l2_window {
            (c.l2_window_base, c.l2_window_bytes, c.l2_hit_ratio) = (base, bytes, ratio);
        }
        with_raw_args(args, |raw| {
            check(unsafe { sys::fj_launch(self.as_raw(), &c, ptr_or_null(raw), raw.len()) })
        })
    }
}

impl Runtime {
    /// `(least, greatest)` stream priority of device `ordinal`.
    pub fn stream_priority_range(&self, ordinal: i32) -> Result<(i32, i32)> {
        let (mut l, mut g) = (0i32, 0i32);
        check(unsafe { sys::fj_stream_priority_range(self.as_raw(), ordinal, &mut l, &mut g) })?;
        Ok((l, g))
    }

    /// A non-blocking stream of `priority` (inside the range).
    pub fn create_stream_with_priority(&self, ordinal: i32, priority: i32) -> Result<Stream<'_>> {
        let mut s = ptr::null_mut();
        check(unsafe {
            sys::fj_stream_create_with_priority(self.as_raw(), ordinal, priority, &mut s)
        })?;
        Stream::from_created(s, "a NULL stream without an error")
    }

    /// Sets aside `bytes` of L2 for persisting accesses; returns what is set.
    pub fn set_persisting_l2(&self, ordinal: i32, bytes: u64) -> Result<u64> {
        let mut out = 0u64;
        check(unsafe {
            sys::fj_device_set_persisting_l2(self.as_raw(), ordinal, bytes, &mut out)
        })?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complex_arguments_pack_as_cucomplex() {
        let a = Arg::C64([1.5, -2.25]).raw().unwrap();
        assert_eq!(a.kind, sys::FJ_ARG_C64);
        let bits = unsafe { a.v.u64_ };
        assert_eq!(f32::from_bits(bits as u32), 1.5);
        assert_eq!(f32::from_bits((bits >> 32) as u32), -2.25);
        let z = [3.0f64, -4.5];
        let b = Arg::C128(&z).raw().unwrap();
        assert_eq!(b.kind, sys::FJ_ARG_C128);
        assert_eq!(unsafe { b.v.bytes } as *const f64, z.as_ptr());
    }
}
