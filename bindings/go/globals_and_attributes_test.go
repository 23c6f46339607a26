package fleetjit_test

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"fleetjit.dev/fleetjit"
)

// ABI 1.3 on a machine without a GPU: the build log (warnings, a memory
// hit returns it too), closed modules, and the device entries' errors.

func buildWarning(t *testing.T, rt *fleetjit.Runtime, salt int) *fleetjit.Module {
	t.Helper()
	src := fmt.Sprintf("__device__ int counter;\n"+
		"extern \"C\" __global__ void k(int* out) {\n  int unused_%d;\n  counter = %d;\n}\n", salt, salt%1000)
	m, err := rt.Build(&fleetjit.BuildOptions{Source: src, Name: "warn.cu", Target: "sm_90"})
	if fleetjit.CodeOf(err) == fleetjit.Unavailable {
		t.Skipf("no NVRTC: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBuildLogKeepsWarningsOnAHit(t *testing.T) {
	rt := newRuntime(t)
	defer rt.Close()
	salt := rand.Intn(1 << 30)
	m := buildWarning(t, rt, salt)
	log, err := m.BuildLog()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log, "warning") || !strings.Contains(log, fmt.Sprintf("unused_%d", salt)) {
		t.Fatalf("log lacks the warning: %q", log)
	}
	again := buildWarning(t, rt, salt)
	if info, _ := again.Info(); info.CacheResult != fleetjit.CacheMemoryHit {
		t.Fatalf("second build: %v, want a memory hit", info.CacheResult)
	}
	if log2, _ := again.BuildLog(); log2 != log {
		t.Fatalf("the hit's log differs: %q vs %q", log2, log)
	}
	m.Close()
	if _, err := m.BuildLog(); fleetjit.CodeOf(err) != fleetjit.InvalidArgument {
		t.Fatalf("closed module: %v", err)
	}
	if _, err := m.Global("counter", 0); fleetjit.CodeOf(err) != fleetjit.InvalidArgument {
		t.Fatalf("closed module: %v", err)
	}
	if err := m.WriteGlobal("counter", 0, 0, make([]byte, 4), nil); fleetjit.CodeOf(err) != fleetjit.InvalidArgument {
		t.Fatalf("closed module: %v", err)
	}
}

func TestDeviceEntriesWithoutAGPU(t *testing.T) {
	rt := newRuntime(t)
	defer rt.Close()
	if n, _ := rt.DeviceCount(); n > 0 {
		t.Skip("a GPU is present (globals_and_attributes_gpu_test covers it)")
	}
	if _, _, err := rt.StreamPriorityRange(0); fleetjit.CodeOf(err) != fleetjit.Unavailable {
		t.Fatalf("StreamPriorityRange: %v", err)
	}
	if _, err := rt.NewStreamWithPriority(0, 0); fleetjit.CodeOf(err) != fleetjit.Unavailable {
		t.Fatalf("NewStreamWithPriority: %v", err)
	}
	if _, err := rt.SetPersistingL2(0, 1<<20); fleetjit.CodeOf(err) != fleetjit.Unavailable {
		t.Fatalf("SetPersistingL2: %v", err)
	}
	m := buildWarning(t, rt, 1)
	defer m.Close()
	if _, err := m.Global("counter", 0); fleetjit.CodeOf(err) != fleetjit.Unavailable {
		t.Fatalf("Global: %v", err)
	}
	// Complex arguments are values; a launch needs a GPU.
	_ = fleetjit.C64(complex(1, 2))
	_ = fleetjit.C128(complex(3, 4))
	rt.Close()
	if _, _, err := rt.StreamPriorityRange(0); fleetjit.CodeOf(err) != fleetjit.InvalidArgument {
		t.Fatalf("closed runtime: %v", err)
	}
}
