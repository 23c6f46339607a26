//! What an adversarial review of the safe crate found, each fixed and held
//! here: a tensor argument is a [`TensorArg`] that borrows its tensor (the
//! only thing the safe `tensor_check` and `Arg::Tensor` take), strides of
//! another length than the shape are refused where a `Tensor` is made,
//! `tune` (now `unsafe`, like `launch`) passes C128 and tensor arguments as
//! a launch does, the stream form of the global copies waits for the
//! stream before returning (the host buffer is borrowed only for the call),
//! and a device-to-device copy of the wrong length says what it expected.
//! The fake-driver tests print SKIP and why without it or without NVRTC.
mod common;

use common::{build_or_skip, fake_calls, with_fake_runtime};
use fleetjit::{
    sys, tensor_check, Arg, BuildOptions, Code, Oob, Output, Tensor, TensorArg, TuneOptions,
    TuneShape,
};

/// The argument of a tensor the caller gave: the returned [`TensorArg`]'s
/// lifetime is the tensor's borrow. (Returning the argument of a tensor
/// made in here, the review's dangling case, no longer compiles: "returns
/// a value referencing data owned by the current function".)
fn arg_of<'t>(t: &'t Tensor<'_>, box_: [u32; 5]) -> TensorArg<'t> {
    t.arg(box_, Oob::Zeros, sys::FJ_SWIZZLE_NONE)
}

#[test]
fn tensor_arg_borrows_its_tensor_and_is_what_tensor_check_takes() {
    let shape = [4i64, 4];
    let t = Tensor::cuda(0x7000_0000, 0, Tensor::F32, &shape, None).unwrap();
    let a = arg_of(&t, [2, 2, 0, 0, 0]);
    // #[repr(transparent)]: the C struct itself, pointing at t's fj_tensor.
    assert_eq!(
        std::mem::size_of::<TensorArg<'_>>(),
        std::mem::size_of::<sys::fj_tensor_arg>()
    );
    assert!(std::ptr::eq(a.as_raw().tensor, t.as_raw()));
    assert_eq!(a.as_raw().box_, [2, 2, 0, 0, 0]);
    assert_eq!(a.as_raw().oob, sys::FJ_OOB_ZEROS);
    let ok = tensor_check(&a).unwrap();
    assert_eq!(ok.tma, ok.reason.is_empty(), "{ok:?}");
    // The plain-data fields change safely; the library still checks them.
    let bad = a.with_box([2, 2, 2, 0, 0]).with_oob(Oob::PromiseInBounds);
    assert_eq!(bad.as_raw().oob, sys::FJ_OOB_PROMISE_IN_BOUNDS);
    let err = tensor_check(&bad).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    assert_eq!(
        a.with_swizzle(sys::FJ_SWIZZLE_128B).as_raw().swizzle,
        sys::FJ_SWIZZLE_128B
    );
    // Arg::Tensor holds the TensorArg itself (the launch passes its address).
    match Arg::from(&a) {
        Arg::Tensor(p) => assert!(std::ptr::eq(p, &a)),
        other => panic!("Arg::from(&TensorArg) is {other:?}"),
    }
    // A raw argument needs the unsafe constructor, whose contract is the
    // pointers' validity: here a NULL tensor, which the library refuses.
    let mut raw = *a.as_raw();
    raw.tensor = std::ptr::null();
    let null = unsafe { TensorArg::from_raw(raw) };
    let err = tensor_check(&null).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
}

#[test]
fn strides_of_another_length_than_the_shape_are_refused() {
    let shape = [2i64, 2];
    let backing = [1i64, -7];
    let err = Tensor::cuda(0x7000_0000, 0, Tensor::F32, &shape, Some(&backing[..1])).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert_eq!(err.message(), "tensor has 2 shape entries but 1 strides");
    let three = [8i64, 2, 1];
    let host = sys::fj_dl_device {
        device_type: 3,
        device_id: 0,
    };
    let err =
        Tensor::with_device(0x7000_0000, host, Tensor::F32, &shape, Some(&three)).unwrap_err();
    assert_eq!(err.message(), "tensor has 2 shape entries but 3 strides");
    let err = Tensor::cuda(0x7000_0000, 0, Tensor::F32, &[], Some(&three[..1])).unwrap_err();
    assert_eq!(err.message(), "tensor has 0 shape entries but 1 strides");
    // As many strides as shape entries, or none (compact), are fine.
    let t = Tensor::cuda(0x7000_0000, 0, Tensor::F32, &shape, Some(&backing)).unwrap();
    assert_eq!(t.as_raw().ndim, 2);
    assert!(std::ptr::eq(t.as_raw().strides, backing.as_ptr()));
    let t = Tensor::with_device(0x7000_0000, host, Tensor::F32, &shape, None).unwrap();
    assert!(t.as_raw().strides.is_null());
}

#[test]
fn copy_from_device_of_the_wrong_length_says_what_it_expected() {
    let test = "copy_from_device_of_the_wrong_length_says_what_it_expected";
    with_fake_runtime(test, |rt| {
        let src = rt.upload(0, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
        let mut dst = rt.alloc::<f32>(0, 3).unwrap();
        let err = dst.copy_from_device(&src).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert!(
            err.message()
                .starts_with("the source buffer has 4 elements, expected 3"),
            "{}",
            err.message()
        );
        let err = dst.copy_from_host(&[1.0]).unwrap_err();
        assert!(
            err.message()
                .starts_with("the host slice has 1 elements, expected 3"),
            "{}",
            err.message()
        );
        let mut same = rt.alloc::<f32>(0, 4).unwrap();
        same.copy_from_device(&src).unwrap();
        assert_eq!(same.to_vec().unwrap(), [1.0, 2.0, 3.0, 4.0]);
    });
}

#[test]
fn global_copies_on_a_stream_wait_for_it_before_returning() {
    let test = "global_copies_on_a_stream_wait_for_it_before_returning";
    with_fake_runtime(test, |rt| {
        // PTX: the fake driver reads a PTX image's globals.
        let src = r#"__device__ unsigned int table[4];
extern "C" __global__ void touch() { table[0] += 1; }"#;
        let Some(m) = build_or_skip(test, rt, &BuildOptions::new(src).output(Output::Ptx)) else {
            return;
        };
        let stream = rt.create_stream(0).unwrap();
        let syncs = || fake_calls("cuStreamSynchronize").expect("fjfake_calls of the fake driver");
        let before = syncs();
        {
            // A temporary the call borrows: it must be read before the call
            // returns, so the call waits for the stream.
            let data: Vec<u8> = (1..=16).collect();
            m.write_global("table", 0, 0, &data, Some(&stream)).unwrap();
        }
        let after_write = syncs();
        assert!(
            after_write > before,
            "write_global on a stream returned without waiting for it"
        );
        let mut out = vec![0u8; 8];
        m.read_global("table", 0, 4, &mut out, Some(&stream))
            .unwrap();
        assert!(
            syncs() > after_write,
            "read_global on a stream returned without waiting for it"
        );
        assert_eq!(out, (5..=12).collect::<Vec<u8>>());
        // Without a stream the copy is synchronous and nothing is waited for.
        let quiet = syncs();
        m.read_global("table", 0, 0, &mut out, None).unwrap();
        assert_eq!(syncs(), quiet);
        assert_eq!(out, (1..=8).collect::<Vec<u8>>());
    });
}

#[test]
fn tune_passes_c128_and_tensor_arguments_as_a_launch_does() {
    let test = "tune_passes_c128_and_tensor_arguments_as_a_launch_does";
    with_fake_runtime(test, |rt| {
        let src = r#"#include <fleetjit/copy.cuh>
extern "C" __global__ void cz(double2 z, double* y) { y[0] = z.x + z.y; }
extern "C" __global__ void tz(const __grid_constant__ fj::tensor_param t, float* y) {}"#;
        // Looked up by the tune itself; built here first to skip without NVRTC.
        let Some(_m) = build_or_skip(test, rt, &BuildOptions::new(src)) else {
            return;
        };
        let y = rt.upload(0, &[0.0f64; 4]).unwrap();
        let z = [1.0f64, 2.0];
        let shape = [4i64];
        let t = Tensor::cuda(y.address(), 0, Tensor::F32, &shape, None).unwrap();
        let ta = t.arg([0; 5], Oob::Zeros, sys::FJ_SWIZZLE_NONE);
        for (kernel, args) in [
            ("cz", vec![Arg::C128(&z), Arg::from(&y)]),
            ("tz", vec![Arg::from(&ta), Arg::from(&y)]),
        ] {
            let o = TuneOptions {
                build: BuildOptions::new(src),
                kernel: kernel.into(),
                shapes: vec![TuneShape::block(1), TuneShape::block(32)],
                grid: [1, 1, 1],
                args,
                outputs: vec![(y.address(), 32)],
                retune: true,
                no_store: true,
                ..Default::default()
            };
            // SAFETY: y is a live 32-byte allocation; the fake driver's launches
            // write nothing.
            let r = unsafe { rt.tune(&o) }.unwrap_or_else(|e| panic!("tune {kernel}: {e}"));
            for row in &r.rows {
                assert_eq!(row.status, "ok", "tune {kernel}: {row:?}");
            }
        }
    });
}
