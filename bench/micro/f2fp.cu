// Throughput of the conversions the e4m3 epilogue uses (cvt.rn.bf16x2.f32 and
// cvt.rn.satfinite.e4m3x2.f32) against LOP3 and FMUL, in thread instructions per clock per
// SM, with eight independent chains per thread and eight 256-thread CTAs per SM.
// Build and run on the GPU machine: nvcc -O3 -arch=sm_90a f2fp.cu -o f2fp && ./f2fp
// (the e4m3 loop also spends a shift and an XOR per conversion to chain its 16-bit result).
#include <cstdio>

#include <cuda_runtime.h>

template <int kOp>
__global__ void chains(unsigned* out, int iters) {
  unsigned a[8];
  for (int i = 0; i < 8; ++i) a[i] = threadIdx.x * 0x9e3779b9u + i;
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const unsigned b = a[(i + 1) % 8];
      if (kOp == 0)
        asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(a[i]) : "f"(__uint_as_float(a[i])), "f"(__uint_as_float(b)));
      if (kOp == 1) {
        unsigned short t;
        asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(t) : "f"(__uint_as_float(a[i])), "f"(__uint_as_float(b)));
        a[i] = t ^ (a[i] << 3);
      }
      if (kOp == 2) asm volatile("lop3.b32 %0, %0, %1, 0x5a, 0x96;" : "+r"(a[i]) : "r"(b));
      if (kOp == 3) asm volatile("mul.rn.f32 %0, %0, %1;" : "+r"(a[i]) : "r"(b));
    }
  }
  unsigned s = 0;
  for (int i = 0; i < 8; ++i) s ^= a[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <int kOp>
void run(const char* name, unsigned* d, int sms) {
  int khz = 0;
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
  const int blocks = sms * 8, threads = 256, iters = 4096;
  chains<kOp><<<blocks, threads>>>(d, 16);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaEventRecord(e0);
  chains<kOp><<<blocks, threads>>>(d, iters);
  cudaEventRecord(e1);
  cudaEventSynchronize(e1);
  float ms = 0;
  cudaEventElapsedTime(&ms, e0, e1);
  const double ops = double(blocks) * threads * iters * 8;
  std::printf("%-10s %.3f ms  %.1f thread-instr/clk/SM (at %d MHz max clock)\n", name, ms,
              ops / sms / (ms * 1e-3 * khz * 1e3), khz / 1000);
}

int main() {
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  unsigned* d = nullptr;
  if (cudaMalloc(&d, size_t(sms) * 8 * 256 * 4) != cudaSuccess) return 1;
  run<0>("f2fp.bf16", d, sms);
  run<1>("f2fp.e4m3", d, sms);
  run<2>("lop3", d, sms);
  run<3>("fmul", d, sms);
  return 0;
}
