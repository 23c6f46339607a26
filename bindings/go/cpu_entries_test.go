package fleetjit_test

// The 1.1 entries through the Go binding on the CPU (builds for the named
// target sm_90; device calls return Unavailable without a GPU, checked as
// such), and issue 21's bad-input table: each bad call is an *Error with
// the library's message, never a panic or a crash, and the runtime keeps
// working after it.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"fleetjit.dev/fleetjit"
)

func fresh() int64 { return time.Now().UnixNano() ^ int64(os.Getpid())<<40 }

func TestAsyncBuildWaitTakeMatchesBlockingBuild(t *testing.T) {
	rt := newRuntime(t)
	opts := &fleetjit.BuildOptions{Source: saxpy, Name: "saxpy_async.cu", Target: "sm_90",
		NVRTCOptions: []string{fmt.Sprintf("-DFJ_FRESH=%d", fresh())}}
	b, err := rt.BuildAsync(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	select {
	case <-b.Done():
	case <-ctx.Done():
		t.Fatal("the build did not finish in 2 minutes")
	}
	if done, err := b.Poll(); err != nil || !done {
		t.Fatalf("Poll after Done: %v, %v", done, err)
	}
	m, err := b.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = b.Take()
	if e := wantCode(t, err, fleetjit.FailedPrecondition); e.Message == "" {
		t.Fatal("second Take: empty message")
	}
	blocking, err := rt.Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer blocking.Close()
	a, _ := m.Image()
	c, _ := blocking.Image()
	if len(a) == 0 || !bytes.Equal(a, c) {
		t.Fatalf("async image (%d bytes) differs from the blocking one (%d)", len(a), len(c))
	}
}

func TestAsyncBuildErrorAndDeadline(t *testing.T) {
	rt := newRuntime(t)
	n := fresh()
	broken := fmt.Sprintf(`extern "C" __global__ void k%d() { undeclared_%d(); }`, n, n)
	b, err := rt.BuildAsync(&fleetjit.BuildOptions{Source: broken, Name: "broken.cu", Target: "sm_90"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Wait(context.Background())
	e := wantCode(t, err, fleetjit.BuildError)
	if !strings.Contains(e.BuildLog, fmt.Sprintf("undeclared_%d", n)) {
		t.Fatalf("build log lacks the undeclared name: %q", e.BuildLog)
	}
	b.Close()
	// A context already past its deadline returns its error; the build goes on.
	slow, err := rt.BuildAsync(&fleetjit.BuildOptions{Source: saxpy, Target: "sm_90",
		NVRTCOptions: []string{fmt.Sprintf("-DFJ_FRESH=%d", n+1)}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := slow.Wait(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait past the deadline: %v", err)
	}
	// Closing with the build in flight is clean; using it after is an error.
	if err := slow.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = slow.Poll()
	wantCode(t, err, fleetjit.InvalidArgument)
	<-slow.Done()
}

func TestIncludeDirsReachTheBuild(t *testing.T) {
	rt := newRuntime(t)
	n := uint64(fresh()) % 1000000007
	inc := t.TempDir()
	if err := os.WriteFile(filepath.Join(inc, "fj_value.h"), []byte(fmt.Sprintf("#define FJ_VALUE %dull\n", n)), 0o644); err != nil {
		t.Fatal(err)
	}
	src := "#include \"fj_value.h\"\nextern \"C\" __global__ void k(unsigned long long* y) { *y = FJ_VALUE; }\n"
	m, err := rt.Build(&fleetjit.BuildOptions{Source: src, Target: "compute_90", Output: fleetjit.OutputPTX, IncludeDirs: []string{inc}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ptx, _ := m.Image()
	if !bytes.Contains(ptx, []byte(fmt.Sprint(n))) {
		t.Fatalf("the header's value %d is not in the PTX", n)
	}
	_, err = rt.Build(&fleetjit.BuildOptions{Source: src, Target: "compute_90", Output: fleetjit.OutputPTX})
	if err == nil || !strings.Contains(err.Error(), "fj_value.h") {
		t.Fatalf("without the folder: %v", err)
	}
	dirs, err := rt.IncludeDirs()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if d.Path == "" || d.Origin == "" {
			t.Fatalf("include dir %+v", d)
		}
	}
}

func TestLoadModuleAndFlush(t *testing.T) {
	rt := newRuntime(t)
	m, err := rt.Build(&fleetjit.BuildOptions{Source: saxpy, Target: "compute_90", Output: fleetjit.OutputPTX,
		NVRTCOptions: []string{fmt.Sprintf("-DFJ_FRESH=%d", fresh())}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	img, _ := m.Image()
	l, err := rt.LoadModule(&fleetjit.LoadOptions{Image: img, Kind: fleetjit.ImagePTX, Name: "saxpy.ptx"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got, _ := l.Image()
	info, _ := l.Info()
	if !bytes.Equal(got, img) || info.Target != "compute_90" {
		t.Fatalf("loaded module: %d bytes, target %q", len(got), info.Target)
	}
	_, err = rt.LoadModule(&fleetjit.LoadOptions{Image: []byte("\x7fELF garbage")})
	wantCode(t, err, fleetjit.InvalidArgument)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := rt.FlushCache(ctx); err != nil {
		t.Fatal(err)
	}
	// No remote tier configured: its state says so and its counters are 0.
	st, err := rt.CacheStats()
	if err != nil {
		t.Fatal(err)
	}
	if st.RemoteState != fleetjit.RemoteOff || st.RemoteHits != 0 || st.RemoteWrites != 0 {
		t.Fatalf("remote tier without a URL: %+v", st)
	}
}

func TestLogCallbackFromAnyThread(t *testing.T) {
	cache := t.TempDir()
	opts := &fleetjit.BuildOptions{Source: saxpy, Target: "sm_90", NVRTCOptions: []string{fmt.Sprintf("-DFJ_FRESH=%d", fresh())}}
	rt, err := fleetjit.NewRuntime(&fleetjit.RuntimeOptions{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := rt.Build(opts); err != nil {
		t.Fatal(err)
	} else {
		m.Close()
	}
	if err := rt.FlushCache(context.Background()); err != nil {
		t.Fatal(err)
	}
	rt.Close()
	// Corrupt every cache file: the next runtime refuses the entry (a
	// line at warn) and rebuilds.
	files := 0
	filepath.Walk(cache, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && os.WriteFile(p, []byte("not a fleetjit cache entry"), 0o644) == nil {
			files++
		}
		return nil
	})
	if files == 0 {
		t.Fatal("the build wrote no cache file")
	}
	var mu sync.Mutex
	var lines []string
	rt, err = fleetjit.NewRuntime(&fleetjit.RuntimeOptions{CacheDir: cache, LogLevel: fleetjit.LogInfo,
		Log: func(level fleetjit.LogLevel, line string) {
			mu.Lock()
			lines = append(lines, level.String()+": "+line)
			mu.Unlock()
			panic("a panicking callback is recovered, never unwinds into C")
		}})
	if err != nil {
		t.Fatal(err)
	}
	// Builds from several goroutines at once.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if m, err := rt.Build(opts); err != nil {
				t.Error(err)
			} else {
				m.Close()
			}
		}()
	}
	wg.Wait()
	rt.Close()
	mu.Lock()
	defer mu.Unlock()
	warned := false
	for _, l := range lines {
		if strings.HasPrefix(l, "warn: ") && strings.Contains(l, "cache") {
			warned = true
		}
		if strings.HasSuffix(l, "\n") {
			t.Fatalf("line with a newline: %q", l)
		}
	}
	if !warned {
		t.Fatalf("no warn line about the refused entry in %q", lines)
	}
}

// badCall is one row of the bad-input table.
type badCall struct {
	name  string
	call  func() error
	codes []fleetjit.Code // any of these; empty = any *Error
}

func TestBadInputTable(t *testing.T) {
	rt := newRuntime(t)
	n, err := rt.DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	gpu := n > 0
	inv := []fleetjit.Code{fleetjit.InvalidArgument}
	dev := []fleetjit.Code{fleetjit.Unavailable}
	if gpu {
		dev = nil
	}
	anyOf := func(c ...fleetjit.Code) []fleetjit.Code { return c }
	mod, err := rt.Build(&fleetjit.BuildOptions{Source: saxpy, Target: "sm_90"})
	if err != nil {
		t.Fatal(err)
	}
	closedMod, _ := rt.Build(&fleetjit.BuildOptions{Source: saxpy, Target: "sm_90"})
	closedMod.Close()
	closedRt, _ := fleetjit.NewRuntime(&fleetjit.RuntimeOptions{CacheDir: t.TempDir()})
	closedRtMod, err := closedRt.Build(&fleetjit.BuildOptions{Source: saxpy, Target: "sm_90"})
	if err != nil {
		t.Fatal(err)
	}
	closedRt.Close()
	shape := []int64{4, 4}
	a := fleetjit.CUDATensor(0x1000, 0, fleetjit.Float32, shape...)
	b := fleetjit.CUDATensor(0x2000, 0, fleetjit.Int32, shape...)
	c := fleetjit.CUDATensor(0x3000, 0, fleetjit.Float32, shape...)
	build := func(o fleetjit.BuildOptions) func() error {
		return func() error { m, err := rt.Build(&o); m.Close(); return err }
	}
	link := func(edit func(o *fleetjit.LinkOptions)) func() error {
		o := fleetjit.LinkOptions{Target: "sm_90", Inputs: []fleetjit.LinkInput{{Kind: fleetjit.LinkSource, Name: "saxpy.cu", Data: []byte(saxpy)}}}
		edit(&o)
		return func() error { m, err := rt.Link(&o); m.Close(); return err }
	}
	rows := []badCall{
		{"NUL in the source", build(fleetjit.BuildOptions{Source: "__global__ void k(){}\x00junk", Target: "sm_90"}), inv},
		{"NUL in a name expression", build(fleetjit.BuildOptions{Source: saxpy, Target: "sm_90", NameExpressions: []string{"axpy<float>\x00"}}), inv},
		{"NUL in an NVRTC option", build(fleetjit.BuildOptions{Source: saxpy, Target: "sm_90", NVRTCOptions: []string{"-DX=1\x00-DY"}}), inv},
		{"NUL in an async build", func() error {
			_, err := rt.BuildAsync(&fleetjit.BuildOptions{Source: "\x00", Target: "sm_90"})
			return err
		}, inv},
		{"NUL in a runtime option", func() error {
			_, err := fleetjit.NewRuntime(&fleetjit.RuntimeOptions{TargetOverride: "sm_90\x00"})
			return err
		}, inv},
		{"NUL in a link name", link(func(o *fleetjit.LinkOptions) { o.Name = "link\x00junk" }), inv},
		{"NUL in a link target", link(func(o *fleetjit.LinkOptions) { o.Target = "sm_90\x00" }), inv},
		{"NUL in a link option", link(func(o *fleetjit.LinkOptions) { o.LinkOptions = []string{"-O3\x00-g"} }), inv},
		{"NUL in a link include folder", link(func(o *fleetjit.LinkOptions) { o.IncludeDirs = []string{"/tmp\x00/x"} }), inv},
		{"NUL in a link input's name", link(func(o *fleetjit.LinkOptions) { o.Inputs[0].Name = "saxpy\x00.cu" }), inv},
		{"NUL in a link input's NVRTC option", link(func(o *fleetjit.LinkOptions) { o.Inputs[0].NVRTCOptions = []string{"-DX=1\x00-DY"} }), inv},
		{"NUL in a link input's name expression", link(func(o *fleetjit.LinkOptions) { o.Inputs[0].NameExpressions = []string{"axpy<float>\x00"} }), inv},
		{"unknown copy impl", build(fleetjit.BuildOptions{Source: saxpy, Target: "sm_90", CopyImpl: 77}), inv},
		{"unknown output", build(fleetjit.BuildOptions{Source: saxpy, Target: "sm_90", Output: 9}), inv},
		{"unknown output, async", func() error {
			_, err := rt.BuildAsync(&fleetjit.BuildOptions{Source: saxpy, Target: "sm_90", Output: 9})
			return err
		}, inv},
		{"malformed target", build(fleetjit.BuildOptions{Source: saxpy, Target: "sm_9x"}), inv},
		{"nil build options", func() error { _, err := rt.Build(nil); return err }, inv},
		{"nil async build options", func() error { _, err := rt.BuildAsync(nil); return err }, inv},
		{"unknown image kind", func() error {
			_, err := rt.LoadModule(&fleetjit.LoadOptions{Image: []byte("// ptx"), Kind: 42})
			return err
		}, inv},
		{"empty image", func() error { _, err := rt.LoadModule(&fleetjit.LoadOptions{}); return err }, inv},
		{"nil load options", func() error { _, err := rt.LoadModule(nil); return err }, inv},
		{"unknown log level", func() error {
			_, err := fleetjit.NewRuntime(&fleetjit.RuntimeOptions{Log: func(fleetjit.LogLevel, string) {}, LogLevel: 99})
			return err
		}, inv},
		{"kernel name with a NUL", func() error { _, err := mod.Kernel("saxpy\x00", 0); return err }, inv},
		{"unknown kernel name", func() error { _, err := mod.Kernel("no_such_kernel", 0); return err }, anyOf(fleetjit.NotFound, fleetjit.Unavailable)},
		{"ordinal past int32", func() error { _, err := mod.Kernel("saxpy", 1<<40); return err }, inv},
		{"negative ordinal", func() error { _, err := rt.DeviceInfo(-1); return err }, anyOf(fleetjit.NotFound, fleetjit.InvalidArgument, fleetjit.Unavailable)},
		{"huge alloc", func() error { _, err := rt.Alloc(0, math.MaxUint64); return err }, append(anyOf(fleetjit.ResourceExhausted, fleetjit.InvalidArgument, fleetjit.OutOfRange), dev...)},
		{"build past int32 ordinal", build(fleetjit.BuildOptions{Source: saxpy, Target: "sm_90", Device: 1 << 40}), inv},
		{"async build past int32 ordinal", func() error {
			_, err := rt.BuildAsync(&fleetjit.BuildOptions{Source: saxpy, Target: "sm_90", Device: 1 << 40})
			return err
		}, inv},
		{"link past int32 ordinal", link(func(o *fleetjit.LinkOptions) { o.Device = 1 << 40 }), inv},
		{"tune past int32 ordinal", func() error {
			_, err := rt.Tune(&fleetjit.TuneOptions{Build: fleetjit.BuildOptions{Source: saxpy, Device: 1 << 40}, Kernel: "saxpy",
				Shapes: []fleetjit.TuneShape{{Block: [3]uint32{128}}}, Outputs: []fleetjit.TuneBuffer{{Address: 0x1000, Bytes: 64}}})
			return err
		}, inv},
		{"wrapped stream past int32 ordinal", func() error { _, err := rt.WrapStream(1<<40, 0); return err }, inv},
		{"alloc past int32 ordinal", func() error { _, err := rt.Alloc(math.MaxInt32+1, 16); return err }, inv},
		{"stream on a bad device", func() error { _, err := rt.NewStream(1 << 20); return err }, anyOf(fleetjit.NotFound, fleetjit.InvalidArgument, fleetjit.Unavailable)},
		{"copy between dtypes", func() error { return rt.Copy([]fleetjit.CopyDesc{{Src: a, Dst: b}}, nil) }, inv},
		{"copy with an unknown oob", func() error { return rt.Copy([]fleetjit.CopyDesc{{Src: a, Dst: c, OOB: 12}}, nil) }, inv},
		{"copy onto itself", func() error { return rt.Copy([]fleetjit.CopyDesc{{Src: a, Dst: a}}, nil) }, inv},
		{"copy with a nil tensor", func() error { return rt.Copy([]fleetjit.CopyDesc{{Src: a}}, nil) }, inv},
		{"copy of a 6-D tensor", func() error {
			t6 := fleetjit.CUDATensor(0x1000, 0, fleetjit.Float32, 1, 1, 1, 1, 1, 1)
			return rt.Copy([]fleetjit.CopyDesc{{Src: t6, Dst: t6}}, nil)
		}, inv},
		{"copy of a negative shape", func() error {
			return rt.Copy([]fleetjit.CopyDesc{{Src: fleetjit.CUDATensor(0x1000, 0, fleetjit.Float32, -4, 4), Dst: a}}, nil)
		}, inv},
		{"strides of another rank", func() error {
			s := *a
			s.Strides = []int64{1}
			return rt.Copy([]fleetjit.CopyDesc{{Src: &s, Dst: c}}, nil)
		}, inv},
		{"prefetch with an unknown mode", func() error {
			return rt.Prefetch([]fleetjit.PrefetchDesc{{Address: 0x1000, Bytes: 64, Mode: 9, ReaderDevice: -1}}, nil)
		}, inv},
		{"prefetch with a huge reader", func() error {
			return rt.Prefetch([]fleetjit.PrefetchDesc{{Address: 0x1000, Bytes: 64, ReaderDevice: 1 << 40}}, nil)
		}, inv},
		{"copy from a tensor of a device past int32", func() error {
			return rt.Copy([]fleetjit.CopyDesc{{Src: fleetjit.CUDATensor(0x1000, 1<<32, fleetjit.Float32, shape...), Dst: c}}, nil)
		}, inv},
		{"copy into a tensor of a device below int32", func() error {
			return rt.Copy([]fleetjit.CopyDesc{{Src: a, Dst: fleetjit.CUDATensor(0x3000, -1<<32, fleetjit.Float32, shape...)}}, nil)
		}, inv},
		{"gather index of a device past int32", func() error {
			idx := fleetjit.CUDATensor(0x4000, 1<<32, fleetjit.Int32, 4)
			return rt.Copy([]fleetjit.CopyDesc{{Src: a, Dst: c, GatherIndex: idx}}, nil)
		}, inv},
		{"prefetch of a tensor of a device past int32", func() error {
			return rt.Prefetch([]fleetjit.PrefetchDesc{{Tensor: fleetjit.CUDATensor(0x1000, 1<<32, fleetjit.Float32, shape...), ReaderDevice: -1}}, nil)
		}, inv},
		{"tensor check of a tensor of a device past int32", func() error {
			_, err := fleetjit.TensorCheck(&fleetjit.TensorArg{Tensor: fleetjit.CUDATensor(0x1000, 1<<33, fleetjit.Float32, shape...)})
			return err
		}, inv},
		{"peer query of bad devices", func() error { _, err := rt.PeerQuery(-3, 1<<30); return err }, anyOf(fleetjit.NotFound, fleetjit.InvalidArgument, fleetjit.Unavailable)},
		{"peer enable past int32", func() error { return rt.PeerEnable(0, 1<<33) }, inv},
		{"peer disable of bad devices", func() error { return rt.PeerDisable(99, 0) }, anyOf(fleetjit.NotFound, fleetjit.InvalidArgument, fleetjit.Unavailable)},
		// No forged-CUstream row: the driver dereferences a stream handle, so
		// a forged pointer is undefined behaviour (the header says so).
		{"tensor check of a 3-D box on a 2-D tensor", func() error {
			_, err := fleetjit.TensorCheck(&fleetjit.TensorArg{Tensor: a, Box: [5]uint32{2, 2, 2}})
			return err
		}, inv},
		{"tensor check of nil", func() error { _, err := fleetjit.TensorCheck(nil); return err }, inv},
		{"closed module used again", func() error { _, err := closedMod.Info(); return err }, inv},
		{"closed module's kernel", func() error { _, err := closedMod.Kernel("saxpy", 0); return err }, inv},
		{"closed runtime used again", func() error {
			_, err := closedRt.Build(&fleetjit.BuildOptions{Source: saxpy, Target: "sm_90"})
			return err
		}, inv},
		{"closed runtime's flush", func() error { return closedRt.FlushCache(context.Background()) }, inv},
		{"closed runtime's copy", func() error { return closedRt.Copy([]fleetjit.CopyDesc{{Src: a, Dst: c}}, nil) }, inv},
		{"nil runtime", func() error { var r *fleetjit.Runtime; _, err := r.DeviceCount(); return err }, inv},
		{"nil runtime's link", func() error {
			var r *fleetjit.Runtime
			_, err := r.Link(&fleetjit.LinkOptions{Target: "sm_90"})
			return err
		}, inv},
		{"nil runtime's tune", func() error { var r *fleetjit.Runtime; _, err := r.Tune(&fleetjit.TuneOptions{}); return err }, inv},
		{"nil runtime's load", func() error {
			var r *fleetjit.Runtime
			_, err := r.LoadModule(&fleetjit.LoadOptions{Image: []byte("// ptx")})
			return err
		}, inv},
		{"zero-value module", func() error { _, err := (&fleetjit.Module{}).Image(); return err }, inv},
		{"zero-value kernel launch", func() error { return (&fleetjit.Kernel{}).Launch(fleetjit.Linear(1, 1)) }, inv},
		{"zero-value stream", func() error { return (&fleetjit.Stream{}).Synchronize() }, inv},
		{"zero-value build", func() error { _, err := (&fleetjit.Build{}).Take(); return err }, inv},
		{"zero-value memory fill", func() error { return (&fleetjit.DeviceMemory{}).Fill(1) }, inv},
		{"device-to-device of nil", func() error { return fleetjit.CopyDeviceToDevice(nil, nil) }, inv},
		{"global name with a NUL", func() error { _, err := mod.Global("counter\x00junk", 0); return err }, inv},
		{"global write name with a NUL", func() error { return mod.WriteGlobal("c\x00", 0, 0, make([]byte, 4), nil) }, inv},
		{"global read name with a NUL", func() error { return mod.ReadGlobal("c\x00", 0, 0, make([]byte, 4), nil) }, inv},
		{"global past int32 ordinal", func() error { _, err := mod.Global("counter", 1<<40); return err }, inv},
		{"global write past int32 ordinal", func() error { return mod.WriteGlobal("c", 1<<40, 0, make([]byte, 4), nil) }, inv},
		{"global read past int32 ordinal", func() error { return mod.ReadGlobal("c", 1<<40, 0, make([]byte, 4), nil) }, inv},
		{"priority range past int32 ordinal", func() error { _, _, err := rt.StreamPriorityRange(1 << 40); return err }, inv},
		{"priority stream past int32 ordinal", func() error { _, err := rt.NewStreamWithPriority(1<<40, 0); return err }, inv},
		{"priority stream past int32 priority", func() error { _, err := rt.NewStreamWithPriority(0, 1<<40); return err }, inv},
		{"persisting L2 past int32 ordinal", func() error { _, err := rt.SetPersistingL2(1<<40, 1<<20); return err }, inv},
	}
	// Every method of the ABI 1.3 entries (globals_and_attributes.go) and of Kernel on
	// a nil, a zero-value and a closed handle: InvalidArgument, no panic.
	var nilMod *fleetjit.Module
	for _, h := range []struct {
		what string
		m    *fleetjit.Module
	}{{"nil module", nilMod}, {"zero-value module", &fleetjit.Module{}}, {"closed module", closedMod}} {
		m := h.m
		rows = append(rows,
			badCall{h.what + "'s global", func() error { _, err := m.Global("counter", 0); return err }, inv},
			badCall{h.what + "'s global write", func() error { return m.WriteGlobal("counter", 0, 0, make([]byte, 4), nil) }, inv},
			badCall{h.what + "'s global read", func() error { return m.ReadGlobal("counter", 0, 0, make([]byte, 4), nil) }, inv},
			badCall{h.what + "'s build log", func() error { _, err := m.BuildLog(); return err }, inv},
		)
	}
	var nilKernel *fleetjit.Kernel
	for _, h := range []struct {
		what string
		k    *fleetjit.Kernel
	}{
		{"nil kernel", nilKernel}, {"zero-value kernel", &fleetjit.Kernel{}},
		{"closed module's kernel", fleetjit.KernelOfModuleForTest(closedMod)},
		{"closed runtime's kernel", fleetjit.KernelOfModuleForTest(closedRtMod)},
	} {
		k := h.k
		rows = append(rows,
			badCall{h.what + " info", func() error { _, err := k.Info(); return err }, inv},
			badCall{h.what + " launch", func() error { return k.Launch(fleetjit.Linear(1, 1)) }, inv},
			badCall{h.what + " attributes", func() error { _, err := k.Attributes(); return err }, inv},
			badCall{h.what + " set attribute", func() error { return k.SetAttribute(fleetjit.AttrPreferredCarveout, 50) }, inv},
			badCall{h.what + " occupancy", func() error { _, err := k.Occupancy(128, 0); return err }, inv},
			badCall{h.what + " suggest block", func() error { _, _, err := k.SuggestBlock(0); return err }, inv},
		)
	}
	var nilRt *fleetjit.Runtime
	for _, h := range []struct {
		what string
		r    *fleetjit.Runtime
	}{{"nil runtime", nilRt}, {"zero-value runtime", &fleetjit.Runtime{}}, {"closed runtime", closedRt}} {
		r := h.r
		rows = append(rows,
			badCall{h.what + "'s priority range", func() error { _, _, err := r.StreamPriorityRange(0); return err }, inv},
			badCall{h.what + "'s priority stream", func() error { _, err := r.NewStreamWithPriority(0, 0); return err }, inv},
			badCall{h.what + "'s persisting L2", func() error { _, err := r.SetPersistingL2(0, 1<<20); return err }, inv},
		)
	}
	for _, r := range rows {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: panicked: %v", r.name, p)
				}
			}()
			err := r.call()
			if err == nil {
				t.Errorf("%s: accepted", r.name)
				return
			}
			var e *fleetjit.Error
			if !errors.As(err, &e) || e.Message == "" {
				t.Errorf("%s: not a *fleetjit.Error with a message: %v", r.name, err)
				return
			}
			ok := len(r.codes) == 0
			for _, c := range r.codes {
				ok = ok || e.Code == c
			}
			if !ok {
				t.Errorf("%s: %v, want one of %v", r.name, e, r.codes)
				return
			}
			t.Logf("%s: %v", r.name, e)
		}()
	}
	// The runtime still works after all of it.
	m, err := rt.Build(&fleetjit.BuildOptions{Source: saxpy, Target: "sm_90"})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	mod.Close()
}

// TestCUDATensorDevicePastInt32 checks that CUDATensor's device, which it
// cannot refuse itself, is refused where the tensor is used, naming the
// ordinal, and that setting DeviceID again clears it.
func TestCUDATensorDevicePastInt32(t *testing.T) {
	tensor := fleetjit.CUDATensor(0x1000, 1<<32+1, fleetjit.Float32, 4, 4)
	_, err := fleetjit.TensorCheck(&fleetjit.TensorArg{Tensor: tensor})
	var e *fleetjit.Error
	if !errors.As(err, &e) || e.Code != fleetjit.InvalidArgument || !strings.Contains(e.Message, "4294967297") {
		t.Fatalf("TensorCheck of a tensor of device 1<<32+1: %v, want InvalidArgument naming the ordinal", err)
	}
	tensor.DeviceID = 0
	if _, err := fleetjit.TensorCheck(&fleetjit.TensorArg{Tensor: tensor}); err != nil {
		t.Fatalf("TensorCheck after DeviceID = 0: %v", err)
	}
	if _, err := fleetjit.TensorCheck(&fleetjit.TensorArg{Tensor: fleetjit.CUDATensor(0x1000, math.MaxInt32, fleetjit.Float32, 4, 4)}); err != nil {
		t.Fatalf("TensorCheck of a tensor of device MaxInt32: %v", err)
	}
}

// TestLinearDoesNotWrap checks that a thread count Linear cannot cover
// with a uint32 grid (or a negative one) gives a grid no device takes, so
// Launch refuses it (OutOfRange), instead of a wrapped grid that launches.
func TestLinearDoesNotWrap(t *testing.T) {
	for _, c := range []struct {
		n     int
		block uint32
		grid  uint32
	}{
		{1000, 256, 4}, {0, 256, 1}, {1, 0, 1},
		{math.MaxUint32 * 256, 256, math.MaxUint32},
		{1<<32 + 1, 1, math.MaxUint32},
		{1 << 40, 1, math.MaxUint32},
		{-1, 256, math.MaxUint32},
		{math.MinInt64, 1, math.MaxUint32},
	} {
		cfg := fleetjit.Linear(c.n, c.block)
		if cfg.Grid != [3]uint32{c.grid, 1, 1} {
			t.Errorf("Linear(%d, %d).Grid = %v, want [%d 1 1]", c.n, c.block, cfg.Grid, c.grid)
		}
	}
}

// TestGPUCopyWindowAndGather runs fj_copy through the binding on a GPU: a
// window of a random 2-D source (partly outside it, zero-filled) and a
// gather of random rows, into poisoned outputs, against a host reference;
// then an async build for the live device, launched. Skips without a GPU.
func TestGPUCopyWindowAndGather(t *testing.T) {
	rt := newRuntime(t)
	if n, _ := rt.DeviceCount(); n == 0 {
		t.Skipf("the runtime reports 0 CUDA devices (%s)", rt.DriverError())
	}
	rng := rand.New(rand.NewSource(fresh()))
	const rows, cols = 64, 48
	src := make([]float32, rows*cols)
	for i := range src {
		src[i] = rng.Float32()*2 - 1
	}
	sd, err := fleetjit.Upload(rt, 0, src)
	if err != nil {
		t.Fatal(err)
	}
	defer sd.Close()
	const wr, wc = 20, 40
	const r0, c0 = 50, 17 // runs past the last row and column
	win, _ := rt.Alloc(0, wr*wc*4)
	defer win.Close()
	win.Fill(0xff) // NaN poison
	const g = 16
	idx := make([]int32, g)
	for i := range idx {
		idx[i] = int32(rng.Intn(rows + rows/8)) // some past the end: zeros
	}
	id, _ := fleetjit.Upload(rt, 0, idx)
	defer id.Close()
	gat, _ := rt.Alloc(0, g*cols*4)
	defer gat.Close()
	gat.Fill(0xff)
	ts := fleetjit.CUDATensor(sd.Address(), 0, fleetjit.Float32, rows, cols)
	s, err := rt.NewStream(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = rt.Copy([]fleetjit.CopyDesc{
		{Src: ts, Dst: fleetjit.CUDATensor(win.Address(), 0, fleetjit.Float32, wr, wc), SrcStart: [5]int64{r0, c0}, OOB: fleetjit.OOBZeros},
		{Src: ts, Dst: fleetjit.CUDATensor(gat.Address(), 0, fleetjit.Float32, g, cols), GatherIndex: fleetjit.CUDATensor(id.Address(), 0, fleetjit.Int32, g)},
	}, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	at := func(r, c int) float32 {
		if r < 0 || c < 0 || r >= rows || c >= cols {
			return 0
		}
		return src[r*cols+c]
	}
	got := make([]float32, wr*wc)
	fleetjit.CopyFromDevice(got, win)
	for i := 0; i < wr; i++ {
		for j := 0; j < wc; j++ {
			if math.Float32bits(got[i*wc+j]) != math.Float32bits(at(r0+i, c0+j)) {
				t.Fatalf("window [%d][%d] = %v, want %v", i, j, got[i*wc+j], at(r0+i, c0+j))
			}
		}
	}
	gg := make([]float32, g*cols)
	fleetjit.CopyFromDevice(gg, gat)
	for i, r := range idx {
		for j := 0; j < cols; j++ {
			if math.Float32bits(gg[i*cols+j]) != math.Float32bits(at(int(r), j)) {
				t.Fatalf("gather row %d (src row %d) col %d = %v, want %v", i, r, j, gg[i*cols+j], at(int(r), j))
			}
		}
	}
	b, err := rt.BuildAsync(&fleetjit.BuildOptions{Source: saxpy, NVRTCOptions: []string{fmt.Sprintf("-DFJ_FRESH=%d", fresh())}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, err := b.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	k, err := m.Kernel("saxpy", 0)
	if err != nil {
		t.Fatal(err)
	}
	const n = 4096
	x := make([]float32, n)
	y0 := make([]float32, n)
	for i := range x {
		x[i], y0[i] = rng.Float32()*2-1, rng.Float32()*2-1
	}
	xd, _ := fleetjit.Upload(rt, 0, x)
	yd, _ := fleetjit.Upload(rt, 0, y0)
	defer xd.Close()
	defer yd.Close()
	if err := k.Launch(fleetjit.Linear(n, 128), fleetjit.Mem(yd), fleetjit.Mem(xd), fleetjit.F32(1.5), fleetjit.I32(n)); err != nil {
		t.Fatal(err)
	}
	y := make([]float32, n)
	fleetjit.CopyFromDevice(y, yd)
	for i := range y {
		want := 1.5*x[i] + y0[i]
		if d := y[i] - want; d > 1e-5*(1+abs32(want)) || -d > 1e-5*(1+abs32(want)) {
			t.Fatalf("saxpy[%d] = %v, want %v", i, y[i], want)
		}
	}
}

func abs32(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}
