package fleetjit_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fleetjit.dev/fleetjit"
)

// fakeDriver is the tests' fake CUDA driver (libfj_fake_cuda.so, built with
// the library; its launches check their arguments and do nothing), so a
// launch runs on the CPU: $FJ_FAKE_CUDA, else next to the library in
// $FLEETJIT_LIB_DIR (scripts/dev/test-bindings sets it), else the
// default build folder. "" when none exists.
func fakeDriver() string {
	paths := []string{os.Getenv("FJ_FAKE_CUDA")}
	if d := os.Getenv("FLEETJIT_LIB_DIR"); d != "" {
		paths = append(paths, filepath.Join(d, "libfj_fake_cuda.so"))
	}
	paths = append(paths, filepath.Join("..", "..", "build", "lib", "libfj_fake_cuda.so"))
	for _, p := range paths {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// fakeRuntime is a runtime over the fake driver with a device, closed when
// the test ends; without one the test is skipped, saying why.
func fakeRuntime(t testing.TB) *fleetjit.Runtime {
	t.Helper()
	drv := fakeDriver()
	if drv == "" {
		t.Skip("no libfj_fake_cuda.so (set FJ_FAKE_CUDA or FLEETJIT_LIB_DIR to the built library's folder)")
	}
	rt, err := fleetjit.NewRuntime(&fleetjit.RuntimeOptions{LibcudaPath: drv, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	if n, _ := rt.DeviceCount(); n == 0 {
		t.Skipf("the fake driver %s reports no device (%s); FLEETJIT_LIBCUDA in the environment wins over LibcudaPath", drv, rt.DriverError())
	}
	return rt
}

// buildOrSkip builds opts on rt (closed when the test ends), skipping the
// test without NVRTC.
func buildOrSkip(t testing.TB, rt *fleetjit.Runtime, opts *fleetjit.BuildOptions) *fleetjit.Module {
	t.Helper()
	m, err := rt.Build(opts)
	if err != nil {
		var e *fleetjit.Error
		if errors.As(err, &e) && e.Code == fleetjit.Unavailable {
			t.Skipf("no NVRTC: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// fakeLaunchKernel builds an empty kernel of 4 scalar/pointer parameters on
// a runtime over the fake driver (skipping without one, or without NVRTC)
// and returns it, its arguments and the runtime.
func fakeLaunchKernel(t testing.TB) (*fleetjit.Kernel, []fleetjit.Arg, *fleetjit.Runtime) {
	t.Helper()
	rt := fakeRuntime(t)
	m := buildOrSkip(t, rt, &fleetjit.BuildOptions{
		Source: `extern "C" __global__ void empty_args(float* a, const float* b, float c, int n) {}`,
		Name:   "empty_args.cu",
	})
	k, err := m.Kernel("empty_args", 0)
	if err != nil {
		t.Fatal(err)
	}
	a, err := rt.Alloc(0, 1024)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return k, []fleetjit.Arg{fleetjit.Mem(a), fleetjit.Mem(a), fleetjit.F32(2), fleetjit.I32(256)}, rt
}

// A launch of scalar and pointer arguments makes no Go allocation, on the
// default stream and on a stream of its own (issue 21).
func TestLaunchMakesNoGoAllocation(t *testing.T) {
	k, args, rt := fakeLaunchKernel(t)
	s, err := rt.NewStream(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, cfg := range []fleetjit.LaunchConfig{
		{Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{32, 1, 1}},
		{Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{32, 1, 1}, Stream: s},
	} {
		var lerr error
		allocs := testing.AllocsPerRun(1000, func() {
			if err := k.Launch(cfg, args...); err != nil {
				lerr = err
			}
		})
		if lerr != nil {
			t.Fatal(lerr)
		}
		if allocs != 0 {
			t.Errorf("stream %v: %v Go allocations per launch, want 0", cfg.Stream != nil, allocs)
		}
	}
}

// The allocation-free path still refuses bad input with an error: a wrong
// argument count or kind, a closed stream or module, a nil kernel; for 4,
// 6, 12 and 20 arguments (each way the arguments travel to C).
func TestLaunchRefusesBadInputOnTheFakeDriver(t *testing.T) {
	k, args, rt := fakeLaunchKernel(t)
	cfg := fleetjit.LaunchConfig{Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{32, 1, 1}}
	wantCode(t, k.Launch(cfg, args[:3]...), fleetjit.InvalidArgument)
	wantCode(t, k.Launch(cfg, args[0], args[1], fleetjit.F64(2), args[3]), fleetjit.InvalidArgument)
	wantCode(t, k.Launch(cfg, append(args, args...)...), fleetjit.InvalidArgument)
	s, err := rt.NewStream(0)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	wantCode(t, k.Launch(fleetjit.LaunchConfig{Stream: s}, args...), fleetjit.InvalidArgument)
	var nilKernel *fleetjit.Kernel
	wantCode(t, nilKernel.Launch(cfg, args...), fleetjit.InvalidArgument)

	// Kernels of 6, 12 and 20 parameters: the 8- and 16-entry arrays, and
	// past the 16 the Go side passes by value (C memory).
	var src strings.Builder
	for _, n := range []int{6, 12, 20} {
		var params []string
		for i := 0; i < n; i++ {
			params = append(params, fmt.Sprintf("int p%d", i))
		}
		fmt.Fprintf(&src, "extern \"C\" __global__ void k%d(%s) {}\n", n, strings.Join(params, ", "))
	}
	m, err := rt.Build(&fleetjit.BuildOptions{Source: src.String(), Name: "many.cu"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for _, n := range []int{6, 12, 20} {
		km, err := m.Kernel(fmt.Sprintf("k%d", n), 0)
		if err != nil {
			t.Fatal(err)
		}
		many := make([]fleetjit.Arg, n)
		for i := range many {
			many[i] = fleetjit.I32(int32(-i))
		}
		if err := km.Launch(cfg, many...); err != nil {
			t.Fatalf("%d arguments: %v", n, err)
		}
		wantCode(t, km.Launch(cfg, many[:n-1]...), fleetjit.InvalidArgument)
		many[n-1] = fleetjit.I64(1)
		wantCode(t, km.Launch(cfg, many...), fleetjit.InvalidArgument)
		if n == 20 {
			m.Close()
			wantCode(t, km.Launch(cfg, many...), fleetjit.InvalidArgument)
		}
	}
}

// go test -bench Launch -benchmem: the binding's host cost per launch over
// the fake driver.
func BenchmarkLaunch(b *testing.B) {
	k, args, _ := fakeLaunchKernel(b)
	cfg := fleetjit.LaunchConfig{Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{32, 1, 1}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := k.Launch(cfg, args...); err != nil {
			b.Fatal(err)
		}
	}
}
