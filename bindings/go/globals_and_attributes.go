package fleetjit

// ABI 1.3's module entries (include/fleetjit/fleetjit.h: "Module globals",
// "Kernel attributes and occupancy", fj_launch_flags, stream priorities,
// the persisting L2): globals read and written on a stream, the NVRTC build
// log, kernel attributes and occupancy, complex arguments (C64, C128),
// priority streams and the L2 set-aside. Launch flags are LaunchConfig's
// Cooperative, Programmatic and L2Window* fields.

/*
#include <stdlib.h>
#include <fleetjit/fleetjit.h>
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"unsafe"
)

func launchFlags(cfg LaunchConfig) C.uint32_t {
	var f C.uint32_t
	if cfg.Cooperative {
		f |= C.FJ_LAUNCH_COOPERATIVE
	}
	if cfg.Programmatic {
		f |= C.FJ_LAUNCH_PROGRAMMATIC_DEPENDENT
	}
	return f
}

// C64 passes a cuFloatComplex (real and imaginary float32) by value.
func C64(v complex64) Arg {
	bits := uint64(math.Float32bits(real(v))) | uint64(math.Float32bits(imag(v)))<<32
	return Arg{kind: C.FJ_ARG_C64, bits: bits}
}

// C128 passes a cuDoubleComplex (real and imaginary float64) by value.
func C128(v complex128) Arg {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b[0:], math.Float64bits(real(v)))
	binary.LittleEndian.PutUint64(b[8:], math.Float64bits(imag(v)))
	return Arg{kind: C.FJ_ARG_C128, bytes: b}
}

// GlobalInfo mirrors fj_global_info.
type GlobalInfo struct {
	Address     uint64
	Bytes       uint64
	LoweredName string
}

// Global looks up the __device__ / __constant__ variable `name` (its
// symbol, or a name expression of the build such as "&ns::table") on
// `device`, loading the module there.
func (m *Module) Global(name string, device int) (GlobalInfo, error) {
	if err := m.readLock(); err != nil {
		return GlobalInfo{}, err
	}
	defer m.rt.mu.RUnlock()
	o, err := globalArgs(name, device)
	if err != nil {
		return GlobalInfo{}, err
	}
	var cm cmem
	defer cm.free()
	var g C.fj_global_info
	g.struct_size = C.size_t(unsafe.Sizeof(g))
	if err := statusErr(C.fj_module_get_global(m.h, cm.str(name), o, &g)); err != nil {
		return GlobalInfo{}, err
	}
	return GlobalInfo{Address: uint64(g.address), Bytes: uint64(g.bytes),
		LoweredName: fixedString(&g.lowered_name[0], len(g.lowered_name))}, nil
}

// globalArgs checks a global's name (no embedded NUL: the driver reads a C
// string, so "counter\x00junk" would find "counter") and converts the
// device ordinal.
func globalArgs(name string, device int) (C.int32_t, error) {
	if err := noNUL("the global name", name); err != nil {
		return 0, err
	}
	return ordinalOf(device)
}

// WriteGlobal copies `data` into the global `name` on `device`, `offset`
// bytes in. The copy completes before the call returns (the bytes are
// staged through C memory the call frees), whatever the stream; with a
// stream it is also ordered after the stream's earlier work.
func (m *Module) WriteGlobal(name string, device int, offset uint64, data []byte, s *Stream) error {
	return m.copyGlobal(name, device, offset, data, true, s)
}

// ReadGlobal fills `out` from the global `name` on `device`, `offset`
// bytes in; it waits for the stream, so `out` is ready on return.
func (m *Module) ReadGlobal(name string, device int, offset uint64, out []byte, s *Stream) error {
	return m.copyGlobal(name, device, offset, out, false, s)
}

func (m *Module) copyGlobal(name string, device int, offset uint64, buf []byte, write bool, s *Stream) error {
	if err := m.readLock(); err != nil {
		return err
	}
	defer m.rt.mu.RUnlock()
	o, err := globalArgs(name, device)
	if err != nil {
		return err
	}
	st, err := streamHandle(m.rt, s)
	if err != nil {
		return err
	}
	var cm cmem
	defer cm.free()
	n := C.uint64_t(len(buf))
	var host unsafe.Pointer
	if len(buf) > 0 {
		host = C.malloc(C.size_t(len(buf)))
		cm.ptrs = append(cm.ptrs, host)
		if write {
			copy(unsafe.Slice((*byte)(host), len(buf)), buf)
		}
	}
	if write {
		err = statusErr(C.fj_module_global_write(m.h, cm.str(name), o, C.uint64_t(offset), host, n, st))
	} else {
		err = statusErr(C.fj_module_global_read(m.h, cm.str(name), o, C.uint64_t(offset), host, n, st))
	}
	if err == nil && st != nil {
		// The staging memory is freed on return: wait for the stream.
		err = statusErr(C.fj_stream_synchronize(st))
	}
	if err == nil && !write && len(buf) > 0 {
		copy(buf, unsafe.Slice((*byte)(host), len(buf)))
	}
	runtime.KeepAlive(s)
	return err
}

// BuildLog is NVRTC's log of the build that made the module, warnings
// included ("" when NVRTC printed nothing); a cache hit returns it too.
func (m *Module) BuildLog() (string, error) {
	if err := m.readLock(); err != nil {
		return "", err
	}
	defer m.rt.mu.RUnlock()
	var p *C.char
	var n C.size_t
	if err := statusErr(C.fj_module_build_log(m.h, &p, &n)); err != nil {
		return "", err
	}
	return C.GoStringN(p, C.int(n)), nil
}

// KernelAttributes are fj_kernel_info's 1.3 fields.
type KernelAttributes struct {
	ConstBytes, LocalBytes, MaxDynamicSharedBytes int
	PTXVersion, BinaryVersion                     int
	CacheModeCA                                   bool
	PreferredCarveout                             int
}

// Attributes reads the kernel's attributes (cuFuncGetAttribute).
func (k *Kernel) Attributes() (KernelAttributes, error) {
	if err := k.readLock(); err != nil {
		return KernelAttributes{}, err
	}
	defer k.m.rt.mu.RUnlock()
	var i C.fj_kernel_info
	i.struct_size = C.size_t(unsafe.Sizeof(i))
	if err := statusErr(C.fj_kernel_info_get(k.h, &i)); err != nil {
		return KernelAttributes{}, err
	}
	return KernelAttributes{ConstBytes: int(i.const_bytes), LocalBytes: int(i.local_bytes),
		MaxDynamicSharedBytes: int(i.max_dynamic_shared_bytes), PTXVersion: int(i.ptx_version),
		BinaryVersion: int(i.binary_version), CacheModeCA: i.cache_mode_ca != 0,
		PreferredCarveout: int(i.preferred_carveout)}, nil
}

// SetAttribute sets a kernel attribute; a value out of range is an
// OutOfRange error naming the range.
func (k *Kernel) SetAttribute(attr KernelAttr, value int32) error {
	if err := k.readLock(); err != nil {
		return err
	}
	defer k.m.rt.mu.RUnlock()
	return statusErr(C.fj_kernel_set_attribute(k.h, C.fj_kernel_attr(attr), C.int32_t(value)))
}

// Occupancy is the number of blocks of `blockThreads` threads using
// `dynamicShared` bytes that one SM holds at once.
func (k *Kernel) Occupancy(blockThreads, dynamicShared uint32) (int, error) {
	if err := k.readLock(); err != nil {
		return 0, err
	}
	defer k.m.rt.mu.RUnlock()
	var n C.int32_t
	err := statusErr(C.fj_kernel_occupancy(k.h, C.uint32_t(blockThreads), C.uint32_t(dynamicShared), &n))
	return int(n), err
}

// SuggestBlock is the block size with the most occupancy, and the smallest
// grid that reaches it.
func (k *Kernel) SuggestBlock(dynamicShared uint32) (block, minGrid int, err error) {
	if err := k.readLock(); err != nil {
		return 0, 0, err
	}
	defer k.m.rt.mu.RUnlock()
	var b, g C.int32_t
	err = statusErr(C.fj_kernel_suggest_block(k.h, C.uint32_t(dynamicShared), &b, &g))
	return int(b), int(g), err
}

// StreamPriorityRange is (least, greatest) stream priority of `ordinal`.
func (r *Runtime) StreamPriorityRange(ordinal int) (least, greatest int, err error) {
	if err := r.readLock(); err != nil {
		return 0, 0, err
	}
	defer r.mu.RUnlock()
	o, err := ordinalOf(ordinal)
	if err != nil {
		return 0, 0, err
	}
	var l, g C.int32_t
	err = statusErr(C.fj_stream_priority_range(r.h, o, &l, &g))
	return int(l), int(g), err
}

// NewStreamWithPriority creates a non-blocking stream of `priority`.
func (r *Runtime) NewStreamWithPriority(ordinal, priority int) (*Stream, error) {
	if err := r.readLock(); err != nil {
		return nil, err
	}
	defer r.mu.RUnlock()
	o, err := ordinalOf(ordinal)
	if err != nil {
		return nil, err
	}
	if priority < math.MinInt32 || priority > math.MaxInt32 {
		return nil, &Error{Code: InvalidArgument, Message: fmt.Sprintf("stream priority %d is out of range", priority)}
	}
	var h *C.fj_stream
	if err := statusErr(C.fj_stream_create_with_priority(r.h, o, C.int32_t(priority), &h)); err != nil {
		return nil, err
	}
	return newStream(r, h), nil
}

// SetPersistingL2 sets aside `bytes` of L2 for persisting accesses on
// `ordinal` and returns what the driver set.
func (r *Runtime) SetPersistingL2(ordinal int, bytes uint64) (uint64, error) {
	if err := r.readLock(); err != nil {
		return 0, err
	}
	defer r.mu.RUnlock()
	o, err := ordinalOf(ordinal)
	if err != nil {
		return 0, err
	}
	var out C.uint64_t
	err = statusErr(C.fj_device_set_persisting_l2(r.h, o, C.uint64_t(bytes), &out))
	return uint64(out), err
}
