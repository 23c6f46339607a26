package fleetjit_test

import (
	"fmt"
	"log"

	"fleetjit.dev/fleetjit"
)

const src = `extern "C" __global__ void saxpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i] + y[i]; }`

// The README's Go example (compiled by go test, run only by hand: it needs
// a GPU).
func Example() {
	rt, err := fleetjit.NewRuntime(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close()
	m, err := rt.Build(&fleetjit.BuildOptions{Source: src, Name: "saxpy.cu"}) // for GPU 0
	if err != nil {
		log.Fatal(err) // a *fleetjit.Error; its BuildLog holds NVRTC's log
	}
	defer m.Close()
	x, _ := fleetjit.Upload(rt, 0, []float32{1, 2, 3, 4})
	y, _ := fleetjit.Upload(rt, 0, []float32{10, 20, 30, 40})
	k, _ := m.Kernel("saxpy", 0)
	if err := k.Launch(fleetjit.Linear(4, 256), fleetjit.Mem(y), fleetjit.Mem(x), fleetjit.F32(2), fleetjit.I32(4)); err != nil {
		log.Fatal(err)
	}
	out := make([]float32, 4)
	err = fleetjit.CopyFromDevice(out, y) // synchronous: ordered after the launch
	fmt.Println(out, err)                 // [12 24 36 48] <nil>
}
