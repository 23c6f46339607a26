package fleetjit

// Tensor copies, L2 prefetch and peer access (since 1.1): fj_copy and
// fj_prefetch over slices of descriptors, fj_peer_query/enable/disable,
// and fj_tensor_arg_check.

/*
#include <stdlib.h>
#include <string.h>
#include <fleetjit/fleetjit.h>

static void fjgo_set_data(fj_tensor* t, uint64_t address) { t->data = (void*)(uintptr_t)address; }
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// DType mirrors fj_dl_dtype (DLPack's DLDataType).
type DType struct {
	Code  uint8 // kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4
	Bits  uint8
	Lanes uint16
}

// Common dtypes.
var (
	Float32 = DType{Code: 2, Bits: 32, Lanes: 1}
	Float16 = DType{Code: 2, Bits: 16, Lanes: 1}
	Int32   = DType{Code: 0, Bits: 32, Lanes: 1}
	Int64   = DType{Code: 0, Bits: 64, Lanes: 1}
)

// DLPack device types of a Tensor.
const (
	DeviceCPU      int32 = 1 // pinned host memory the driver knows
	DeviceCUDA     int32 = 2
	DeviceCUDAHost int32 = 3 // pinned host memory
)

// Tensor mirrors fj_tensor (DLPack's DLTensor): shape and strides are
// outermost-first, in elements; nil Strides = compact row-major.
type Tensor struct {
	Data       uint64 // the address
	DeviceType int32  // DeviceCUDA, DeviceCUDAHost, DeviceCPU
	DeviceID   int32
	DType      DType
	Shape      []int64
	Strides    []int64
	ByteOffset uint64

	// badDevice is CUDATensor's device when int32 cannot hold it (DeviceID
	// then holds its wrapped value), else 0: toC refuses the tensor while
	// DeviceID still holds that wrapped value.
	badDevice int
}

// CUDATensor describes device memory of GPU `device`. A device outside
// int32 makes every call given the tensor (Copy, Prefetch, Launch,
// TensorCheck) an InvalidArgument error, unless DeviceID is set again.
func CUDATensor(address uint64, device int, dtype DType, shape ...int64) *Tensor {
	t := &Tensor{Data: address, DeviceType: DeviceCUDA, DeviceID: int32(device), DType: dtype, Shape: shape}
	if _, err := ordinalOf(device); err != nil {
		t.badDevice = device
	}
	return t
}

// toC builds the fj_tensor and its arrays in C memory owned by m (the C ABI
// may not keep Go pointers).
func (t *Tensor) toC(m *cmem) (*C.fj_tensor, error) {
	if t == nil {
		return nil, nil
	}
	if t.badDevice != 0 && t.DeviceID == int32(t.badDevice) {
		_, err := ordinalOf(t.badDevice)
		return nil, err
	}
	if len(t.Strides) != 0 && len(t.Strides) != len(t.Shape) {
		return nil, &Error{Code: InvalidArgument, Message: fmt.Sprintf(
			"tensor has %d shape entries but %d strides", len(t.Shape), len(t.Strides))}
	}
	p := (*C.fj_tensor)(m.alloc(unsafe.Sizeof(C.fj_tensor{})))
	C.fjgo_set_data(p, C.uint64_t(t.Data)) // an address, never a Go pointer
	p.device.device_type = C.int32_t(t.DeviceType)
	p.device.device_id = C.int32_t(t.DeviceID)
	p.ndim = C.int32_t(len(t.Shape))
	p.dtype.code = C.uint8_t(t.DType.Code)
	p.dtype.bits = C.uint8_t(t.DType.Bits)
	p.dtype.lanes = C.uint16_t(t.DType.Lanes)
	p.shape = m.int64s(t.Shape)
	p.strides = m.int64s(t.Strides)
	p.byte_offset = C.uint64_t(t.ByteOffset)
	return p, nil
}

func (m *cmem) alloc(n uintptr) unsafe.Pointer {
	p := C.calloc(1, C.size_t(n))
	m.ptrs = append(m.ptrs, p)
	return p
}

func (m *cmem) int64s(v []int64) *C.int64_t {
	if len(v) == 0 {
		return nil
	}
	p := m.alloc(uintptr(len(v)) * 8)
	copy(unsafe.Slice((*int64)(p), len(v)), v)
	return (*C.int64_t)(p)
}

// TensorArg mirrors fj_tensor_arg: a tensor and how kernels tile it. Box
// is outermost-first like Shape (0 = the whole extent).
type TensorArg struct {
	Tensor  *Tensor
	Box     [5]uint32
	OOB     OOB
	Swizzle Swizzle
}

// toC builds the fj_tensor_arg (and its tensor) in C memory owned by m.
func (arg *TensorArg) toC(m *cmem) (*C.fj_tensor_arg, error) {
	if arg == nil || arg.Tensor == nil {
		return nil, &Error{Code: InvalidArgument, Message: "nil TensorArg or Tensor"}
	}
	t, err := arg.Tensor.toC(m)
	if err != nil {
		return nil, err
	}
	a := (*C.fj_tensor_arg)(m.alloc(unsafe.Sizeof(C.fj_tensor_arg{})))
	a.struct_size = C.size_t(unsafe.Sizeof(*a))
	a.tensor = t
	for i := range arg.Box {
		a.box[i] = C.uint32_t(arg.Box[i])
	}
	a.oob = C.fj_oob(arg.OOB)
	a.swizzle = C.fj_swizzle(arg.Swizzle)
	return a, nil
}

// TensorCheckResult mirrors fj_tensor_check.
type TensorCheckResult struct {
	TMA    bool   // a TMA tensor map describes it (else cp.async)
	Reason string // why not ("" when TMA)
}

// TensorCheck checks a tensor argument as a launch would; one a launch
// would refuse is that error. Needs no runtime or GPU.
func TensorCheck(arg *TensorArg) (TensorCheckResult, error) {
	if arg == nil || arg.Tensor == nil {
		return TensorCheckResult{}, &Error{Code: InvalidArgument, Message: "nil TensorArg or Tensor"}
	}
	var m cmem
	defer m.free()
	a, err := arg.toC(&m)
	if err != nil {
		return TensorCheckResult{}, err
	}
	var out C.fj_tensor_check
	out.struct_size = C.size_t(unsafe.Sizeof(out))
	if err := statusErr(C.fj_tensor_arg_check(a, &out)); err != nil {
		return TensorCheckResult{}, err
	}
	return TensorCheckResult{TMA: out.tma != 0, Reason: fixedString(&out.reason[0], len(out.reason))}, nil
}

// CopyDesc mirrors fj_copy_desc: Dst[i] = Src[SrcStart + i] inside Src,
// the OOB fill elsewhere; with GatherIndex (1-D int32/int64, Dst.Shape[0]
// entries) the outermost source row is GatherIndex[i0] + SrcStart[0].
type CopyDesc struct {
	Src, Dst    *Tensor
	SrcStart    [5]int64 // outermost-first; past Src's rank: 0
	OOB         OOB
	GatherIndex *Tensor
}

// Copy runs each copy in order on stream (nil: the legacy default stream
// of Dst's GPU). It stops at the first error, which names the descriptor
// ("copy 2 of 3: ..."); the copies before it are enqueued. Host memory a
// tensor points at must stay alive until the stream has passed the copy.
func (r *Runtime) Copy(descs []CopyDesc, stream *Stream) error {
	return r.eachDesc("copy", len(descs), stream, func(m *cmem, i int, s *C.fj_stream) error {
		return r.copyOne(m, &descs[i], s)
	})
}

// eachDesc is Copy and Prefetch: under the runtime's read lock, one(i) for
// each of n descriptors in order on stream's handle, each with its own C
// memory (freed after it), stopping at the first error, which it names
// ("copy 2 of 3: ...").
func (r *Runtime) eachDesc(what string, n int, stream *Stream, one func(m *cmem, i int, s *C.fj_stream) error) error {
	if err := r.readLock(); err != nil {
		return err
	}
	defer r.mu.RUnlock()
	s, err := streamHandle(r, stream)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		err := func() error {
			var m cmem
			defer m.free()
			return one(&m, i, s)
		}()
		if err != nil {
			return prefixErr(err, fmt.Sprintf("%s %d of %d", what, i+1, n))
		}
	}
	return nil
}

func (r *Runtime) copyOne(m *cmem, d *CopyDesc, s *C.fj_stream) error {
	c := (*C.fj_copy_desc)(m.alloc(unsafe.Sizeof(C.fj_copy_desc{})))
	c.struct_size = C.size_t(unsafe.Sizeof(*c))
	var err error
	if c.src, err = d.Src.toC(m); err != nil {
		return err
	}
	if c.dst, err = d.Dst.toC(m); err != nil {
		return err
	}
	if c.gather_index, err = d.GatherIndex.toC(m); err != nil {
		return err
	}
	for i := range d.SrcStart {
		c.src_start[i] = C.int64_t(d.SrcStart[i])
	}
	c.oob = C.fj_oob(d.OOB)
	return statusErr(C.fj_copy(r.h, c, s))
}

// PrefetchDesc mirrors fj_prefetch_desc: a byte range, or (Tensor set) a
// tile of a tensor.
type PrefetchDesc struct {
	Address, Bytes uint64
	Tensor         *Tensor
	TileStart      [5]int64
	TileExtent     [5]int64 // 0 = to the end
	Mode           PrefetchMode
	ReaderDevice   int // -1 = the stream's GPU; note the zero value is GPU 0
	StageAddress   uint64
	StageBytes     uint64
}

// Prefetch runs each prefetch in order on stream (nil: the reader's legacy
// default stream); a hint for the L2 modes. Stops at the first error,
// naming the descriptor.
func (r *Runtime) Prefetch(descs []PrefetchDesc, stream *Stream) error {
	return r.eachDesc("prefetch", len(descs), stream, func(m *cmem, i int, s *C.fj_stream) error {
		return r.prefetchOne(m, &descs[i], s)
	})
}

func (r *Runtime) prefetchOne(m *cmem, d *PrefetchDesc, s *C.fj_stream) error {
	p := (*C.fj_prefetch_desc)(m.alloc(unsafe.Sizeof(C.fj_prefetch_desc{})))
	p.struct_size = C.size_t(unsafe.Sizeof(*p))
	p.address = C.uint64_t(d.Address)
	p.bytes = C.uint64_t(d.Bytes)
	var err error
	if p.tensor, err = d.Tensor.toC(m); err != nil {
		return err
	}
	for i := 0; i < 5; i++ {
		p.tile_start[i] = C.int64_t(d.TileStart[i])
		p.tile_extent[i] = C.int64_t(d.TileExtent[i])
	}
	p.mode = C.fj_prefetch_mode(d.Mode)
	if d.ReaderDevice < -1<<31 || d.ReaderDevice > 1<<31-1 {
		return &Error{Code: InvalidArgument, Message: fmt.Sprintf("ReaderDevice %d is not an ordinal", d.ReaderDevice)}
	}
	p.reader_device = C.int32_t(d.ReaderDevice)
	p.stage_address = C.uint64_t(d.StageAddress)
	p.stage_bytes = C.uint64_t(d.StageBytes)
	return statusErr(C.fj_prefetch(r.h, p, s))
}

// streamHandle is the fj_stream of an optional Stream for a call of rt,
// made under rt's read lock: nil for none; a zero-value Stream, one of
// another runtime and a closed one are InvalidArgument errors. The stream
// is checked to be rt's before its handle is read: Stream.Close writes
// s.h under s.rt's lock, which is not the one held when s.rt != rt (the
// library refuses such a stream with the same message).
func streamHandle(rt *Runtime, s *Stream) (*C.fj_stream, error) {
	if s == nil {
		return nil, nil
	}
	if s.rt == nil {
		return nil, nilErr("Stream")
	}
	if s.rt != rt {
		return nil, &Error{Code: InvalidArgument, Message: "stream belongs to another runtime"}
	}
	if s.h == nil {
		return nil, closedErr("Stream")
	}
	return s.h, nil
}

func prefixErr(err error, what string) error {
	if e, ok := err.(*Error); ok {
		c := *e
		c.Message = what + ": " + e.Message
		return &c
	}
	return fmt.Errorf("%s: %w", what, err)
}

// PeerQuery reports whether GPU reader has a P2P path to owner's memory
// (always for reader == owner).
func (r *Runtime) PeerQuery(reader, owner int) (bool, error) {
	var can C.int32_t
	if err := r.withPeers(reader, owner, func(rd, ow C.int32_t) error {
		return statusErr(C.fj_peer_query(r.h, rd, ow, &can))
	}); err != nil {
		return false, err
	}
	return can != 0, nil
}

// PeerEnable lets kernels on reader (copies included) use owner's memory.
// Idempotent; without a P2P path a FailedPrecondition error.
func (r *Runtime) PeerEnable(reader, owner int) error {
	return r.withPeers(reader, owner, func(rd, ow C.int32_t) error {
		return statusErr(C.fj_peer_enable(r.h, rd, ow))
	})
}

// PeerDisable undoes PeerEnable. Idempotent.
func (r *Runtime) PeerDisable(reader, owner int) error {
	return r.withPeers(reader, owner, func(rd, ow C.int32_t) error {
		return statusErr(C.fj_peer_disable(r.h, rd, ow))
	})
}

// withPeers is PeerQuery, PeerEnable and PeerDisable: call with the two
// ordinals (refused past int32) under the runtime's read lock.
func (r *Runtime) withPeers(reader, owner int, call func(rd, ow C.int32_t) error) error {
	if err := r.readLock(); err != nil {
		return err
	}
	defer r.mu.RUnlock()
	rd, err := ordinalOf(reader)
	if err != nil {
		return err
	}
	ow, err := ordinalOf(owner)
	if err != nil {
		return err
	}
	return call(rd, ow)
}
