// Which instruction of spark's kernels compute-sanitizer's racecheck cannot handle: one tiny
// kernel per suspect, run as `racecheck_probe MODE` under `compute-sanitizer --tool racecheck`.
//   zfill16  cp.async.cg 16 bytes with a src-size register of 0 (zero-fill, nothing read)
//   full16   the same with src-size 16
//   gdc      griddepcontrol.wait / launch_dependents
#include <cstdio>
#include <cstring>

__global__ void probe(const float4* g, float4* out, unsigned src_bytes, int gdc) {
  __shared__ float4 s[128];
  if (gdc) {
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  }
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(&s[threadIdx.x]));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(g + threadIdx.x), "r"(src_bytes)
               : "memory");
  asm volatile("cp.async.commit_group;\n" ::: "memory");
  asm volatile("cp.async.wait_all;\n" ::: "memory");
  __syncthreads();
  out[threadIdx.x] = s[127 - threadIdx.x];
}

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "zfill16";
  float4 *g = nullptr, *out = nullptr;
  cudaMalloc(&g, 128 * sizeof(float4));
  cudaMalloc(&out, 128 * sizeof(float4));
  cudaMemset(g, 0, 128 * sizeof(float4));
  const unsigned bytes = std::strcmp(mode, "zfill16") == 0 ? 0 : 16;
  probe<<<1, 128>>>(g, out, bytes, std::strcmp(mode, "gdc") == 0);
  const cudaError_t e = cudaDeviceSynchronize();
  std::printf("%s: %s\n", mode, cudaGetErrorString(e));
  return e == cudaSuccess ? 0 : 1;
}
