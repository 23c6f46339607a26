package fleetjit_test

import (
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"fleetjit.dev/fleetjit"
)

// A launch racing the Close of its module, its stream or its runtime
// returns nil or an InvalidArgument error, never crashes, and every launch
// after the Close gives the closed error. The C ABI leaves a destroy racing
// a call on the same handle to the caller (rule 4 of <fleetjit/fleetjit.h>:
// fj_module_destroy frees the KernelRef an fj_launch in flight reads), so
// this is the binding's runtime lock at work. Run it with -race too.
func TestLaunchRacingClose(t *testing.T) {
	drv := fakeDriver()
	if drv == "" {
		t.Skip("no libfj_fake_cuda.so (set FJ_FAKE_CUDA or FLEETJIT_LIB_DIR to the built library's folder)")
	}
	cache := t.TempDir()
	const launchers, rounds = 4, 8
	for _, target := range []string{"Module", "Stream", "Runtime"} {
		target := target
		t.Run(target, func(t *testing.T) {
			for round := 0; round < rounds; round++ {
				raceOneClose(t, drv, cache, target, launchers)
			}
		})
	}
}

func raceOneClose(t *testing.T, drv, cache, target string, launchers int) {
	t.Helper()
	rt, err := fleetjit.NewRuntime(&fleetjit.RuntimeOptions{LibcudaPath: drv, CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if n, _ := rt.DeviceCount(); n == 0 {
		t.Skipf("the fake driver %s reports no device (%s); FLEETJIT_LIBCUDA in the environment wins over LibcudaPath", drv, rt.DriverError())
	}
	m, err := rt.Build(&fleetjit.BuildOptions{
		Source: `extern "C" __global__ void empty_args(float* a, const float* b, float c, int n) {}`,
		Name:   "empty_args.cu",
	})
	if err != nil {
		var e *fleetjit.Error
		if errors.As(err, &e) && e.Code == fleetjit.Unavailable {
			t.Skipf("no NVRTC: %v", err)
		}
		t.Fatal(err)
	}
	defer m.Close()
	k, err := m.Kernel("empty_args", 0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := rt.NewStream(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, err := rt.Alloc(0, 1024)
	if err != nil {
		t.Fatal(err)
	}
	// The address, not Mem(a): the allocation is freed with the runtime.
	addr := a.Address()
	args := []fleetjit.Arg{fleetjit.Ptr(addr), fleetjit.Ptr(addr), fleetjit.F32(2), fleetjit.I32(256)}
	cfg := fleetjit.LaunchConfig{Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{32, 1, 1}, Stream: s}
	closeIt := map[string]func() error{"Module": m.Close, "Stream": s.Close, "Runtime": rt.Close}[target]
	wantClosed := map[string]string{"Module": "use of a closed Module", "Stream": "use of a closed Stream",
		"Runtime": "use of a closed Module"}[target]

	var launched atomic.Int64 // successful launches, all goroutines
	var closed atomic.Bool
	errs := make(chan error, launchers)
	var wg sync.WaitGroup
	for g := 0; g < launchers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				after := closed.Load() // Close had returned before this launch began
				err := k.Launch(cfg, args...)
				if err == nil {
					if after {
						errs <- errors.New("a launch after Close succeeded")
						return
					}
					launched.Add(1)
					continue
				}
				if fleetjit.CodeOf(err) != fleetjit.InvalidArgument {
					errs <- err
					return
				}
				if after {
					if !strings.Contains(err.Error(), wantClosed) {
						errs <- errors.New("after Close: " + err.Error() + "; want " + wantClosed)
					}
					return
				}
			}
		}()
	}
	// Close once the launchers are running (or have all stopped on errors).
	for start := time.Now(); launched.Load() < int64(10*launchers) && time.Since(start) < 10*time.Second; {
		runtime.Gosched()
	}
	if err := closeIt(); err != nil {
		t.Errorf("%s.Close: %v", target, err)
	}
	closed.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("%s closed under launches: %v", target, err)
	}
	if err := k.Launch(cfg, args...); err == nil || !strings.Contains(err.Error(), wantClosed) {
		t.Errorf("a launch after %s.Close: %v, want %q", target, err, wantClosed)
	}
}
