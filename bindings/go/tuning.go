package fleetjit

// fj_tune (since 1.3): the fastest of a kernel's candidate builds and launch
// shapes on the live device, stored like a module (docs/tuning.md).

/*
#include <stdlib.h>
#include <fleetjit/fleetjit.h>
*/
import "C"

import "unsafe"

// TuneShape is one launch shape of a space (fj_tune_shape).
type TuneShape struct {
	Block       [3]uint32 // 0 entries count as 1
	SharedBytes uint32
	Cluster     [3]uint32 // all 0 = no cluster
}

// TuneBuffer names a device buffer the kernel writes: checked and restored.
type TuneBuffer struct {
	Address uint64
	Bytes   uint64
}

// TuneOptions mirrors fj_tune_options (no callbacks: the grid comes from
// Grid or GridExtent/GridDivisor, outputs are compared byte for byte).
type TuneOptions struct {
	Build       BuildOptions // the base build; Build.Device is tuned on
	Kernel      string
	MacroSets   []string
	Shapes      []TuneShape
	Grid        [3]uint32
	GridExtent  [3]uint64
	GridDivisor [3]string // a macro name, "block.x|y|z" or ""
	Args        []Arg     // as Launch's: passed as Launch passes them
	Outputs     []TuneBuffer
	Warmup      uint32
	Samples     uint32
	Noise       float64 // noise threshold; 0 = 0.10
	TimeoutMs   uint32
	Retune      bool // tune even if a result is stored
	NoStore     bool
}

// TuneRow is one candidate's row (fj_tune_row).
type TuneRow struct {
	MacroIndex, ShapeIndex int
	Macros                 string
	Block, Cluster, Grid   [3]uint32
	SharedBytes            uint32
	Status                 string // "ok", "build_failed", ...
	Message                string
	MedianUs, MinUs        float64
	Spread                 float64
	Noisy                  bool
	Samples, Batch         uint32
}

// TuneResult is fj_tune's result, copied out.
type TuneResult struct {
	Winner   int
	Source   CacheResult // CacheCompiled = tuned by this call
	Noisy    bool
	Stored   bool
	TuneMs   float64
	LookupMs float64
	Key      string
	Rows     []TuneRow
}

// TuneStatusName is fj_tune_status_name.
func TuneStatusName(s int) string { return C.GoString(C.fj_tune_status_name(C.fj_tune_status(s))) }

// Tune runs fj_tune. Its Args are passed as Launch passes them: Bytes, C128
// and tensor arguments are copied to C memory for the call (never a NULL
// pointer); a tensor the binding refuses is named as "argument N: ...".
func (r *Runtime) Tune(opts *TuneOptions) (*TuneResult, error) {
	var res *TuneResult
	if err := withOptions(r, opts, "TuneOptions", func(m *cmem) (err error) {
		res, err = r.tune(m, opts)
		return err
	}); err != nil {
		return nil, err
	}
	return res, nil
}

// tune is Tune under the runtime's read lock, its C copies in m.
func (r *Runtime) tune(m *cmem, opts *TuneOptions) (*TuneResult, error) {
	o, err := opts.toC(m)
	if err != nil {
		return nil, err
	}
	var h *C.fj_tune_result
	if err := statusErr(C.fj_tune(r.h, o, &h)); err != nil {
		return nil, err
	}
	defer C.fj_tune_result_free(h)
	var s C.fj_tune_summary
	s.struct_size = C.size_t(unsafe.Sizeof(s))
	if err := statusErr(C.fj_tune_result_summary(h, &s)); err != nil {
		return nil, err
	}
	res := &TuneResult{Winner: int(s.winner), Source: CacheResult(s.source),
		Noisy: s.noisy != 0, Stored: s.stored != 0, TuneMs: float64(s.tune_ms),
		LookupMs: float64(s.lookup_ms), Key: C.GoString(&s.key[0])}
	for i := 0; i < int(s.num_rows); i++ {
		var row C.fj_tune_row
		row.struct_size = C.size_t(unsafe.Sizeof(row))
		if err := statusErr(C.fj_tune_result_row(h, C.size_t(i), &row)); err != nil {
			return nil, err
		}
		t := TuneRow{MacroIndex: int(row.macro_index), ShapeIndex: int(row.shape_index),
			Macros:      C.GoStringN(row.macros.data, C.int(row.macros.size)),
			SharedBytes: uint32(row.shared_bytes), Status: TuneStatusName(int(row.status)),
			Message:  C.GoStringN(row.message.data, C.int(row.message.size)),
			MedianUs: float64(row.median_us), MinUs: float64(row.min_us),
			Spread: float64(row.spread), Noisy: row.noisy != 0,
			Samples: uint32(row.samples), Batch: uint32(row.batch)}
		for d := 0; d < 3; d++ {
			t.Block[d], t.Cluster[d], t.Grid[d] = uint32(row.block[d]), uint32(row.cluster[d]), uint32(row.grid[d])
		}
		res.Rows = append(res.Rows, t)
	}
	return res, nil
}

// toC fills an fj_tune_options, and the fj_build_options it points to, in C
// memory owned by m. The base build goes through BuildOptions.toC, as Build
// converts it: the same embedded-NUL checks and errors, include folders
// included. The tune's own strings (kernel, macro sets, grid divisors) are
// checked for an embedded NUL too.
func (opts *TuneOptions) toC(m *cmem) (*C.fj_tune_options, error) {
	if err := noNUL("the kernel name", opts.Kernel); err != nil {
		return nil, err
	}
	for _, s := range opts.MacroSets {
		if err := noNUL("a macro set", s); err != nil {
			return nil, err
		}
	}
	for _, s := range opts.GridDivisor {
		if err := noNUL("a grid divisor", s); err != nil {
			return nil, err
		}
	}
	build, err := opts.Build.toC(m)
	if err != nil {
		return nil, err
	}
	// fj_tune_options.build points at it: C memory (a Go pointer may not be
	// stored in C memory).
	b := (*C.fj_build_options)(C.calloc(1, C.size_t(unsafe.Sizeof(C.fj_build_options{}))))
	m.ptrs = append(m.ptrs, unsafe.Pointer(b))
	*b = build
	o := (*C.fj_tune_options)(C.calloc(1, C.size_t(unsafe.Sizeof(C.fj_tune_options{}))))
	m.ptrs = append(m.ptrs, unsafe.Pointer(o))
	o.struct_size = C.size_t(unsafe.Sizeof(*o))
	o.build = b
	o.kernel = m.str(opts.Kernel)
	o.macro_sets, o.num_macro_sets = m.strs(opts.MacroSets)
	if n := len(opts.Shapes); n > 0 {
		p := C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.fj_tune_shape{})))
		m.ptrs = append(m.ptrs, p)
		shapes := unsafe.Slice((*C.fj_tune_shape)(p), n)
		for i, s := range opts.Shapes {
			shapes[i].struct_size = C.size_t(unsafe.Sizeof(shapes[i]))
			for d := 0; d < 3; d++ {
				shapes[i].block[d] = C.uint32_t(s.Block[d])
				shapes[i].cluster[d] = C.uint32_t(s.Cluster[d])
			}
			shapes[i].shared_bytes = C.uint32_t(s.SharedBytes)
		}
		o.shapes = (*C.fj_tune_shape)(p)
	}
	o.num_shapes = C.size_t(len(opts.Shapes))
	for d := 0; d < 3; d++ {
		o.grid[d] = C.uint32_t(opts.Grid[d])
		o.grid_extent[d] = C.uint64_t(opts.GridExtent[d])
		o.grid_divisor[d] = m.str(opts.GridDivisor[d])
	}
	if n := len(opts.Args); n > 0 {
		// As Launch writes them (putArgs): by-value bytes, C128 and tensor
		// arguments copied to C memory in m, never a NULL pointer.
		p := C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(C.fj_arg{})))
		m.ptrs = append(m.ptrs, p)
		if err := putArgs(unsafe.Slice((*C.fj_arg)(p), n), opts.Args, m); err != nil {
			return nil, err
		}
		o.args = (*C.fj_arg)(p)
	}
	o.num_args = C.size_t(len(opts.Args))
	if n := len(opts.Outputs); n > 0 {
		pa := C.malloc(C.size_t(n) * 8)
		pb := C.malloc(C.size_t(n) * 8)
		m.ptrs = append(m.ptrs, pa, pb)
		as := unsafe.Slice((*C.uint64_t)(pa), n)
		bs := unsafe.Slice((*C.uint64_t)(pb), n)
		for i, out := range opts.Outputs {
			as[i], bs[i] = C.uint64_t(out.Address), C.uint64_t(out.Bytes)
		}
		o.output_addresses, o.output_bytes = (*C.uint64_t)(pa), (*C.uint64_t)(pb)
	}
	o.num_outputs = C.size_t(len(opts.Outputs))
	o.warmup, o.samples = C.uint32_t(opts.Warmup), C.uint32_t(opts.Samples)
	o.noise_threshold = C.double(opts.Noise)
	o.timeout_ms = C.uint32_t(opts.TimeoutMs)
	if opts.Retune {
		o.flags |= C.FJ_TUNE_NO_CACHE_READ
	}
	if opts.NoStore {
		o.flags |= C.FJ_TUNE_NO_CACHE_WRITE
	}
	return o, nil
}
