package fleetjit

import (
	"strings"
	"testing"
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
