package fleetjit

import (
	"strings"
	"testing"
	"unsafe"
)

const tuneSource = `extern "C" __global__ void fill(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = TILE;
}`

func tuneOptions() *TuneOptions {
	return &TuneOptions{
		Build:       BuildOptions{Source: tuneSource, Name: "fill.cu"},
		Kernel:      "fill",
		MacroSets:   []string{"-DTILE=1", "-DTILE=2"},
		Shapes:      []TuneShape{{Block: [3]uint32{64}}, {Block: [3]uint32{128}}},
		GridExtent:  [3]uint64{4096},
		GridDivisor: [3]string{"block.x"},
		Args:        []Arg{Ptr(0x1000), I32(4096)},
		Outputs:     []TuneBuffer{{Address: 0x1000, Bytes: 4096 * 4}},
	}
}

func TestTuneRefusesBadSpaces(t *testing.T) {
	rt, err := NewRuntime(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	cases := []struct {
		field  string
		change func(o *TuneOptions)
	}{
		{"num_shapes", func(o *TuneOptions) { o.Shapes = nil }},
		{"shapes[1]", func(o *TuneOptions) { o.Shapes[1] = o.Shapes[0] }},
		{"macro_sets[1]", func(o *TuneOptions) { o.MacroSets[1] = " -DTILE=1 " }},
		{"check_fn", func(o *TuneOptions) { o.Outputs = nil }},
		{"output_bytes[0]", func(o *TuneOptions) { o.Outputs[0].Bytes = 0 }},
		{"kernel", func(o *TuneOptions) { o.Kernel = "" }},
	}
	for _, c := range cases {
		o := tuneOptions()
		c.change(o)
		_, err := rt.Tune(o)
		if CodeOf(err) != InvalidArgument || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: got %v, want INVALID_ARGUMENT naming it", c.field, err)
		}
	}
	if _, err := rt.Tune(nil); CodeOf(err) != InvalidArgument {
		t.Errorf("nil options: %v", err)
	}
	if n, _ := rt.DeviceCount(); n == 0 {
		_, err := rt.Tune(tuneOptions())
		if err == nil || CodeOf(err) == Internal {
			t.Errorf("without a GPU: %v", err)
		}
	}
}

func TestTuneStatusNames(t *testing.T) {
	if TuneStatusName(0) != "ok" || TuneStatusName(3) != "wrong_output" || TuneStatusName(42) != "unknown" {
		t.Errorf("names: %q %q %q", TuneStatusName(0), TuneStatusName(3), TuneStatusName(42))
	}
}

// Tune converts its base build as Build does (BuildOptions.toC): an
// embedded NUL is refused with Build's own error, before any C call, and
// the include folders reach fj_tune.
func TestTuneBuildOptionsAsBuild(t *testing.T) {
	rt, err := NewRuntime(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	cases := []struct {
		what   string
		change func(b *BuildOptions)
	}{
		{"the source", func(b *BuildOptions) { b.Source += "\x00junk" }},
		{"the build name", func(b *BuildOptions) { b.Name = "fill\x00.cu" }},
		{"the target", func(b *BuildOptions) { b.Target = "sm_90\x00" }},
		{"an NVRTC option", func(b *BuildOptions) { b.NVRTCOptions = []string{"-DX=1\x00-DY"} }},
		{"a name expression", func(b *BuildOptions) { b.NameExpressions = []string{"fill\x00"} }},
		{"an include folder", func(b *BuildOptions) { b.IncludeDirs = []string{"/tmp\x00/x"} }},
	}
	for _, c := range cases {
		o := tuneOptions()
		c.change(&o.Build)
		_, err := rt.Tune(o)
		if CodeOf(err) != InvalidArgument || !strings.Contains(err.Error(), c.what+" has an embedded NUL") {
			t.Errorf("%s: got %v, want INVALID_ARGUMENT naming it", c.what, err)
			continue
		}
		_, berr := rt.Build(&o.Build)
		if berr == nil || berr.Error() != err.Error() {
			t.Errorf("%s: Tune says %v, Build says %v", c.what, err, berr)
		}
	}
	// The tune's own strings.
	for _, c := range []struct {
		what   string
		change func(o *TuneOptions)
	}{
		{"the kernel name", func(o *TuneOptions) { o.Kernel = "fill\x00" }},
		{"a macro set", func(o *TuneOptions) { o.MacroSets[1] = "-DTILE=2\x00-DX" }},
		{"a grid divisor", func(o *TuneOptions) { o.GridDivisor[0] = "block.x\x00" }},
	} {
		o := tuneOptions()
		c.change(o)
		if _, err := rt.Tune(o); CodeOf(err) != InvalidArgument || !strings.Contains(err.Error(), c.what+" has an embedded NUL") {
			t.Errorf("%s: got %v, want INVALID_ARGUMENT naming it", c.what, err)
		}
	}
	// Include folders reach the C struct...
	o := tuneOptions()
	dirs := []string{t.TempDir(), "/usr/include"}
	o.Build.IncludeDirs = dirs
	var m cmem
	defer m.free()
	c, err := o.toC(&m)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range unsafe.Slice(c.build.include_dirs, int(c.build.num_include_dirs)) {
		got = append(got, string(unsafe.Slice((*byte)(unsafe.Pointer(s.data)), int(s.size))))
	}
	if strings.Join(got, "|") != strings.Join(dirs, "|") {
		t.Errorf("include_dirs in fj_build_options: %q, want %q", got, dirs)
	}
	// ...and fj_tune reads them: an empty folder is refused by the library,
	// naming it (before any device is needed), where a dropped list would
	// get the device's error instead.
	o.Build.IncludeDirs = []string{t.TempDir(), ""}
	if _, err := rt.Tune(o); CodeOf(err) != InvalidArgument || !strings.Contains(err.Error(), "include_dirs[1]") {
		t.Errorf("an empty include folder: got %v, want INVALID_ARGUMENT naming include_dirs[1]", err)
	}
}
