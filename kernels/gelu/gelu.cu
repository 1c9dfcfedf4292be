// GELU, tanh approximation (Hendrycks & Gimpel 2016, arXiv:1606.08415):
//   gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// computed in fp32: with tanhf (no fast-math) for float32, as PyTorch's
// gelu(approximate="tanh") and Triton's libdevice tanh do; for bfloat16 and
// float16 through the identical x * sigmoid(2 inner) form with hardware
// exp2 and reciprocal (see gelu_sigmoid: its error is ~1000x below 16-bit rounding).
//
// Memory-bound: 2 * itemsize bytes per element. Each thread moves kUnroll
// 16-byte vectors (float4 or 8 x 16-bit), all loads issued before any math,
// so 64 bytes per thread are in flight; the grid is sized to cover the
// tensor exactly (one pass, no grid-stride loop). Unaligned base pointers use
// the same kernel with 1-element "vectors". With pdl (sm_90+), the kernel is a
// programmatic dependent launch: each block waits for the previous kernel of
// the stream (griddepcontrol.wait: its writes are then visible) and at once
// lets the next kernel launch (griddepcontrol.launch_dependents), so
// back-to-back launches overlap a launch and its block scheduling with the
// previous kernel's tail (CUDA C++ Programming Guide, "Programmatic Dependent
// Launch and Synchronization").
#include "common.cuh"

namespace fusebench {
namespace cuda {
namespace {

// Threads per block when the caller leaves it to the library (threads = -1); 128, 256 and 512
// are built (tuning: fusebench tune cuda). 128 (4096 16-bit or 2048 float32 elements a block)
// was ahead of 256 and 512 at every size and dtype measured (docs/tuning/gelu.md).
constexpr int kGeluThreadsDefault = 128;
constexpr int kUnroll = 4;
// Whether gelu() launches with PDL when the caller leaves it to the library (pdl = -1): a
// stream of calls overlaps each launch with the previous call's tail (docs/tuning/gelu.md).
constexpr bool kGeluPdlDefault = true;

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kCoeff = 0.044715f;

__device__ __forceinline__ float gelu_tanh(float x) {
  const float inner = kSqrt2OverPi * fmaf(kCoeff * x, x * x, x);
  return 0.5f * x * (1.f + tanhf(inner));
}

// The same function as x * sigmoid(2 inner) = x / (1 + 2^(-2 inner log2(e))), in seven fp32
// instructions: t = x^2; a = x (k + k c t) (k = -2 sqrt(2/pi) log2(e), c = 0.044715, one FMUL
// and one FFMA after t); e = 2^a with ex2.approx.ftz.f32 (MUFU.EX2, at most 2 ulp);
// r = 1 / (1 + e) with rcp.approx.ftz.f32 (MUFU.RCP, 1 ulp); x r (PTX ISA, "Floating Point
// Instructions: ex2, rcp"). fp32 relative error ~1e-6, far below the 16-bit output rounding
// (2^-9 bf16, 2^-12 fp16). The .ftz forms matter: without them (exp2f, __fdividef) ptxas wraps
// each MUFU in a compare and two multiplies for subnormal results, 12.5 SASS instructions per
// element instead of about 9 (docs/tuning/gelu.md). Flushing only changes
// results below 2^-126: e underflows to 0 for a < -126 (then r = 1, y = x, exact to fp32), and
// r flushes to 0 when 1 + e > 2^126 (very negative x: y = 0, gelu's limit; the exact value is
// below 2^-100 in magnitude). Used for 16-bit types only: tanhf keeps float32 as PyTorch's.
__device__ __forceinline__ float gelu_sigmoid(float x) {
  constexpr float kScale = -2.f * kSqrt2OverPi * 1.4426950408889634f;  // -2 sqrt(2/pi) log2(e)
  const float a = x * fmaf(x * x, kScale * kCoeff, kScale);
  float e, r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(a));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(1.f + e));
  return x * r;
}

// fp32 keeps the tanhf form; 16-bit types use the cheaper equivalent above.
template <typename T> __device__ __forceinline__ float gelu_f(float x) { return gelu_sigmoid(x); }
template <> __device__ __forceinline__ float gelu_f<float>(float x) { return gelu_tanh(x); }

// Block b handles vectors [b * THREADS * kUnroll, (b + 1) * THREADS * kUnroll),
// coalesced (consecutive threads, consecutive vectors); the last block also
// does the n % VEC scalar tail.
template <typename T, int VEC, int THREADS>
__global__ void __launch_bounds__(THREADS) gelu_kernel(const T* x, T* y, int64_t n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // No-ops unless launched with the programmatic stream serialization attribute.
  cudaGridDependencySynchronize();
  cudaTriggerProgrammaticLaunchCompletion();
#endif
  const int64_t nvec = n / VEC;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * THREADS * kUnroll + threadIdx.x;
  Vec<T, VEC> v[kUnroll];  // raw elements: 16-bit types take half the registers
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t i = first + u * THREADS;
    if (i < nvec) v[u] = reinterpret_cast<const Vec<T, VEC>*>(x)[i];
  }
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t i = first + u * THREADS;
    if (i < nvec) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) v[u].v[k] = from_float<T>(gelu_f<T>(to_float(v[u].v[k])));
      reinterpret_cast<Vec<T, VEC>*>(y)[i] = v[u];
    }
  }
  if (VEC > 1 && blockIdx.x == gridDim.x - 1) {
    const int64_t t = nvec * VEC + threadIdx.x;
    if (t < n) y[t] = from_float<T>(gelu_f<T>(to_float(x[t])));
  }
}

template <typename T, int THREADS>
cudaError_t gelu_launch_t(const T* x, T* y, int64_t n, bool pdl, cudaStream_t stream) {
  constexpr int kVec = vec16<T>();
  const bool vec = aligned16(x) && aligned16(y);
  const int64_t nvec = vec ? n / kVec : n;
  const int64_t per_block = int64_t{THREADS} * kUnroll;
  const int64_t blocks = nvec > 0 ? ceil_div(nvec, per_block) : 1;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  const auto kernel = vec ? gelu_kernel<T, kVec, THREADS> : gelu_kernel<T, 1, THREADS>;
  return launch(kernel, dim3(static_cast<unsigned>(blocks)), dim3(THREADS), 0, stream,
                LaunchAttr::pdl(pdl), x, y, n);
}

template <typename T>
cudaError_t gelu_launch(const void* x, void* y, int64_t n, bool pdl, int threads,
                        cudaStream_t stream) {
  const T* xt = static_cast<const T*>(x);
  T* yt = static_cast<T*>(y);
  switch (threads) {
    case 128: return gelu_launch_t<T, 128>(xt, yt, n, pdl, stream);
    case 256: return gelu_launch_t<T, 256>(xt, yt, n, pdl, stream);
    case 512: return gelu_launch_t<T, 512>(xt, yt, n, pdl, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t gelu(const void* x, void* y, int64_t n, DType dtype, cudaStream_t stream, int pdl,
                 int threads) {
  if (n < 0 || pdl < -1 || pdl > 1) return cudaErrorInvalidValue;
  if (threads != -1 && threads != 128 && threads != 256 && threads != 512) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const bool use_pdl = pdl < 0 ? kGeluPdlDefault : pdl != 0;
  const int t = threads < 0 ? kGeluThreadsDefault : threads;
  switch (dtype) {
    case DType::Float32: return gelu_launch<float>(x, y, n, use_pdl, t, stream);
    case DType::BFloat16: return gelu_launch<__nv_bfloat16>(x, y, n, use_pdl, t, stream);
    case DType::Float16: return gelu_launch<__half>(x, y, n, use_pdl, t, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace fusebench
