package fleetjit_test

import (
	"bytes"
	"errors"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"fleetjit.dev/fleetjit"
)

// The corpus kernel (examples/saxpy.cu: saxpy and the axpy<T> template),
// read from the source tree: ../../examples from this package's folder (go
// test's working directory), or $FJ_EXAMPLES_DIR (the staged runner
// sets it).
var saxpy = readCorpus("saxpy.cu")

func readCorpus(name string) string {
	dir := os.Getenv("FJ_EXAMPLES_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "examples")
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		panic("the kernel corpus: " + err.Error() + " (set FJ_EXAMPLES_DIR to the repository's examples/)")
	}
	return string(b)
}

// newRuntime makes a runtime with its own disk cache under t.TempDir().
func newRuntime(t *testing.T) *fleetjit.Runtime {
	t.Helper()
	rt, err := fleetjit.NewRuntime(&fleetjit.RuntimeOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	})
	return rt
}

func wantCode(t *testing.T, err error, codes ...fleetjit.Code) *fleetjit.Error {
	t.Helper()
	var e *fleetjit.Error
	if !errors.As(err, &e) {
		t.Fatalf("want a *fleetjit.Error with code %v, got %v", codes, err)
	}
	for _, c := range codes {
		if e.Code == c {
			return e
		}
	}
	t.Fatalf("want code %v, got %v", codes, e)
	return nil
}

func TestVersionMajorMatchesLoadedLibrary(t *testing.T) {
	major, minor := fleetjit.Version()
	if major != fleetjit.ExpectedMajor {
		t.Fatalf("loaded libfleetjit %d.%d, package expects major %d", major, minor, fleetjit.ExpectedMajor)
	}
	if err := fleetjit.CheckVersion(); err != nil {
		t.Fatal(err)
	}
	t.Logf("libfleetjit %d.%d", major, minor)
}

func TestCodesAreTheLibrarysNames(t *testing.T) {
	named := map[fleetjit.Code]string{
		fleetjit.OK: "OK", fleetjit.InvalidArgument: "INVALID_ARGUMENT",
		fleetjit.NotFound: "NOT_FOUND", fleetjit.Unavailable: "UNAVAILABLE",
		fleetjit.FailedPrecondition: "FAILED_PRECONDITION",
		fleetjit.BuildError: "BUILD_ERROR", fleetjit.CudaError: "CUDA_ERROR",
		fleetjit.ResourceExhausted: "RESOURCE_EXHAUSTED",
		fleetjit.OutOfRange: "OUT_OF_RANGE", fleetjit.Internal: "INTERNAL",
		fleetjit.DeadlineExceeded: "DEADLINE_EXCEEDED",
	}
	for code, name := range named {
		if got := code.String(); got != name {
			t.Errorf("code %d is %q, want %q", int(code), got, name)
		}
	}
	if got := fleetjit.Code(len(named)).String(); got != "UNKNOWN" {
		t.Errorf("code %d past the last is %q, want UNKNOWN", len(named), got)
	}
}

func TestDeviceReport(t *testing.T) {
	rt := newRuntime(t)
	n, err := rt.DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d device(s); driver error: %q", n, rt.DriverError())
	if n == 0 {
		_, err := rt.DeviceInfo(0)
		e := wantCode(t, err, fleetjit.Unavailable, fleetjit.NotFound)
		if e.Message == "" {
			t.Error("empty message")
		}
		return
	}
	for i := 0; i < n; i++ {
		d, err := rt.DeviceInfo(i)
		if err != nil {
			t.Fatal(err)
		}
		if d.Ordinal != i || d.CCMajor < 5 || d.SMCount <= 0 || d.Plan.CopyImpl == fleetjit.CopyAuto {
			t.Errorf("implausible device info %+v", d)
		}
		t.Logf("device %d: %s sm_%d%d plan %v", i, d.Name, d.CCMajor, d.CCMinor, d.Plan.CopyImpl)
	}
	_, err = rt.DeviceInfo(n + 7)
	wantCode(t, err, fleetjit.NotFound, fleetjit.InvalidArgument)
}

func TestBuildForNamedTargetWithoutGPU(t *testing.T) {
	rt := newRuntime(t)
	m, err := rt.Build(&fleetjit.BuildOptions{Source: saxpy, Name: "saxpy.cu", Target: "sm_90"})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	info, err := m.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Target != "sm_90" || info.Output != fleetjit.OutputCubin || info.CopyImpl == fleetjit.CopyAuto ||
		info.CacheResult != fleetjit.CacheCompiled || info.BuildMs <= 0 {
		t.Errorf("unexpected module info %+v", info)
	}
	img, err := m.Image()
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(img)) != info.ImageBytes || !bytes.HasPrefix(img, []byte("\x7fELF")) {
		t.Errorf("image: %d bytes (info says %d), prefix %q", len(img), info.ImageBytes, img[:4])
	}
	t.Logf("sm_90 cubin: %d bytes, %v, built in %.1f ms", len(img), info.CopyImpl, info.BuildMs)

	p, err := rt.Build(&fleetjit.BuildOptions{Source: saxpy, Target: "compute_90", NameExpressions: []string{"axpy<float>"}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	pi, _ := p.Info()
	ptx, _ := p.Image()
	if pi.Output != fleetjit.OutputPTX || !strings.Contains(string(ptx), ".entry saxpy") || !strings.Contains(string(ptx), ".target sm_90") {
		t.Errorf("PTX build: %+v\n%s", pi, ptx)
	}

	if n, _ := rt.DeviceCount(); n == 0 {
		_, err := m.Kernel("saxpy", 0)
		wantCode(t, err, fleetjit.Unavailable)
	}
}

func TestCacheStatistics(t *testing.T) {
	dir := t.TempDir()
	rt, err := fleetjit.NewRuntime(&fleetjit.RuntimeOptions{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	opts := &fleetjit.BuildOptions{Source: saxpy, Name: "saxpy.cu", Target: "sm_90"}
	if s, err := rt.CacheStats(); err != nil || s.Compiles != 0 {
		t.Fatalf("fresh stats %+v, %v", s, err)
	}
	results := []fleetjit.CacheResult{}
	for i := 0; i < 2; i++ {
		m, err := rt.Build(opts)
		if err != nil {
			t.Fatal(err)
		}
		info, _ := m.Info()
		results = append(results, info.CacheResult)
		m.Close()
	}
	if results[0] != fleetjit.CacheCompiled || results[1] != fleetjit.CacheMemoryHit {
		t.Errorf("cache results %v", results)
	}
	s, err := rt.CacheStats()
	if err != nil {
		t.Fatal(err)
	}
	if s.Compiles != 1 || s.MemoryHits < 1 || s.Misses < 1 || s.CompileMsTotal <= 0 {
		t.Errorf("stats %+v", s)
	}
	noCache := *opts
	noCache.NoCache = true
	m, err := rt.Build(&noCache)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := m.Info(); info.CacheResult != fleetjit.CacheCompiled {
		t.Errorf("NoCache build came from %v", info.CacheResult)
	}
	m.Close()
	if err := rt.ClearCache(); err != nil {
		t.Fatal(err)
	}
	m, err = rt.Build(opts)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := m.Info(); info.CacheResult == fleetjit.CacheMemoryHit {
		t.Error("memory hit after ClearCache")
	}
	m.Close()
	s, _ = rt.CacheStats()
	t.Logf("%+v", s)
}

// Disk entries are written in the background and flushed when the runtime
// is closed; a later runtime on the same directory reads them.
func TestDiskCacheOutlivesTheRuntime(t *testing.T) {
	dir := t.TempDir()
	opts := &fleetjit.BuildOptions{Source: saxpy, Name: "saxpy.cu", Target: "sm_90"}
	results := []fleetjit.CacheResult{}
	images := [][]byte{}
	for i := 0; i < 2; i++ {
		rt, err := fleetjit.NewRuntime(&fleetjit.RuntimeOptions{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		m, err := rt.Build(opts)
		if err != nil {
			t.Fatal(err)
		}
		info, _ := m.Info()
		img, _ := m.Image()
		results, images = append(results, info.CacheResult), append(images, img)
		if i == 1 {
			if s, _ := rt.CacheStats(); s.DiskHits != 1 || s.Compiles != 0 {
				t.Errorf("second runtime stats %+v", s)
			}
		}
		if err := rt.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if results[0] != fleetjit.CacheCompiled || results[1] != fleetjit.CacheDiskHit || !bytes.Equal(images[0], images[1]) {
		t.Errorf("cache results %v, images equal %v", results, bytes.Equal(images[0], images[1]))
	}
}

func TestCompileErrorCarriesBuildLog(t *testing.T) {
	rt := newRuntime(t)
	_, err := rt.Build(&fleetjit.BuildOptions{Source: "__global__ void broken() { undeclared_thing; }", Name: "broken.cu", Target: "sm_90"})
	e := wantCode(t, err, fleetjit.BuildError)
	if !strings.Contains(e.BuildLog, "undeclared_thing") || !strings.Contains(e.BuildLog, "broken.cu") {
		t.Errorf("build log: %q", e.BuildLog)
	}
	if e.Details["target"] != "sm_90" {
		t.Errorf("details %v", e.Details)
	}
	if !strings.Contains(err.Error(), "BUILD_ERROR") || fleetjit.CodeOf(err) != fleetjit.BuildError {
		t.Errorf("Error() = %q", err.Error())
	}
}

func TestBadInputIsAnErrorNotACrash(t *testing.T) {
	rt := newRuntime(t)
	_, err := rt.Build(&fleetjit.BuildOptions{Source: saxpy, Target: "sm_xx"})
	if e := wantCode(t, err, fleetjit.InvalidArgument); !strings.Contains(e.Message, "sm_xx") {
		t.Errorf("message %q", e.Message)
	}
	_, err = rt.Build(&fleetjit.BuildOptions{Source: saxpy, Target: "sm_90", CopyImpl: 99})
	wantCode(t, err, fleetjit.InvalidArgument)
	_, err = rt.Build(nil)
	wantCode(t, err, fleetjit.InvalidArgument)

	_, err = fleetjit.CopyPlanFor("not_a_target", fleetjit.CopyAuto)
	wantCode(t, err, fleetjit.InvalidArgument)
	_, err = fleetjit.CopyPlanFor("sm_80", fleetjit.CopyTMA)
	wantCode(t, err, fleetjit.FailedPrecondition)
	plan, err := fleetjit.CopyPlanFor("sm_90", fleetjit.CopyAuto)
	if err != nil || plan.Target != "sm_90" || len(plan.Support) != 10 {
		t.Errorf("plan %+v, %v", plan, err)
	}

	if n, _ := rt.DeviceCount(); n == 0 {
		_, err = rt.Alloc(0, 64)
		wantCode(t, err, fleetjit.Unavailable)
		_, err = rt.NewStream(0)
		wantCode(t, err, fleetjit.Unavailable)
	} else {
		d, err := rt.Alloc(0, 16)
		if err != nil {
			t.Fatal(err)
		}
		wantCode(t, fleetjit.CopyToDevice(d, []float32{1, 2, 3}), fleetjit.InvalidArgument)
		d.Close()
	}

	// Use after Close: an error, for the handle and for what it owned.
	rt2, err := fleetjit.NewRuntime(&fleetjit.RuntimeOptions{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	m, err := rt2.Build(&fleetjit.BuildOptions{Source: saxpy, Target: "sm_90"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt2.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = m.Info()
	wantCode(t, err, fleetjit.InvalidArgument)
	_, err = rt2.DeviceCount()
	wantCode(t, err, fleetjit.InvalidArgument)
	if err := m.Close(); err != nil {
		t.Errorf("closing a module of a closed runtime: %v", err)
	}
	if err := rt2.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestConcurrentBuildsAndFinalizers(t *testing.T) {
	rt := newRuntime(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			// Not closed on purpose: the finalizer is the safety net.
			m, err := rt.Build(&fleetjit.BuildOptions{Source: saxpy, Name: "saxpy.cu", Target: "sm_90"})
			if err == nil {
				_, err = m.Image()
			}
			errs <- err
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for i := 0; i < 3; i++ {
		runtimeGC()
	}
	if s, _ := rt.CacheStats(); s.Compiles < 1 {
		t.Errorf("stats %+v", s)
	}
}

func TestGPUSaxpyBuildLaunchVerify(t *testing.T) {
	rt := newRuntime(t)
	n, err := rt.DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Skipf("the runtime reports 0 CUDA devices (%s)", rt.DriverError())
	}
	const count = 1 << 20
	const a = float32(2.5)
	rng := rand.New(rand.NewSource(1))
	x := make([]float32, count)
	y := make([]float32, count)
	want := make([]float32, count)
	for i := range x {
		x[i], y[i] = rng.Float32()*2-1, rng.Float32()*2-1
		want[i] = a*x[i] + y[i]
	}
	check := func(got []float32) {
		t.Helper()
		for i := range got {
			if math.Abs(float64(got[i]-want[i])) > 1e-5*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("element %d: got %v, want %v", i, got[i], want[i])
			}
		}
	}
	m, err := rt.Build(&fleetjit.BuildOptions{Source: saxpy, Name: "saxpy.cu", NameExpressions: []string{"axpy<float>"}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	info, _ := m.Info()
	t.Logf("built for %s (%v)", info.Target, info.CopyImpl)
	dx, err := fleetjit.Upload(rt, 0, x)
	if err != nil {
		t.Fatal(err)
	}
	defer dx.Close()
	dy, err := fleetjit.Upload(rt, 0, y)
	if err != nil {
		t.Fatal(err)
	}
	defer dy.Close()

	k, err := m.Kernel("saxpy", 0)
	if err != nil {
		t.Fatal(err)
	}
	if ki, err := k.Info(); err != nil || ki.NumParams != 4 {
		t.Fatalf("kernel info %+v, %v", ki, err)
	}
	if err := k.Launch(fleetjit.Linear(count, 256), fleetjit.Mem(dy), fleetjit.Mem(dx), fleetjit.F32(a), fleetjit.I32(count)); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, count)
	if err := fleetjit.CopyFromDevice(got, dy); err != nil { // ordered after the launch
		t.Fatal(err)
	}
	check(got)

	// The template instantiation, on a stream.
	if err := fleetjit.CopyToDevice(dy, y); err != nil {
		t.Fatal(err)
	}
	s, err := rt.NewStream(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	kt, err := m.Kernel("axpy<float>", 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fleetjit.LaunchConfig{Grid: [3]uint32{132}, Block: [3]uint32{256}, Stream: s}
	if err := kt.Launch(cfg, fleetjit.Mem(dy), fleetjit.Mem(dx), fleetjit.F32(a), fleetjit.I32(count)); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := fleetjit.CopyFromDevice(got, dy); err != nil {
		t.Fatal(err)
	}
	check(got)

	// A mismatched argument list is refused before the driver is called.
	wantCode(t, k.Launch(fleetjit.Linear(count, 256), fleetjit.F32(a)), fleetjit.InvalidArgument)
}
