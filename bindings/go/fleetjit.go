// Package fleetjit is a cgo binding of fleetjit, the CUDA JIT runtime behind
// libfleetjit.so.1 (C ABI: include/fleetjit/fleetjit.h).
//
// Errors are *Error values carrying the fj_code, the library's message and
// the NVRTC build log of a build error. Handles (Runtime, Module, Stream,
// DeviceMemory) have an explicit Close; a finalizer closes what was
// forgotten. A Kernel belongs to its Module (the C ABI has no kernel destroy
// call) and a Module, Stream or DeviceMemory to its Runtime: closing a
// Runtime invalidates everything made from it, and later calls on those
// return an *Error with code InvalidArgument, never a crash.
//
// Concurrency: the C ABI promises that calls are safe from any thread and
// keeps no thread-local "last error", which is what goroutines that move
// between OS threads need. Its one exception, destroying a handle while
// another thread uses it, is excluded here: every call holds its runtime's
// read lock and every Close its write lock, so all methods, Close included,
// are safe for concurrent use.
//
// Build flags come from pkg-config's fleetjit.pc: an installed prefix's
// (PKG_CONFIG_PATH=<prefix>/lib/pkgconfig) or the build tree's
// (PKG_CONFIG_PATH=<repo>/build/lib/pkgconfig). Its Libs carry an rpath to
// the library, so a binary runs without LD_LIBRARY_PATH.
package fleetjit

/*
// -O2 here: a CGO_CFLAGS in the environment replaces cgo's default -g -O2,
// which left these helpers unoptimised.
#cgo CFLAGS: -O2
#cgo pkg-config: fleetjit
#include <stdlib.h>
#include <string.h>
#include <fleetjit/fleetjit.h>

static fj_str fjgo_str(const char* p, size_t n) { fj_str s; s.data = p; s.size = n; return s; }

static const char* fjgo_detail(const fj_status* st, const char* key, size_t* n) {
  return fj_status_detail(st, fjgo_str(key, strlen(key)), n);
}

// Launches with the configuration built on the C stack. The handles come
// as uintptr_t: cgo checks a pointer to an incomplete C type (fj_kernel,
// fj_stream) for Go pointers by boxing it into an interface, a Go
// allocation per launch. The configuration travels as scalars: a struct
// passed by value is copied a few more times on the way (about 30 ns).
#define FJGO_LAUNCH_PARAMS                                                            \
  uintptr_t k, uint32_t gx, uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by,        \
      uint32_t bz, uint32_t shared, uint32_t cx, uint32_t cy, uint32_t cz, uintptr_t s, \
      uint32_t flags, uint64_t l2_base, uint64_t l2_bytes, float l2_hit_ratio
#define FJGO_LAUNCH_ARGS \
  k, gx, gy, gz, bx, by, bz, shared, cx, cy, cz, s, flags, l2_base, l2_bytes, l2_hit_ratio

static inline fj_status* fjgo_launch(FJGO_LAUNCH_PARAMS, const fj_arg* args, size_t n) {
  fj_launch_config c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  c.grid[0] = gx; c.grid[1] = gy; c.grid[2] = gz;
  c.block[0] = bx; c.block[1] = by; c.block[2] = bz;
  c.shared_bytes = shared;
  c.cluster[0] = cx; c.cluster[1] = cy; c.cluster[2] = cz;
  c.stream = (fj_stream*)s;
  c.flags = flags;
  c.l2_window_base = l2_base;
  c.l2_window_bytes = l2_bytes;
  c.l2_hit_ratio = l2_hit_ratio;
  return fj_launch((fj_kernel*)k, &c, n ? args : NULL, n);
}

// fjgo_launchN takes up to N arguments by value: cgo copies the array onto
// the C stack, so it is neither Go memory (which a pointer passed to C
// moves to the heap) nor a pooled C buffer. fj_arg's union is a byte array
// to Go, so the array holds no Go pointer either. Three sizes, because the
// array is copied a few times per call: 4 arguments in a 16-entry array
// cost about 35 ns more.
#define FJGO_LAUNCH_N(N)                                                                \
  typedef struct fjgo_args##N { fj_arg a[N]; } fjgo_args##N;                            \
  static fj_status* fjgo_launch##N(FJGO_LAUNCH_PARAMS, fjgo_args##N args, size_t n) { \
    return fjgo_launch(FJGO_LAUNCH_ARGS, args.a, n);                                    \
  }
FJGO_LAUNCH_N(4)
FJGO_LAUNCH_N(8)
FJGO_LAUNCH_N(16)

// More than 16 arguments: an array in C memory.
static fj_status* fjgo_launch_c(FJGO_LAUNCH_PARAMS, uintptr_t args, size_t n) {
  return fjgo_launch(FJGO_LAUNCH_ARGS, (const fj_arg*)args, n);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"unsafe"
)

// ---------------------------------------------------------------- version

// ExpectedMajor and ExpectedMinor are the header version this package was
// written against.
const (
	ExpectedMajor = C.FJ_VERSION_MAJOR
	ExpectedMinor = C.FJ_VERSION_MINOR
)

// Version returns the (major, minor) version of the library actually loaded.
func Version() (major, minor uint32) {
	v := uint32(C.fj_version())
	return v >> 16, v & 0xffff
}

// CheckVersion returns an error unless the loaded library has the major
// version this package expects.
func CheckVersion() error {
	major, minor := Version()
	if major != ExpectedMajor {
		return &Error{Code: FailedPrecondition, Message: fmt.Sprintf(
			"libfleetjit %d.%d is loaded but this package expects major version %d", major, minor, ExpectedMajor)}
	}
	return nil
}

// ----------------------------------------------------------------- errors

// String is the library's name for the code ("INVALID_ARGUMENT").
func (c Code) String() string {
	if c < 0 || c > math.MaxInt32 {
		return "UNKNOWN"
	}
	return C.GoString(C.fj_code_name(C.fj_code(c)))
}

// Error is a non-NULL fj_status, copied and freed, or an error found by
// this package itself.
type Error struct {
	Code    Code
	Message string
	// BuildLog is the NVRTC log of a BuildError ("" otherwise).
	BuildLog string
	// Details holds every detail the status carried: "build_log",
	// "options", "target", "copy_impl", "cuda_call", "cuda_error".
	Details map[string]string
}

func (e *Error) Error() string { return "fleetjit " + e.Code.String() + ": " + e.Message }

// CodeOf returns the Code of an *Error in err's chain, OK for nil, and
// Internal for other errors.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

var detailKeys = []string{"build_log", "options", "target", "copy_impl", "cuda_call", "cuda_error"}

// statusErr converts and frees a status; nil for success.
func statusErr(st *C.fj_status) error {
	if st == nil {
		return nil
	}
	defer C.fj_status_free(st)
	var n C.size_t
	msg := C.fj_status_message(st, &n)
	e := &Error{Code: Code(C.fj_status_code(st)), Message: C.GoStringN(msg, C.int(n))}
	for _, k := range detailKeys {
		ck := C.CString(k)
		var dn C.size_t
		p := C.fjgo_detail(st, ck, &dn)
		C.free(unsafe.Pointer(ck))
		if p != nil {
			if e.Details == nil {
				e.Details = map[string]string{}
			}
			e.Details[k] = C.GoStringN(p, C.int(dn))
		}
	}
	e.BuildLog = e.Details["build_log"]
	return e
}

// ordinalOf converts a device ordinal, refusing one int32_t cannot hold.
func ordinalOf(d int) (C.int32_t, error) {
	if d < math.MinInt32 || d > math.MaxInt32 {
		return 0, &Error{Code: InvalidArgument, Message: fmt.Sprintf("device ordinal %d is out of range", d)}
	}
	return C.int32_t(d), nil
}

// nilErr is the error of a method called on a nil or zero-value handle.
func nilErr(what string) error {
	return &Error{Code: InvalidArgument, Message: "use of a nil or zero-value " + what + " (make it with this package's constructors)"}
}

func closedErr(what string) error {
	return &Error{Code: InvalidArgument, Message: "use of a closed " + what}
}

// readLock takes the runtime's read lock for a call: a nil or zero-value
// runtime is nilErr and a closed one closedErr (the lock is then not held).
// On nil the caller holds the read lock and releases it (defer
// r.mu.RUnlock()).
func (r *Runtime) readLock() error {
	if r == nil {
		return nilErr("Runtime")
	}
	r.mu.RLock()
	if r.h == nil {
		closed := r.closed
		r.mu.RUnlock()
		if !closed {
			return nilErr("Runtime")
		}
		return closedErr("Runtime")
	}
	return nil
}

// cmem collects C allocations for one call.
type cmem struct{ ptrs []unsafe.Pointer }

func (m *cmem) str(s string) C.fj_str {
	if s == "" {
		return C.fjgo_str(nil, 0)
	}
	p := C.CBytes([]byte(s))
	m.ptrs = append(m.ptrs, p)
	return C.fjgo_str((*C.char)(p), C.size_t(len(s)))
}

func (m *cmem) strs(ss []string) (*C.fj_str, C.size_t) {
	if len(ss) == 0 {
		return nil, 0
	}
	p := C.malloc(C.size_t(len(ss)) * C.size_t(unsafe.Sizeof(C.fj_str{})))
	m.ptrs = append(m.ptrs, p)
	arr := unsafe.Slice((*C.fj_str)(p), len(ss))
	for i, s := range ss {
		arr[i] = m.str(s)
	}
	return (*C.fj_str)(p), C.size_t(len(ss))
}

func (m *cmem) bytes(b []byte) unsafe.Pointer {
	p := C.CBytes(b)
	m.ptrs = append(m.ptrs, p)
	return p
}

func (m *cmem) free() {
	for _, p := range m.ptrs {
		C.free(p)
	}
	m.ptrs = nil
}

func fixedString(p *C.char, max int) string {
	b := C.GoBytes(unsafe.Pointer(p), C.int(max))
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// ------------------------------------------------------------------ enums

func (c CopyImpl) String() string { return C.GoString(C.fj_copy_impl_name(C.fj_copy_impl(c))) }

// -------------------------------------------------------------- copy plan

// CopyPlan mirrors fj_copy_plan.
type CopyPlan struct {
	Target   string
	CopyImpl CopyImpl
	// Support maps feature names ("group_wait") to "native" or "emulated".
	Support map[string]string
}

func planFromC(p *C.fj_copy_plan) CopyPlan {
	out := CopyPlan{Target: fixedString(&p.target[0], len(p.target)), CopyImpl: CopyImpl(p.impl), Support: map[string]string{}}
	for i := 0; i < int(C.FJ_FEATURE_COUNT); i++ {
		out.Support[C.GoString(C.fj_feature_name(C.fj_feature(i)))] = C.GoString(C.fj_support_name(p.support[i]))
	}
	return out
}

// CopyPlanFor returns the copy plan for a target name ("sm_90") and an
// optional forced implementation. Needs no GPU and no runtime.
func CopyPlanFor(target string, impl CopyImpl) (CopyPlan, error) {
	var m cmem
	defer m.free()
	var p C.fj_copy_plan
	p.struct_size = C.size_t(unsafe.Sizeof(p))
	if err := statusErr(C.fj_copy_plan_for_target(m.str(target), C.fj_copy_impl(impl), &p)); err != nil {
		return CopyPlan{}, err
	}
	return planFromC(&p), nil
}

// ---------------------------------------------------------------- runtime

// RuntimeOptions mirrors fj_runtime_options; the zero value is the default.
// Environment variables (FLEETJIT_TARGET, FLEETJIT_CACHE_DIR, ...) override.
type RuntimeOptions struct {
	LibcudaPath      string
	LibnvrtcPath     string
	TargetOverride   string // build every module for this target
	CopyImplOverride CopyImpl
	DisableDiskCache bool
	DisableThunks    bool
	CacheDir         string
	CacheMaxBytes    uint64 // 0 = 1 GiB
	// Since 1.1: the fleet's shared cache tier (redis:// or unix://) and
	// the key that signs its entries.
	RemoteCacheURL string
	FleetKey       string
	// Since 1.1: load NVRTC inside NewRuntime.
	PreloadNVRTC bool
	// Since 1.1: device ordinals whose contexts NewRuntime opens (-1 = all).
	PreopenDevices []int
	// Since 1.1: receives the library's log lines at or below LogLevel
	// (LogOff = the default, warn), from any goroutine or C thread,
	// concurrently, also during Close. It must not call into fleetjit.
	Log      func(level LogLevel, line string)
	LogLevel LogLevel
}

// Runtime owns a fj_runtime.
type Runtime struct {
	mu     sync.RWMutex // read: any call on it or its children; write: Close
	h      *C.fj_runtime
	closed bool           // Close destroyed h (a nil h without it: a zero value)
	logID  unsafe.Pointer // its Log callback's registry key (nil: none)
}

// NewRuntime creates a runtime; opts may be nil. No driver or no GPU is
// not an error: the runtime then reports 0 devices.
func NewRuntime(opts *RuntimeOptions) (*Runtime, error) {
	if opts == nil {
		opts = &RuntimeOptions{}
	}
	for _, c := range []struct{ what, s string }{
		{"LibcudaPath", opts.LibcudaPath}, {"LibnvrtcPath", opts.LibnvrtcPath},
		{"TargetOverride", opts.TargetOverride}, {"CacheDir", opts.CacheDir}, {"RemoteCacheURL", opts.RemoteCacheURL},
	} {
		if err := noNUL(c.what, c.s); err != nil {
			return nil, err
		}
	}
	var m cmem
	defer m.free()
	var o C.fj_runtime_options
	o.struct_size = C.size_t(unsafe.Sizeof(o))
	o.libcuda_path = m.str(opts.LibcudaPath)
	o.libnvrtc_path = m.str(opts.LibnvrtcPath)
	o.target_override = m.str(opts.TargetOverride)
	o.copy_impl_override = C.fj_copy_impl(opts.CopyImplOverride)
	if opts.DisableDiskCache {
		o.flags |= C.FJ_RUNTIME_DISABLE_DISK_CACHE
	}
	if opts.DisableThunks {
		o.flags |= C.FJ_RUNTIME_DISABLE_THUNKS
	}
	o.cache_dir = m.str(opts.CacheDir)
	o.cache_max_bytes = C.uint64_t(opts.CacheMaxBytes)
	o.remote_cache_url = m.str(opts.RemoteCacheURL)
	o.fleet_key = m.str(opts.FleetKey)
	if opts.PreloadNVRTC {
		o.flags |= C.FJ_RUNTIME_PRELOAD_NVRTC
	}
	if len(opts.PreopenDevices) > 0 {
		p := C.malloc(C.size_t(len(opts.PreopenDevices)) * 4)
		m.ptrs = append(m.ptrs, p)
		arr := unsafe.Slice((*C.int32_t)(p), len(opts.PreopenDevices))
		for i, d := range opts.PreopenDevices {
			if d < math.MinInt32 || d > math.MaxInt32 {
				return nil, &Error{Code: InvalidArgument, Message: fmt.Sprintf("PreopenDevices[%d] = %d is not an ordinal", i, d)}
			}
			arr[i] = C.int32_t(d)
		}
		o.preopen_devices = (*C.int32_t)(p)
		o.num_preopen_devices = C.size_t(len(opts.PreopenDevices))
	}
	var logID unsafe.Pointer
	if opts.Log != nil {
		logID = registerLog(opts.Log)
		setLogOptions(&o, logID, opts.LogLevel)
	}
	var h *C.fj_runtime
	if err := statusErr(C.fj_runtime_create(&o, &h)); err != nil {
		unregisterLog(logID)
		return nil, err
	}
	r := &Runtime{h: h, logID: logID}
	runtime.SetFinalizer(r, func(r *Runtime) { r.Close() })
	return r, nil
}

// Close destroys the runtime and with it every module, stream and
// allocation made from it. Closing twice is a no-op.
func (r *Runtime) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.h == nil {
		return nil
	}
	err := statusErr(C.fj_runtime_destroy(r.h))
	r.h, r.closed = nil, true
	unregisterLog(r.logID) // destroy may still log: only after it
	r.logID = nil
	runtime.SetFinalizer(r, nil)
	return err
}

// DriverError says why the CUDA driver is unavailable ("" if it loaded).
func (r *Runtime) DriverError() string {
	if r == nil {
		return ""
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.h == nil {
		return ""
	}
	return C.GoString(C.fj_runtime_driver_error(r.h))
}

// DeviceCount is the number of visible CUDA devices: 0 without a GPU.
func (r *Runtime) DeviceCount() (int, error) {
	if err := r.readLock(); err != nil {
		return 0, err
	}
	defer r.mu.RUnlock()
	var n C.int32_t
	if err := statusErr(C.fj_device_count(r.h, &n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

// DeviceInfo mirrors fj_device_info.
type DeviceInfo struct {
	Name                      string
	Ordinal                   int
	CCMajor, CCMinor          int
	SMCount                   int
	TotalMemoryBytes          uint64
	SharedMemoryPerBlock      int
	SharedMemoryPerBlockOptin int
	SharedMemoryPerSM         int
	L2CacheBytes              int
	MaxThreadsPerBlock        int
	ClusterLaunch             bool
	DriverVersion             int
	Plan                      CopyPlan
}

// DeviceInfo describes device `ordinal` and the copy plan used on it.
func (r *Runtime) DeviceInfo(ordinal int) (DeviceInfo, error) {
	if err := r.readLock(); err != nil {
		return DeviceInfo{}, err
	}
	defer r.mu.RUnlock()
	o, err := ordinalOf(ordinal)
	if err != nil {
		return DeviceInfo{}, err
	}
	var d C.fj_device_info
	d.struct_size = C.size_t(unsafe.Sizeof(d))
	if err := statusErr(C.fj_device_info_get(r.h, o, &d)); err != nil {
		return DeviceInfo{}, err
	}
	return DeviceInfo{
		Name: fixedString(&d.name[0], len(d.name)), Ordinal: int(d.ordinal),
		CCMajor: int(d.cc_major), CCMinor: int(d.cc_minor), SMCount: int(d.sm_count),
		TotalMemoryBytes:          uint64(d.total_memory_bytes),
		SharedMemoryPerBlock:      int(d.shared_memory_per_block),
		SharedMemoryPerBlockOptin: int(d.shared_memory_per_block_optin),
		SharedMemoryPerSM:         int(d.shared_memory_per_sm),
		L2CacheBytes:              int(d.l2_cache_bytes),
		MaxThreadsPerBlock:        int(d.max_threads_per_block),
		ClusterLaunch:             d.cluster_launch != 0,
		DriverVersion:             int(d.driver_version),
		Plan:                      planFromC(&d.plan),
	}, nil
}

// CacheStats mirrors fj_cache_stats.
type CacheStats struct {
	MemoryHits, DiskHits, Misses, Compiles uint64
	CompileMsTotal                         float64
	Evictions, RejectedEntries             uint64
	DiskEntries, DiskBytes                 uint64
	// Since 1.1: the remote tier (all 0 when it is off).
	RemoteState                            RemoteState
	RemoteHits, RemoteMisses, RemoteErrors uint64
	RemoteRejected, RemoteWrites           uint64
	RemoteWriteDrops, RemoteBreakerOpens   uint64
}

// CacheStats returns the module cache's counters.
func (r *Runtime) CacheStats() (CacheStats, error) {
	if err := r.readLock(); err != nil {
		return CacheStats{}, err
	}
	defer r.mu.RUnlock()
	var s C.fj_cache_stats
	s.struct_size = C.size_t(unsafe.Sizeof(s))
	if err := statusErr(C.fj_cache_stats_get(r.h, &s)); err != nil {
		return CacheStats{}, err
	}
	return CacheStats{
		MemoryHits: uint64(s.memory_hits), DiskHits: uint64(s.disk_hits), Misses: uint64(s.misses),
		Compiles: uint64(s.compiles), CompileMsTotal: float64(s.compile_ms_total),
		Evictions: uint64(s.evictions), RejectedEntries: uint64(s.rejected_entries),
		DiskEntries: uint64(s.disk_entries), DiskBytes: uint64(s.disk_bytes),
		RemoteState: RemoteState(s.remote_state), RemoteHits: uint64(s.remote_hits),
		RemoteMisses: uint64(s.remote_misses), RemoteErrors: uint64(s.remote_errors),
		RemoteRejected: uint64(s.remote_rejected), RemoteWrites: uint64(s.remote_writes),
		RemoteWriteDrops: uint64(s.remote_write_drops), RemoteBreakerOpens: uint64(s.remote_breaker_opens),
	}, nil
}

// ClearCache empties the memory tier and deletes this cache's disk entries.
func (r *Runtime) ClearCache() error {
	if err := r.readLock(); err != nil {
		return err
	}
	defer r.mu.RUnlock()
	return statusErr(C.fj_cache_clear(r.h))
}

// ----------------------------------------------------------------- module

// BuildOptions mirrors fj_build_options.
type BuildOptions struct {
	Source string // CUDA C++; <fleetjit/copy.cuh> is available
	Name   string // for logs and file stems, e.g. "saxpy.cu"
	// Extra NVRTC options ("-DTILE=64").
	NVRTCOptions []string
	// Kernels to instantiate and look up by C++ name ("axpy<float>").
	NameExpressions []string
	// "sm_XX[a]" (cubin) or "compute_XX[a]" (PTX); "" = the runtime's
	// override, else the live device Device.
	Target   string
	Device   int
	CopyImpl CopyImpl
	Output   Output
	NoCache  bool // neither read nor write any cache tier
	// Since 1.1: folders searched for #include, in order, after any -I of
	// NVRTCOptions and before CUDA's own headers. The cache key covers the
	// content of the headers read from them.
	IncludeDirs []string
}

// noNUL refuses a string with an embedded NUL: NVRTC and the driver read C
// strings, so the rest would be silently dropped (a source cut short still
// compiles).
func noNUL(what, s string) error {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return &Error{Code: InvalidArgument, Message: fmt.Sprintf(
			"%s has an embedded NUL at byte %d of %d: the C string would end there and silently drop the rest", what, i, len(s))}
	}
	return nil
}

// toC fills an fj_build_options whose strings live in m.
func (opts *BuildOptions) toC(m *cmem) (C.fj_build_options, error) {
	var b C.fj_build_options
	for _, c := range []struct{ what, s string }{
		{"the source", opts.Source}, {"the build name", opts.Name}, {"the target", opts.Target},
	} {
		if err := noNUL(c.what, c.s); err != nil {
			return b, err
		}
	}
	for _, c := range []struct {
		what string
		ss   []string
	}{{"an NVRTC option", opts.NVRTCOptions}, {"a name expression", opts.NameExpressions}, {"an include folder", opts.IncludeDirs}} {
		for _, s := range c.ss {
			if err := noNUL(c.what, s); err != nil {
				return b, err
			}
		}
	}
	device, err := ordinalOf(opts.Device)
	if err != nil {
		return b, err
	}
	b.struct_size = C.size_t(unsafe.Sizeof(b))
	b.source = m.str(opts.Source)
	b.name = m.str(opts.Name)
	b.nvrtc_options, b.num_nvrtc_options = m.strs(opts.NVRTCOptions)
	b.name_expressions, b.num_name_expressions = m.strs(opts.NameExpressions)
	b.include_dirs, b.num_include_dirs = m.strs(opts.IncludeDirs)
	b.target = m.str(opts.Target)
	b.device = device
	b.copy_impl = C.fj_copy_impl(opts.CopyImpl)
	b.output = C.fj_output(opts.Output)
	if opts.NoCache {
		b.flags |= C.FJ_BUILD_NO_CACHE
	}
	return b, nil
}

// ModuleInfo mirrors fj_module_info.
type ModuleInfo struct {
	Target      string
	CopyImpl    CopyImpl
	Output      Output // OutputCubin or OutputPTX
	CacheResult CacheResult
	BuildMs     float64
	CompileMs   float64
	ImageBytes  uint64
}

// Module owns a fj_module.
type Module struct {
	rt *Runtime
	h  *C.fj_module
}

// Build builds a module, or fetches it from the cache.
func (r *Runtime) Build(opts *BuildOptions) (*Module, error) {
	var h *C.fj_module
	if err := r.withBuildOptions(opts, func(b *C.fj_build_options) error {
		return statusErr(C.fj_module_build(r.h, b, &h))
	}); err != nil {
		return nil, err
	}
	return newModule(r, h), nil
}

// withBuildOptions runs call with opts converted to C (withOptions: a nil
// runtime, nil options and a closed runtime are refused first, and the C
// copy lives until call returns).
func (r *Runtime) withBuildOptions(opts *BuildOptions, call func(b *C.fj_build_options) error) error {
	return withOptions(r, opts, "BuildOptions", func(m *cmem) error {
		b, err := opts.toC(m)
		if err != nil {
			return err
		}
		return call(&b)
	})
}

// withOptions is the prologue of every entry that copies an options struct
// to C (Build, BuildAsync, Link, LoadModule, Tune): a nil runtime, then nil
// options ("nil " + what), are InvalidArgument errors; then, under the
// runtime's read lock, a closed runtime is one too. call runs under that
// lock with C memory freed when it returns.
func withOptions[O any](r *Runtime, opts *O, what string, call func(m *cmem) error) error {
	if r == nil {
		return nilErr("Runtime")
	}
	if opts == nil {
		return &Error{Code: InvalidArgument, Message: "nil " + what}
	}
	if err := r.readLock(); err != nil {
		return err
	}
	defer r.mu.RUnlock()
	var m cmem
	defer m.free()
	return call(&m)
}

// Close destroys the module; its kernels become invalid. Closing twice, or
// after the runtime was closed, is a no-op.
func (m *Module) Close() error {
	if m == nil || m.rt == nil {
		return nil
	}
	m.rt.mu.Lock()
	defer m.rt.mu.Unlock()
	var err error
	if m.h != nil && m.rt.h != nil {
		err = statusErr(C.fj_module_destroy(m.h))
	}
	m.h = nil
	runtime.SetFinalizer(m, nil)
	return err
}

// newModule owns h, a module of r, with a finalizer that closes it.
func newModule(r *Runtime, h *C.fj_module) *Module {
	mod := &Module{rt: r, h: h}
	runtime.SetFinalizer(mod, func(m *Module) { m.Close() })
	return mod
}

func (m *Module) live() bool { return m.h != nil && m.rt.h != nil }

// readLock takes the runtime's read lock for a call on the module: a nil
// or zero-value Module is nilErr and a closed one (or one of a closed
// runtime) closedErr (the lock is then not held). On nil the caller holds
// the read lock and releases it (defer m.rt.mu.RUnlock()).
func (m *Module) readLock() error {
	if m == nil || m.rt == nil {
		return nilErr("Module")
	}
	m.rt.mu.RLock()
	if !m.live() {
		m.rt.mu.RUnlock()
		return closedErr("Module")
	}
	return nil
}

// Info describes the built module.
func (m *Module) Info() (ModuleInfo, error) {
	if err := m.readLock(); err != nil {
		return ModuleInfo{}, err
	}
	defer m.rt.mu.RUnlock()
	var i C.fj_module_info
	i.struct_size = C.size_t(unsafe.Sizeof(i))
	if err := statusErr(C.fj_module_info_get(m.h, &i)); err != nil {
		return ModuleInfo{}, err
	}
	return ModuleInfo{
		Target: fixedString(&i.target[0], len(i.target)), CopyImpl: CopyImpl(i.copy_impl),
		Output: Output(i.output), CacheResult: CacheResult(i.cache_result),
		BuildMs: float64(i.build_ms), CompileMs: float64(i.compile_ms), ImageBytes: uint64(i.image_bytes),
	}, nil
}

// Image returns a copy of the built image (cubin or PTX text).
func (m *Module) Image() ([]byte, error) {
	if err := m.readLock(); err != nil {
		return nil, err
	}
	defer m.rt.mu.RUnlock()
	var p unsafe.Pointer
	var n C.size_t
	if err := statusErr(C.fj_module_image(m.h, &p, &n)); err != nil {
		return nil, err
	}
	return C.GoBytes(p, C.int(n)), nil
}

// Kernel looks a kernel up by its extern "C" name or a name expression,
// loading the module on `device` (this needs a GPU).
func (m *Module) Kernel(name string, device int) (*Kernel, error) {
	if err := m.readLock(); err != nil {
		return nil, err
	}
	defer m.rt.mu.RUnlock()
	if err := noNUL("the kernel name", name); err != nil {
		return nil, err
	}
	var cm cmem
	defer cm.free()
	o, err := ordinalOf(device)
	if err != nil {
		return nil, err
	}
	var h *C.fj_kernel
	if err := statusErr(C.fj_module_get_kernel(m.h, cm.str(name), o, &h)); err != nil {
		return nil, err
	}
	return &Kernel{m: m, h: h}, nil
}

// ----------------------------------------------------------------- kernel

// Kernel is a kernel of a Module. It has no Close: the C ABI has no kernel
// destroy call, a kernel lives as long as its module.
type Kernel struct {
	m *Module
	h *C.fj_kernel
}

// KernelInfo mirrors fj_kernel_info.
type KernelInfo struct {
	LoweredName        string
	NumParams          int
	ParamBytes         uint32
	MaxThreadsPerBlock int
	StaticSharedBytes  int
	NumRegs            int
	UsesThunk          bool
}

// readLock takes the runtime's read lock for a call on the kernel: a nil
// or zero-value Kernel is nilErr and one of a closed module (or of a closed
// runtime) closedErr("Module") (the lock is then not held). On nil the
// caller holds the read lock and releases it (defer k.m.rt.mu.RUnlock()).
func (k *Kernel) readLock() error {
	if k == nil || k.m == nil || k.m.rt == nil {
		return nilErr("Kernel")
	}
	k.m.rt.mu.RLock()
	if !k.m.live() {
		k.m.rt.mu.RUnlock()
		return closedErr("Module")
	}
	return nil
}

// Info describes the loaded kernel.
func (k *Kernel) Info() (KernelInfo, error) {
	if err := k.readLock(); err != nil {
		return KernelInfo{}, err
	}
	defer k.m.rt.mu.RUnlock()
	var i C.fj_kernel_info
	i.struct_size = C.size_t(unsafe.Sizeof(i))
	if err := statusErr(C.fj_kernel_info_get(k.h, &i)); err != nil {
		return KernelInfo{}, err
	}
	return KernelInfo{
		LoweredName: fixedString(&i.lowered_name[0], len(i.lowered_name)), NumParams: int(i.num_params),
		ParamBytes: uint32(i.param_bytes), MaxThreadsPerBlock: int(i.max_threads_per_block),
		StaticSharedBytes: int(i.static_shared_bytes), NumRegs: int(i.num_regs), UsesThunk: i.uses_thunk != 0,
	}, nil
}

// Arg is one kernel argument (fj_arg); make it with I32, F32, Ptr, Tensor...
// bits is the 8 bytes of fj_arg's value union as a little-endian uint64
// (every CUDA host is little-endian): a signed value is stored truncated to
// its width, not sign-extended, so bits can be written to the union as is.
type Arg struct {
	kind   C.fj_arg_kind
	bits   uint64
	bytes  []byte
	tensor *TensorArg
}

func I8(v int8) Arg         { return Arg{kind: C.FJ_ARG_I8, bits: uint64(uint8(v))} }
func I16(v int16) Arg       { return Arg{kind: C.FJ_ARG_I16, bits: uint64(uint16(v))} }
func I32(v int32) Arg       { return Arg{kind: C.FJ_ARG_I32, bits: uint64(uint32(v))} }
func I64(v int64) Arg       { return Arg{kind: C.FJ_ARG_I64, bits: uint64(v)} }
func U8(v uint8) Arg        { return Arg{kind: C.FJ_ARG_U8, bits: uint64(v)} }
func U16(v uint16) Arg      { return Arg{kind: C.FJ_ARG_U16, bits: uint64(v)} }
func U32(v uint32) Arg      { return Arg{kind: C.FJ_ARG_U32, bits: uint64(v)} }
func U64(v uint64) Arg      { return Arg{kind: C.FJ_ARG_U64, bits: v} }
func F16Bits(v uint16) Arg  { return Arg{kind: C.FJ_ARG_F16, bits: uint64(v)} }
func BF16Bits(v uint16) Arg { return Arg{kind: C.FJ_ARG_BF16, bits: uint64(v)} }
func F32(v float32) Arg     { return Arg{kind: C.FJ_ARG_F32, bits: uint64(math.Float32bits(v))} }
func F64(v float64) Arg     { return Arg{kind: C.FJ_ARG_F64, bits: math.Float64bits(v)} }

// Ptr passes a device address.
func Ptr(address uint64) Arg { return Arg{kind: C.FJ_ARG_POINTER, bits: address} }

// Mem passes the address of a device allocation.
func Mem(d *DeviceMemory) Arg { return Ptr(d.Address()) }

// TensorArgOf passes a tensor argument (an FJ_TENSOR parameter), copied to
// C memory for the call. Its Box, like its Shape, is outermost-first (index
// 0 is the slowest-varying dimension), while device code counts from the
// innermost (fj::tensor::box(0)); see rule 11 of <fleetjit/fleetjit.h>.
func TensorArgOf(t *TensorArg) Arg { return Arg{kind: C.FJ_ARG_TENSOR, tensor: t} }

// Bytes passes a struct by value (copied for the call).
func Bytes(b []byte) Arg { return Arg{kind: C.FJ_ARG_BYTES, bytes: append([]byte(nil), b...)} }

// putArg writes the C fj_arg *raw from Go, with no cgo call: bits go to the
// value union as they are (see Arg), size is FJ_ARG_BYTES's byte count.
func putArg(raw *C.fj_arg, kind C.fj_arg_kind, bits uint64, size C.uint32_t) {
	raw.struct_size = C.size_t(unsafe.Sizeof(*raw))
	raw.kind = kind
	raw.size = size
	*(*uint64)(unsafe.Pointer(&raw.v)) = bits
}

// LaunchConfig mirrors fj_launch_config. Zero grid/block entries count as
// 1; a nil Stream is the device's legacy default stream. A Stream of
// another runtime than the kernel's is an InvalidArgument error ("stream
// belongs to another runtime"), as for Copy, Prefetch and the globals.
type LaunchConfig struct {
	Grid        [3]uint32
	Block       [3]uint32
	SharedBytes uint32 // dynamic shared memory; above 48 KiB is opted in
	Cluster     [3]uint32
	Stream      *Stream
	// Since 1.3 (globals_and_attributes.go): cooperative and programmatic dependent
	// launches, an L2 access-policy window (L2WindowBytes 0 = none).
	Cooperative   bool
	Programmatic  bool
	L2WindowBase  uint64
	L2WindowBytes uint64
	L2HitRatio    float32
}

// Linear returns enough 1-D blocks of `block` threads to cover n threads.
// A negative n, or one that needs more than MaxUint32 blocks, gives a grid
// of MaxUint32 blocks, past every device's limit (2^31 - 1): Launch refuses
// it with an OutOfRange error instead of launching a wrapped grid.
func Linear(n int, block uint32) LaunchConfig {
	if block == 0 {
		block = 1
	}
	g := uint64(math.MaxUint32)
	if n >= 0 {
		g = (uint64(n) + uint64(block) - 1) / uint64(block) // n < 2^63: no overflow
		if g > math.MaxUint32 {
			g = math.MaxUint32
		}
	}
	if g == 0 {
		g = 1
	}
	return LaunchConfig{Grid: [3]uint32{uint32(g), 1, 1}, Block: [3]uint32{block, 1, 1}}
}

// Launch launches the kernel asynchronously. Arguments are checked against
// the kernel's parameters and the configuration against the device before
// the driver is called. Device memory the kernel uses must stay allocated
// until its stream is synchronised.
//
// A launch of up to 16 scalar or pointer arguments makes no Go allocation
// and one cgo call; by-value bytes and tensors are copied to C memory for
// the call.
func (k *Kernel) Launch(cfg LaunchConfig, args ...Arg) error {
	if k == nil || k.m == nil || k.m.rt == nil {
		return nilErr("Kernel")
	}
	// The read lock is what makes a launch racing Module, Stream or Runtime
	// Close safe: the C ABI checks a handle when a call begins, but a
	// destroy frees the objects an fj_launch in flight reads (rule 4 of
	// <fleetjit/fleetjit.h>; without the lock TestLaunchRacingClose
	// crashes). It costs about 30 ns over the fake driver; the defer, none.
	k.m.rt.mu.RLock()
	defer k.m.rt.mu.RUnlock()
	if !k.m.live() {
		return closedErr("Module")
	}
	stream, err := streamHandle(k.m.rt, cfg.Stream)
	if err != nil {
		return err
	}
	kh, sh := C.uintptr_t(uintptr(unsafe.Pointer(k.h))), C.uintptr_t(uintptr(unsafe.Pointer(stream)))
	gx, gy, gz := C.uint32_t(cfg.Grid[0]), C.uint32_t(cfg.Grid[1]), C.uint32_t(cfg.Grid[2])
	bx, by, bz := C.uint32_t(cfg.Block[0]), C.uint32_t(cfg.Block[1]), C.uint32_t(cfg.Block[2])
	cx, cy, cz := C.uint32_t(cfg.Cluster[0]), C.uint32_t(cfg.Cluster[1]), C.uint32_t(cfg.Cluster[2])
	shared, flags := C.uint32_t(cfg.SharedBytes), launchFlags(cfg)
	l2Base, l2Bytes, l2Hit := C.uint64_t(cfg.L2WindowBase), C.uint64_t(cfg.L2WindowBytes), C.float(cfg.L2HitRatio)
	var m cmem
	var st *C.fj_status
	switch n := len(args); {
	case n <= 4:
		var a C.fjgo_args4
		if err = putArgs(a.a[:n], args, &m); err == nil {
			st = C.fjgo_launch4(kh, gx, gy, gz, bx, by, bz, shared, cx, cy, cz, sh, flags, l2Base, l2Bytes, l2Hit, a, C.size_t(n))
		}
	case n <= 8:
		var a C.fjgo_args8
		if err = putArgs(a.a[:n], args, &m); err == nil {
			st = C.fjgo_launch8(kh, gx, gy, gz, bx, by, bz, shared, cx, cy, cz, sh, flags, l2Base, l2Bytes, l2Hit, a, C.size_t(n))
		}
	case n <= 16:
		var a C.fjgo_args16
		if err = putArgs(a.a[:n], args, &m); err == nil {
			st = C.fjgo_launch16(kh, gx, gy, gz, bx, by, bz, shared, cx, cy, cz, sh, flags, l2Base, l2Bytes, l2Hit, a, C.size_t(n))
		}
	default:
		p := C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(C.fj_arg{})))
		m.ptrs = append(m.ptrs, p)
		if err = putArgs(unsafe.Slice((*C.fj_arg)(p), n), args, &m); err == nil {
			st = C.fjgo_launch_c(kh, gx, gy, gz, bx, by, bz, shared, cx, cy, cz, sh, flags, l2Base, l2Bytes, l2Hit,
				C.uintptr_t(uintptr(p)), C.size_t(n))
		}
	}
	if m.ptrs != nil {
		m.free()
	}
	runtime.KeepAlive(cfg.Stream)
	if err != nil {
		return err
	}
	return statusErr(st)
}

// putArgs writes args into raw (as long); by-value bytes and tensors are
// copied to C memory owned by m.
func putArgs(raw []C.fj_arg, args []Arg, m *cmem) error {
	for i := range args {
		a := &args[i]
		bits, size := a.bits, C.uint32_t(0)
		switch a.kind {
		case C.FJ_ARG_BYTES, C.FJ_ARG_C128:
			if uint64(len(a.bytes)) > math.MaxUint32 {
				return &Error{Code: InvalidArgument, Message: "a by-value argument larger than 4 GiB"}
			}
			bits, size = uint64(uintptr(m.bytes(a.bytes))), C.uint32_t(len(a.bytes))
		case C.FJ_ARG_TENSOR:
			ta, err := a.tensor.toC(m)
			if err != nil {
				return prefixErr(err, fmt.Sprintf("argument %d", i))
			}
			bits = uint64(uintptr(unsafe.Pointer(ta)))
		}
		putArg(&raw[i], a.kind, bits, size)
	}
	return nil
}

// ----------------------------------------------------------------- stream

// Stream owns a non-blocking fj_stream.
type Stream struct {
	rt *Runtime
	h  *C.fj_stream
}

// NewStream creates a non-blocking stream on device `ordinal`.
func (r *Runtime) NewStream(ordinal int) (*Stream, error) {
	if err := r.readLock(); err != nil {
		return nil, err
	}
	defer r.mu.RUnlock()
	o, err := ordinalOf(ordinal)
	if err != nil {
		return nil, err
	}
	var h *C.fj_stream
	if err := statusErr(C.fj_stream_create(r.h, o, &h)); err != nil {
		return nil, err
	}
	return newStream(r, h), nil
}

// newStream owns h, a stream of r, with a finalizer that closes it.
func newStream(r *Runtime, h *C.fj_stream) *Stream {
	s := &Stream{rt: r, h: h}
	runtime.SetFinalizer(s, func(s *Stream) { s.Close() })
	return s
}

// Synchronize waits for the stream's work; a kernel fault comes back here.
func (s *Stream) Synchronize() error {
	if s == nil || s.rt == nil {
		return nilErr("Stream")
	}
	s.rt.mu.RLock()
	defer s.rt.mu.RUnlock()
	if s.h == nil || s.rt.h == nil {
		return closedErr("Stream")
	}
	return statusErr(C.fj_stream_synchronize(s.h))
}

// Close destroys the stream after its work completes.
func (s *Stream) Close() error {
	if s == nil || s.rt == nil {
		return nil
	}
	s.rt.mu.Lock()
	defer s.rt.mu.Unlock()
	var err error
	if s.h != nil && s.rt.h != nil {
		err = statusErr(C.fj_stream_destroy(s.h))
	}
	s.h = nil
	runtime.SetFinalizer(s, nil)
	return err
}

// ----------------------------------------------------------------- memory

// DeviceMemory is an allocation from Runtime.Alloc. Copies through it are
// synchronous: complete when the call returns.
type DeviceMemory struct {
	rt    *Runtime
	addr  uint64
	bytes uint64
}

// Alloc allocates `bytes` bytes on device `ordinal`.
func (r *Runtime) Alloc(ordinal int, bytes uint64) (*DeviceMemory, error) {
	if err := r.readLock(); err != nil {
		return nil, err
	}
	defer r.mu.RUnlock()
	o, err := ordinalOf(ordinal)
	if err != nil {
		return nil, err
	}
	var a C.uint64_t
	if err := statusErr(C.fj_mem_alloc(r.h, o, C.uint64_t(bytes), &a)); err != nil {
		return nil, err
	}
	d := &DeviceMemory{rt: r, addr: uint64(a), bytes: bytes}
	runtime.SetFinalizer(d, func(d *DeviceMemory) { d.Close() })
	return d, nil
}

// Address is the device address: 0 after Close, after its runtime's Close
// and for a nil or zero-value DeviceMemory. It reads the address under the
// runtime's read lock, as every call does (Close writes it under the write
// lock), so it is safe for concurrent use with Close; an address read
// before a Close is stale after it.
func (d *DeviceMemory) Address() uint64 {
	if d == nil || d.rt == nil {
		return 0
	}
	d.rt.mu.RLock()
	defer d.rt.mu.RUnlock()
	if d.rt.h == nil {
		return 0
	}
	return d.addr
}

// Size is the allocation's size in bytes (also after Close). The size is
// written once, by Alloc, before the DeviceMemory is shared, and never
// again: reading it needs no lock.
func (d *DeviceMemory) Size() uint64 {
	if d == nil {
		return 0
	}
	return d.bytes
}

// Close frees the allocation.
func (d *DeviceMemory) Close() error {
	if d == nil || d.rt == nil {
		return nil
	}
	d.rt.mu.Lock()
	defer d.rt.mu.Unlock()
	var err error
	if d.addr != 0 && d.rt.h != nil {
		err = statusErr(C.fj_mem_free(d.rt.h, C.uint64_t(d.addr)))
	}
	d.addr = 0
	runtime.SetFinalizer(d, nil)
	return err
}

// readLock takes the runtime's read lock for a call on the allocation: a
// nil or zero-value DeviceMemory is nilErr and a freed one (or one of a
// closed runtime) closedErr (the lock is then not held). On nil the caller
// holds the read lock and releases it (defer d.rt.mu.RUnlock()).
func (d *DeviceMemory) readLock() error {
	if d == nil || d.rt == nil {
		return nilErr("DeviceMemory")
	}
	d.rt.mu.RLock()
	if d.addr == 0 || d.rt.h == nil {
		d.rt.mu.RUnlock()
		return closedErr("DeviceMemory")
	}
	return nil
}

func (d *DeviceMemory) copy(host unsafe.Pointer, n uint64, toDevice bool) error {
	if err := d.readLock(); err != nil {
		return err
	}
	defer d.rt.mu.RUnlock()
	if n != d.bytes {
		return &Error{Code: InvalidArgument, Message: fmt.Sprintf("host buffer has %d bytes, device allocation %d", n, d.bytes)}
	}
	if n == 0 {
		return nil
	}
	if toDevice {
		return statusErr(C.fj_memcpy_htod(d.rt.h, C.uint64_t(d.addr), host, C.uint64_t(n), nil))
	}
	return statusErr(C.fj_memcpy_dtoh(d.rt.h, host, C.uint64_t(d.addr), C.uint64_t(n), nil))
}

// Scalar is the element types CopyToDevice and CopyFromDevice move.
type Scalar interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

func sliceBytes[T Scalar](s []T) (unsafe.Pointer, uint64) {
	if len(s) == 0 {
		return nil, 0
	}
	var z T
	return unsafe.Pointer(&s[0]), uint64(len(s)) * uint64(unsafe.Sizeof(z))
}

// CopyToDevice copies src (exactly d.Size() bytes) to the device.
func CopyToDevice[T Scalar](d *DeviceMemory, src []T) error {
	p, n := sliceBytes(src)
	err := d.copy(p, n, true)
	runtime.KeepAlive(src)
	return err
}

// CopyFromDevice copies the allocation into dst (exactly d.Size() bytes).
func CopyFromDevice[T Scalar](dst []T, d *DeviceMemory) error {
	p, n := sliceBytes(dst)
	err := d.copy(p, n, false)
	runtime.KeepAlive(dst)
	return err
}

// Upload allocates device memory holding a copy of data.
func Upload[T Scalar](r *Runtime, ordinal int, data []T) (*DeviceMemory, error) {
	_, n := sliceBytes(data)
	d, err := r.Alloc(ordinal, n)
	if err != nil {
		return nil, err
	}
	if err := CopyToDevice(d, data); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}
