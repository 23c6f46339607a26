package fleetjit

// The 1.1 calls that are not builds or copies: images built elsewhere
// (fj_module_load), the cache flush, CUDA's header folders, wrapped
// streams, device-to-device copies, fills and the tensor-argument check.

/*
#include <stdlib.h>
#include <fleetjit/fleetjit.h>
*/
import "C"

import (
	"context"
	"time"
	"unsafe"
)

// LoadOptions mirrors fj_module_load_options.
type LoadOptions struct {
	Image  []byte // copied by the load
	Kind   ImageKind
	Name   string // for messages; "" = "image"
	Target string // "sm_XX" / "compute_XX" overriding the image's own
}

// LoadModule makes a module of an image built elsewhere (`fleetjit build
// -o` output, another runtime's Module.Image, nvcc's cubin or fatbin). A
// cubin's parameters come from the driver, so loading one needs a GPU.
func (r *Runtime) LoadModule(opts *LoadOptions) (*Module, error) {
	var h *C.fj_module
	if err := withOptions(r, opts, "LoadOptions", func(m *cmem) error {
		o, err := opts.toC(m)
		if err != nil {
			return err
		}
		return statusErr(C.fj_module_load(r.h, &o, &h))
	}); err != nil {
		return nil, err
	}
	return newModule(r, h), nil
}

// toC fills an fj_module_load_options whose image and strings live in m,
// refusing a name or target with an embedded NUL.
func (opts *LoadOptions) toC(m *cmem) (C.fj_module_load_options, error) {
	var o C.fj_module_load_options
	if err := noNUL("the image name", opts.Name); err != nil {
		return o, err
	}
	if err := noNUL("the target", opts.Target); err != nil {
		return o, err
	}
	o.struct_size = C.size_t(unsafe.Sizeof(o))
	if len(opts.Image) > 0 {
		o.image = m.bytes(opts.Image)
	}
	o.image_size = C.size_t(len(opts.Image))
	o.kind = C.fj_image_kind(opts.Kind)
	o.name = m.str(opts.Name)
	o.target = m.str(opts.Target)
	return o, nil
}

// FlushCache waits until the cache work earlier builds left to the
// background is done (disk entries written, remote publications sent),
// bounded by ctx: past its deadline the DeadlineExceeded error of the
// library (publications still queued; they go on) or ctx.Err().
func (r *Runtime) FlushCache(ctx context.Context) error {
	if r == nil {
		return nilErr("Runtime")
	}
	for {
		err := r.flushOnce(sliceOf(ctx))
		if CodeOf(err) != DeadlineExceeded {
			return err
		}
		if ctx.Err() != nil {
			return err
		}
	}
}

func (r *Runtime) flushOnce(d time.Duration) error {
	if err := r.readLock(); err != nil {
		return err
	}
	defer r.mu.RUnlock()
	return statusErr(C.fj_cache_flush(r.h, C.uint32_t(d.Milliseconds())))
}

// IncludeDir is one of CUDA's header folders every build searches.
type IncludeDir struct {
	Path   string
	Origin string // why: "CUDA_HOME", "/usr/local/cuda", ...
}

// IncludeDirs lists CUDA's header folders, in search order.
func (r *Runtime) IncludeDirs() ([]IncludeDir, error) {
	if err := r.readLock(); err != nil {
		return nil, err
	}
	defer r.mu.RUnlock()
	var n C.size_t
	if err := statusErr(C.fj_runtime_include_dir(r.h, 0, &n, nil, nil)); err != nil {
		return nil, err
	}
	out := make([]IncludeDir, 0, int(n))
	for i := C.size_t(0); i < n; i++ {
		var p, o *C.char
		if err := statusErr(C.fj_runtime_include_dir(r.h, i, nil, &p, &o)); err != nil {
			return nil, err
		}
		out = append(out, IncludeDir{Path: C.GoString(p), Origin: C.GoString(o)})
	}
	return out, nil
}

// WrapStream wraps a CUstream the caller owns (another library's stream;
// 0 or 1 = the legacy default stream, 2 = per-thread) as a Stream of
// device: work on it is ordered with the caller's. The CUstream is
// borrowed: Close only forgets it; keep it alive while the wrapper is used.
// The driver dereferences it: a forged or freed pointer is undefined
// behaviour, not an error.
func (r *Runtime) WrapStream(device int, cuStream uint64) (*Stream, error) {
	if err := r.readLock(); err != nil {
		return nil, err
	}
	defer r.mu.RUnlock()
	ordinal, err := ordinalOf(device)
	if err != nil {
		return nil, err
	}
	var h *C.fj_stream
	if err := statusErr(C.fj_stream_wrap(r.h, ordinal, C.uint64_t(cuStream), &h)); err != nil {
		return nil, err
	}
	return newStream(r, h), nil
}

// CopyDeviceToDevice copies src into dst (the same size), complete on
// return.
func CopyDeviceToDevice(dst, src *DeviceMemory) error {
	if dst == nil || src == nil {
		return &Error{Code: InvalidArgument, Message: "nil DeviceMemory"}
	}
	if dst.rt == nil || src.rt == nil {
		return nilErr("DeviceMemory")
	}
	if dst.rt != src.rt {
		return &Error{Code: InvalidArgument, Message: "dst and src belong to different runtimes"}
	}
	dst.rt.mu.RLock()
	defer dst.rt.mu.RUnlock()
	if dst.addr == 0 || src.addr == 0 || dst.rt.h == nil {
		return closedErr("DeviceMemory")
	}
	if dst.bytes != src.bytes {
		return &Error{Code: InvalidArgument, Message: "dst and src differ in size"}
	}
	return statusErr(C.fj_memcpy_dtod(dst.rt.h, C.uint64_t(dst.addr), C.uint64_t(src.addr), C.uint64_t(dst.bytes), nil))
}

// Fill sets every byte of the allocation to value (e.g. to poison an
// output), complete on return.
func (d *DeviceMemory) Fill(value byte) error {
	if err := d.readLock(); err != nil {
		return err
	}
	defer d.rt.mu.RUnlock()
	return statusErr(C.fj_memset_d8(d.rt.h, C.uint64_t(d.addr), C.uint8_t(value), C.uint64_t(d.bytes), nil))
}
