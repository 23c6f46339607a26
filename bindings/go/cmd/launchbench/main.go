// Command launchbench times Kernel.Launch of the Go binding next to a raw
// cuLaunchKernel of the same kernel called from Go through cgo (libcuda
// dlopen'ed), in the same run: host time per launch of an empty kernel
// with 4 scalar/pointer arguments, median of interleaved batches (so drift
// hits both), and the Go heap allocations one Launch makes
// (testing.AllocsPerRun). Issue 21's goal: the binding at most 1.05x raw.
//
//	go run ./cmd/launchbench [-rounds N]
//
// Without a GPU it says so and exits 0 (nothing to measure). The raw side
// dlopens the driver the runtime loads: FLEETJIT_LIBCUDA when set, so with
// the tests' fake driver (libfj_fake_cuda.so, whose launches check their
// arguments and do nothing) both sides call the same fake cuLaunchKernel
// and the difference is the binding's and the library's own host cost.
package main

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

typedef int (*cu_init_t)(unsigned);
typedef int (*cu_device_get_t)(int*, int);
typedef int (*cu_primary_retain_t)(void**, int);
typedef int (*cu_ctx_set_t)(void*);
typedef int (*cu_sync_t)(void);
typedef int (*cu_module_load_t)(void**, const void*);
typedef int (*cu_get_function_t)(void**, void*, const char*);
typedef int (*cu_launch_t)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, void*, void**, void**);
typedef int (*cu_get_proc_t)(const char*, void**, int, uint64_t, int*);

static cu_sync_t cu_sync;
static cu_launch_t cu_launch;
static void* cu_func;
static uint64_t p_a, p_b;
static float p_c;
static int p_n;
static void* params[4];

// An entry point of the driver: dlsym, or else cuGetProcAddress_v2 (the
// fake driver exports only that and cuInit).
static void* cu_sym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (p) return p;
  cu_get_proc_t get_proc = (cu_get_proc_t)dlsym(lib, "cuGetProcAddress_v2");
  return get_proc && get_proc(name, &p, 12000, 0, 0) == 0 ? p : 0;
}

// Loads the cubin into GPU 0's primary context (the one fleetjit uses) and
// prepares the arguments. Returns 0, or the failing step's number; *err
// gets the CUDA error.
static int raw_setup(const char* driver, const void* image, const char* name, uint64_t a,
                     uint64_t b, float c, int n, int* err) {
  void* lib = dlopen(driver, RTLD_NOW);
  if (!lib) return 1;
  cu_init_t init = (cu_init_t)dlsym(lib, "cuInit");
  cu_device_get_t dev_get = (cu_device_get_t)cu_sym(lib, "cuDeviceGet");
  cu_primary_retain_t retain = (cu_primary_retain_t)cu_sym(lib, "cuDevicePrimaryCtxRetain");
  cu_ctx_set_t set = (cu_ctx_set_t)cu_sym(lib, "cuCtxSetCurrent");
  cu_module_load_t load = (cu_module_load_t)cu_sym(lib, "cuModuleLoadData");
  cu_get_function_t get = (cu_get_function_t)cu_sym(lib, "cuModuleGetFunction");
  cu_sync = (cu_sync_t)cu_sym(lib, "cuCtxSynchronize");
  cu_launch = (cu_launch_t)cu_sym(lib, "cuLaunchKernel");  // legacy default stream
  if (!init || !dev_get || !retain || !set || !load || !get || !cu_sync || !cu_launch) return 2;
  int dev = 0;
  void* ctx = 0;
  void* mod = 0;
  if ((*err = init(0))) return 3;
  if ((*err = dev_get(&dev, 0))) return 4;
  if ((*err = retain(&ctx, dev))) return 5;
  if ((*err = set(ctx))) return 6;
  if ((*err = load(&mod, image))) return 7;
  if ((*err = get(&cu_func, mod, name))) return 8;
  p_a = a; p_b = b; p_c = c; p_n = n;
  params[0] = &p_a; params[1] = &p_b; params[2] = &p_c; params[3] = &p_n;
  return 0;
}

// One raw launch (one cgo call, as Kernel.Launch makes).
static int raw_launch(void) {
  return cu_launch(cu_func, 1, 1, 1, 32, 1, 1, 0, 0, params, 0);
}

// The context must be current on the calling thread: Go moves goroutines
// between threads, so the benchmark locks its OS thread and sets it once.
static int raw_sync(void) { return cu_sync(); }
*/
import "C"

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"testing"
	"time"
	"unsafe"

	"fleetjit.dev/fleetjit"
)

const (
	source = `extern "C" __global__ void empty_args(float* a, const float* b, float c, int n) {}`
	batch  = 64
	warmup = 50
)

func median(v []float64) float64 {
	sort.Float64s(v)
	return v[len(v)/2]
}

func die(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "launchbench: "+format+"\n", a...)
	os.Exit(1)
}

func main() {
	rounds := flag.Int("rounds", 400, "interleaved batches per case")
	flag.Parse()
	runtime.LockOSThread() // the raw path's current context is per thread
	rt, err := fleetjit.NewRuntime(nil)
	if err != nil {
		die("no runtime: %v", err)
	}
	defer rt.Close()
	if n, _ := rt.DeviceCount(); n == 0 {
		why := rt.DriverError()
		if why == "" {
			why = "the driver reports 0 devices"
		}
		fmt.Printf("launchbench (Go): no GPU, nothing to measure (%s)\n", why)
		return
	}
	mod, err := rt.Build(&fleetjit.BuildOptions{Source: source, Name: "launch_bench.cu"})
	if err != nil {
		die("build: %v", err)
	}
	defer mod.Close()
	k, err := mod.Kernel("empty_args", 0)
	if err != nil {
		die("kernel: %v", err)
	}
	a, err := rt.Alloc(0, 1024)
	if err != nil {
		die("alloc: %v", err)
	}
	b, _ := rt.Alloc(0, 1024)
	img, _ := mod.Image()
	cimg := C.CBytes(append(img, 0))
	defer C.free(cimg)
	name := C.CString("empty_args")
	defer C.free(unsafe.Pointer(name))
	driver := os.Getenv("FLEETJIT_LIBCUDA")
	if driver == "" {
		driver = "libcuda.so.1"
	}
	cdriver := C.CString(driver)
	defer C.free(unsafe.Pointer(cdriver))
	var cuErr C.int
	if step := C.raw_setup(cdriver, cimg, name, C.uint64_t(a.Address()), C.uint64_t(b.Address()), 2, 256, &cuErr); step != 0 {
		die("raw driver setup (%s) failed at step %d (CUDA error %d)", driver, int(step), int(cuErr))
	}
	cfg := fleetjit.LaunchConfig{Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{32, 1, 1}}
	args := []fleetjit.Arg{fleetjit.Ptr(a.Address()), fleetjit.Ptr(b.Address()), fleetjit.F32(2), fleetjit.I32(256)}
	sync := func() {
		if r := C.raw_sync(); r != 0 {
			die("cuCtxSynchronize: CUDA error %d", int(r))
		}
	}
	fjBatch := func() float64 {
		t := time.Now()
		for i := 0; i < batch; i++ {
			if err := k.Launch(cfg, args...); err != nil {
				die("launch: %v", err)
			}
		}
		us := float64(time.Since(t).Nanoseconds()) / 1e3 / batch
		sync()
		return us
	}
	rawBatch := func() float64 {
		t := time.Now()
		for i := 0; i < batch; i++ {
			if r := C.raw_launch(); r != 0 {
				die("cuLaunchKernel: CUDA error %d", int(r))
			}
		}
		us := float64(time.Since(t).Nanoseconds()) / 1e3 / batch
		sync()
		return us
	}
	for i := 0; i < warmup; i++ {
		fjBatch()
		rawBatch()
	}
	allocs := testing.AllocsPerRun(1000, func() {
		if err := k.Launch(cfg, args...); err != nil {
			die("launch: %v", err)
		}
	})
	sync()
	fj := make([]float64, 0, *rounds)
	raw := make([]float64, 0, *rounds)
	for i := 0; i < *rounds; i++ {
		fj = append(fj, fjBatch())
		raw = append(raw, rawBatch())
	}
	f, r := median(fj), median(raw)
	info, _ := rt.DeviceInfo(0)
	ki, _ := k.Info()
	fmt.Printf("launchbench (Go %s) on %s (driver %d): host time per launch of an empty kernel, "+
		"4 scalar/pointer args, median of %d interleaved batches of %d\n",
		runtime.Version(), info.Name, info.DriverVersion, *rounds, batch)
	fmt.Printf("  raw cuLaunchKernel through cgo    %8.3f us   (anchor)\n", r)
	fmt.Printf("  fleetjit Kernel.Launch            %8.3f us   %.3fx raw (goal <= 1.05x)\n", f, f/r)
	fmt.Printf("  Go heap allocations per launch    %8.3f\n", allocs)
	fmt.Printf("  thunk path: %v\n", ki.UsesThunk)
}
