package fleetjit_test

// What an adversarial review of the package found, each fixed and held
// here: zero values are the zero-value InvalidArgument error (no panic, not
// "closed"), DeviceMemory.Address is read under the runtime's lock and is 0
// once the runtime is closed, another runtime's Stream is refused before
// its handle is read, and Tune passes C128, by-value and tensor arguments
// as Launch does. Run the race tests with go test -race as well.

import (
	"strings"
	"sync"
	"testing"

	"fleetjit.dev/fleetjit"
)

// wantMessage fails unless err is an InvalidArgument *Error whose message
// contains want.
func wantMessage(t *testing.T, what string, err error, want string) {
	t.Helper()
	e := wantCode(t, err, fleetjit.InvalidArgument)
	if e != nil && !strings.Contains(e.Message, want) {
		t.Errorf("%s: %q, want it to say %q", what, e.Message, want)
	}
}

const zeroValue = "use of a nil or zero-value "

func TestZeroValuesAreZeroValueErrorsNotPanics(t *testing.T) {
	// Neither DeviceMemory has a runtime: the documented error, no panic.
	wantMessage(t, "CopyDeviceToDevice of two zero values",
		fleetjit.CopyDeviceToDevice(&fleetjit.DeviceMemory{}, &fleetjit.DeviceMemory{}), zeroValue+"DeviceMemory")
	// A zero-value Runtime was never opened: not "closed".
	_, err := (&fleetjit.Runtime{}).DeviceCount()
	wantMessage(t, "zero-value Runtime", err, zeroValue+"Runtime")
	wantMessage(t, "zero-value Runtime's copy", (&fleetjit.Runtime{}).Copy(nil, nil), zeroValue+"Runtime")
	closed, err := fleetjit.NewRuntime(&fleetjit.RuntimeOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	_, err = closed.DeviceCount()
	wantMessage(t, "closed Runtime", err, "use of a closed Runtime")
	// A zero-value Stream given to a call: zero value, not "closed".
	rt := newRuntime(t)
	wantMessage(t, "Copy on a zero-value Stream", rt.Copy(nil, &fleetjit.Stream{}), zeroValue+"Stream")
	wantMessage(t, "Prefetch on a zero-value Stream", rt.Prefetch(nil, &fleetjit.Stream{}), zeroValue+"Stream")
}

func TestZeroValueStreamAndMemoryOnTheFakeDriver(t *testing.T) {
	k, args, rt := fakeLaunchKernel(t)
	cfg := fleetjit.LaunchConfig{Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{32, 1, 1}, Stream: &fleetjit.Stream{}}
	wantMessage(t, "Launch on a zero-value Stream", k.Launch(cfg, args...), zeroValue+"Stream")
	y, err := fleetjit.Upload(rt, 0, []float32{1, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	wantMessage(t, "CopyDeviceToDevice from a zero value",
		fleetjit.CopyDeviceToDevice(y, &fleetjit.DeviceMemory{}), zeroValue+"DeviceMemory")
	wantMessage(t, "CopyDeviceToDevice into a zero value",
		fleetjit.CopyDeviceToDevice(&fleetjit.DeviceMemory{}, y), zeroValue+"DeviceMemory")
}

// Address and Size race Close without a data race (go test -race), and the
// address of memory of a closed runtime is 0, not the freed address.
func TestDeviceMemoryAddressIsSafeWithCloseAndZeroOnceClosed(t *testing.T) {
	rt := fakeRuntime(t)
	for i := 0; i < 20; i++ {
		d, err := rt.Alloc(0, 64)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				if a := d.Address(); a != 0 && d.Size() != 64 {
					t.Errorf("address %#x of %d bytes", a, d.Size())
				}
			}
		}()
		go func() { defer wg.Done(); d.Close() }()
		wg.Wait()
		if d.Address() != 0 {
			t.Fatalf("Address after Close: %#x", d.Address())
		}
	}
	other := fakeRuntime(t)
	d, err := other.Alloc(0, 64)
	if err != nil {
		t.Fatal(err)
	}
	if d.Address() == 0 {
		t.Fatal("a live allocation's address is 0")
	}
	other.Close()
	if a := d.Address(); a != 0 {
		t.Errorf("Address after its runtime's Close: %#x, want 0", a)
	}
	if d.Size() != 64 {
		t.Errorf("Size after its runtime's Close: %d, want 64", d.Size())
	}
}

// A stream of another runtime is refused by the binding, before its handle
// is read: also when that runtime is closed (its streams' handles are then
// freed, which the library would have been handed), and while another
// goroutine closes the stream (go test -race: s.h is written under the
// other runtime's lock, not the one the call holds).
func TestAnotherRuntimesStreamIsRefusedBeforeItsHandleIsRead(t *testing.T) {
	k, args, rt := fakeLaunchKernel(t)
	mod := buildOrSkip(t, rt, &fleetjit.BuildOptions{
		Source: "__device__ unsigned int table[4];\nextern \"C\" __global__ void touch() { table[0] += 1; }",
		Output: fleetjit.OutputPTX, Name: "table.cu",
	})
	const another = "stream belongs to another runtime"
	calls := func(s *fleetjit.Stream) map[string]error {
		cfg := fleetjit.LaunchConfig{Grid: [3]uint32{1, 1, 1}, Block: [3]uint32{32, 1, 1}, Stream: s}
		buf := make([]byte, 4)
		return map[string]error{
			"Launch":      k.Launch(cfg, args...),
			"Copy":        rt.Copy(nil, s),
			"Prefetch":    rt.Prefetch(nil, s),
			"WriteGlobal": mod.WriteGlobal("table", 0, 0, buf, s),
			"ReadGlobal":  mod.ReadGlobal("table", 0, 0, buf, s),
		}
	}
	own, err := rt.NewStream(0)
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	for name, err := range calls(own) {
		if err != nil {
			t.Errorf("%s on its own runtime's stream: %v", name, err)
		}
	}
	rt2 := fakeRuntime(t)
	for i := 0; i < 10; i++ {
		s, err := rt2.NewStream(0)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); s.Close() }()
		for name, err := range calls(s) {
			wantMessage(t, name+" on another runtime's stream", err, another)
		}
		wg.Wait()
	}
	s, err := rt2.NewStream(0)
	if err != nil {
		t.Fatal(err)
	}
	rt2.Close()
	for name, err := range calls(s) {
		wantMessage(t, name+" on a closed runtime's stream", err, another)
	}
}

// Tune passes C128, by-value bytes and tensor arguments as Launch does:
// every candidate runs (the fake driver checks each launch's parameters),
// none gets a NULL pointer for them.
func TestTunePassesC128BytesAndTensorArgumentsAsLaunchDoes(t *testing.T) {
	rt := fakeRuntime(t)
	const src = `#include <fleetjit/copy.cuh>
extern "C" __global__ void cz(double2 z, double* y) { y[0] = z.x + z.y; }
extern "C" __global__ void tz(const __grid_constant__ fj::tensor_param t, float* y) {}`
	buildOrSkip(t, rt, &fleetjit.BuildOptions{Source: src, Name: "tune_args.cu"})
	y, err := fleetjit.Upload(rt, 0, make([]float64, 4))
	if err != nil {
		t.Fatal(err)
	}
	defer y.Close()
	tensor := &fleetjit.TensorArg{Tensor: fleetjit.CUDATensor(y.Address(), 0, fleetjit.Float32, 4), OOB: fleetjit.OOBZeros}
	z := make([]byte, 16) // a double2 by value: 1 + 2i
	copy(z[6:], []byte{0xf0, 0x3f})
	copy(z[14:], []byte{0x00, 0x40})
	for _, c := range []struct {
		name, kernel string
		arg          fleetjit.Arg
	}{
		{"C128", "cz", fleetjit.C128(complex(1, 2))},
		{"Bytes", "cz", fleetjit.Bytes(z)},
		{"TensorArgOf", "tz", fleetjit.TensorArgOf(tensor)},
	} {
		res, err := rt.Tune(&fleetjit.TuneOptions{
			Build: fleetjit.BuildOptions{Source: src, Name: "tune_args.cu"}, Kernel: c.kernel,
			Args:    []fleetjit.Arg{c.arg, fleetjit.Mem(y)},
			Outputs: []fleetjit.TuneBuffer{{Address: y.Address(), Bytes: 32}},
			Shapes:  []fleetjit.TuneShape{{Block: [3]uint32{1}}, {Block: [3]uint32{32}}},
			Grid:    [3]uint32{1, 1, 1}, Retune: true, NoStore: true,
		})
		if err != nil {
			t.Errorf("Tune with %s: %v", c.name, err)
			continue
		}
		for _, row := range res.Rows {
			if row.Status != "ok" {
				t.Errorf("Tune with %s: candidate %+v", c.name, row)
			}
		}
	}
	// A tensor argument the binding refuses is named as Launch names it.
	_, err = rt.Tune(&fleetjit.TuneOptions{
		Build: fleetjit.BuildOptions{Source: src}, Kernel: "tz",
		Args:    []fleetjit.Arg{fleetjit.TensorArgOf(nil), fleetjit.Mem(y)},
		Outputs: []fleetjit.TuneBuffer{{Address: y.Address(), Bytes: 32}},
		Shapes:  []fleetjit.TuneShape{{Block: [3]uint32{1}}}, Grid: [3]uint32{1, 1, 1},
	})
	wantMessage(t, "Tune with a nil TensorArg", err, "argument 0: nil TensorArg or Tensor")
}
