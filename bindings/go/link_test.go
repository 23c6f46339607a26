package fleetjit_test

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"fleetjit.dev/fleetjit"
)

const goLinkCaller = `extern "C" __device__ float fj_go_link_scale(float x);
extern "C" __global__ void go_scale_all(float* out, const float* in, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = fj_go_link_scale(in[i]);
}
`

func goLinkCallee(factor int) string {
	return fmt.Sprintf("extern \"C\" __device__ float fj_go_link_scale(float x) { return x * %d.0f; }\n", factor)
}

// Two sources linked for a named target (no GPU needed), then the cache.
func TestLinkTwoSourcesForANamedTarget(t *testing.T) {
	rt := newRuntime(t)
	defer rt.Close()
	factor := rand.Intn(1000000) + 2
	opts := &fleetjit.LinkOptions{
		Inputs: []fleetjit.LinkInput{
			{Kind: fleetjit.LinkSource, Name: "caller.cu", Data: []byte(goLinkCaller)},
			{Kind: fleetjit.LinkSource, Name: "callee.cu", Data: []byte(goLinkCallee(factor))},
		},
		Target: "sm_90",
	}
	for _, lto := range []bool{false, true} {
		opts.LTO = lto
		m, err := rt.Link(opts)
		if err != nil {
			t.Fatal(err)
		}
		info, err := m.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.Target != "sm_90" || info.Output != fleetjit.OutputCubin ||
			info.CacheResult != fleetjit.CacheCompiled {
			t.Fatalf("lto=%v: info %+v", lto, info)
		}
		image, err := m.Image()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(image, []byte("\x7fELF")) || !bytes.Contains(image, []byte("go_scale_all")) {
			t.Fatalf("lto=%v: the linked image is not a cubin with go_scale_all", lto)
		}
		again, err := rt.Link(opts)
		if err != nil {
			t.Fatal(err)
		}
		if info, _ := again.Info(); info.CacheResult != fleetjit.CacheMemoryHit {
			t.Fatalf("lto=%v: second link was %v, not a memory hit", lto, info.CacheResult)
		}
		m.Close()
		again.Close()
	}
}

func TestLinkErrors(t *testing.T) {
	rt := newRuntime(t)
	defer rt.Close()
	// An undefined symbol: nvJitLink's log in the error.
	_, err := rt.Link(&fleetjit.LinkOptions{
		Inputs: []fleetjit.LinkInput{{Kind: fleetjit.LinkSource, Data: []byte(goLinkCaller)}},
		Target: "sm_80",
	})
	var e *fleetjit.Error
	if fleetjit.CodeOf(err) != fleetjit.BuildError {
		t.Fatalf("undefined symbol: %v", err)
	}
	e = err.(*fleetjit.Error)
	if !strings.Contains(e.Details["link_log"], "fj_go_link_scale") {
		t.Fatalf("link_log lacks the symbol: %q", e.Details["link_log"])
	}
	cases := []struct {
		opts *fleetjit.LinkOptions
		says string
	}{
		{nil, "nil LinkOptions"},
		{&fleetjit.LinkOptions{Target: "sm_90"}, "inputs is NULL"},
		{&fleetjit.LinkOptions{Target: "sm_90", Inputs: []fleetjit.LinkInput{{Kind: fleetjit.LinkSource}}}, "data is NULL"},
		{&fleetjit.LinkOptions{Target: "sm_90", Inputs: []fleetjit.LinkInput{{Kind: 42, Data: []byte("x")}}}, "kind"},
		{&fleetjit.LinkOptions{Target: "sm_90", Inputs: []fleetjit.LinkInput{{Kind: fleetjit.LinkSource, Data: []byte("int a;\x00")}}}, "NUL byte"},
		{&fleetjit.LinkOptions{Target: "compute_90", Inputs: []fleetjit.LinkInput{{Kind: fleetjit.LinkSource, Data: []byte(goLinkCaller)}}}, "sm_XX"},
	}
	// Embedded NULs, refused by the binding naming the field; without them
	// the link works (nvJitLink, NVRTC and the driver read C strings).
	caller := fleetjit.LinkInput{Kind: fleetjit.LinkSource, Name: "caller.cu", Data: []byte(goLinkCaller)}
	callee := fleetjit.LinkInput{Kind: fleetjit.LinkSource, Name: "callee.cu", Data: []byte(goLinkCallee(3))}
	nul := func(edit func(o *fleetjit.LinkOptions)) *fleetjit.LinkOptions {
		o := &fleetjit.LinkOptions{Target: "sm_90", Inputs: []fleetjit.LinkInput{caller, callee}}
		edit(o)
		return o
	}
	cases = append(cases, []struct {
		opts *fleetjit.LinkOptions
		says string
	}{
		{nul(func(o *fleetjit.LinkOptions) { o.Name = "link\x00junk" }), "the link name has an embedded NUL at byte 4"},
		{nul(func(o *fleetjit.LinkOptions) { o.Target = "sm_90\x00" }), "the target has an embedded NUL"},
		{nul(func(o *fleetjit.LinkOptions) { o.LinkOptions = []string{"-O3", "-O3\x00-g"} }), "a link option has an embedded NUL"},
		{nul(func(o *fleetjit.LinkOptions) { o.IncludeDirs = []string{"/tmp\x00/x"} }), "an include folder has an embedded NUL"},
		{nul(func(o *fleetjit.LinkOptions) { o.Inputs[1].Name = "callee\x00.cu" }), "the name of input 1 has an embedded NUL"},
		{nul(func(o *fleetjit.LinkOptions) { o.Inputs[0].NVRTCOptions = []string{"-DX=1\x00-DY"} }), "an NVRTC option of input 0 has an embedded NUL"},
		{nul(func(o *fleetjit.LinkOptions) { o.Inputs[0].NameExpressions = []string{"go_scale_all\x00"} }), "a name expression of input 0 has an embedded NUL"},
	}...)
	for _, c := range cases {
		_, err := rt.Link(c.opts)
		if fleetjit.CodeOf(err) != fleetjit.InvalidArgument || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%q: got %v", c.says, err)
		}
	}
}
