// saxpy: the smallest fleetjit kernel, in both linkages.
//
// 1. `saxpy` has C linkage: look it up by its plain name.
// 2. `axpy<T>` is a template: name the instantiation at build time
//    ("axpy<float>") and look it up by that expression.
// Arguments: (y: T*, x: const T*, a: T, n: int); y[i] = a * x[i] + y[i].

extern "C" __global__ void saxpy(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}

template <typename T>
__global__ void axpy(T* y, const T* x, T a, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += gridDim.x * blockDim.x) {
    y[i] = a * x[i] + y[i];
  }
}
