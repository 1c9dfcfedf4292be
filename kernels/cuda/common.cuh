// Helpers shared by the fusebench CUDA kernels: dtype <-> fp32 conversions,
// 16-byte vector types, warp/block reductions, and the host-side launch helper.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <utility>

#include "fusebench_cuda.h"

namespace fusebench {
namespace cuda {

constexpr int kWarpSize = 32;

template <typename T> __device__ __forceinline__ float to_float(T v);
template <> __device__ __forceinline__ float to_float<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <> __device__ __forceinline__ float to_float<__half>(__half v) { return __half2float(v); }

template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <> __device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}

// N elements of T loaded/stored as one access; N * sizeof(T) is 16 bytes for
// the vectorized paths (LDG.128/STG.128), N == 1 for the scalar fallbacks.
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

// Elements per 16-byte vector.
template <typename T> constexpr int vec16() { return 16 / static_cast<int>(sizeof(T)); }

template <typename T, int N>
__device__ __forceinline__ void load_vec(const T* p, float (&out)[N]) {
  const Vec<T, N> v = *reinterpret_cast<const Vec<T, N>*>(p);
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = to_float(v.v[i]);
}

template <typename T, int N>
__device__ __forceinline__ void store_vec(T* p, const float (&in)[N]) {
  Vec<T, N> v;
#pragma unroll
  for (int i = 0; i < N; ++i) v.v[i] = from_float<T>(in[i]);
  *reinterpret_cast<Vec<T, N>*>(p) = v;
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

// ceil(a / b) for a >= 0, b > 0 (host side: grid and chunk sizes).
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Thread-block cluster sizes of an H100/H200 (CUDA C++ Programming Guide, "Thread Block
// Clusters"): 8 CTAs portably, 16 with cudaFuncAttributeNonPortableClusterSizeAllowed.
constexpr int kMaxPortableCluster = 8;
constexpr int kMaxCluster = 16;

// The launch attribute of one cudaLaunchKernelEx launch (CUDA Runtime API, "cudaLaunchAttributeID";
// CUDA C++ Programming Guide, "Programmatic Dependent Launch and Synchronization", "Thread Block
// Clusters"); a launch sets at most one.
struct LaunchAttr {
  enum class Kind { Plain, Pdl, Cluster };
  Kind kind = Kind::Plain;
  int cluster = 1;  // Cluster: CTAs per cluster along x

  // No attribute: the same launch as kernel<<<grid, block, smem, stream>>>.
  static LaunchAttr plain() { return {}; }
  // Programmatic dependent launch (cudaLaunchAttributeProgrammaticStreamSerialization) when `on`
  // and the current device is sm_90+ (queried per launch); a plain launch otherwise.
  static LaunchAttr pdl(bool on) { return {on ? Kind::Pdl : Kind::Plain, 1}; }
  // Thread-block clusters of `ctas` CTAs along x (cudaLaunchAttributeClusterDimension); above
  // kMaxPortableCluster the kernel is first allowed non-portable sizes (sm_90: up to kMaxCluster).
  static LaunchAttr clusters(int ctas) { return {Kind::Cluster, ctas}; }
};

// Max devices of the per-device caches the launchers keep (the shared-memory opt-in);
// a device index beyond it is served uncached.
constexpr int kMaxDevices = 64;

// kernel(args...) on `stream` with `grid` x `block` threads, `smem` bytes of dynamic shared
// memory and the attribute `attr`, through cudaLaunchKernelEx (arguments converted to the
// kernel's parameter types). Returns the first error: device query, cudaFuncSetAttribute or the
// launch; a refused launch is cleared (cudaGetLastError) so it is not reported again by a later
// call.
template <typename... Params, typename... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                   cudaStream_t stream, LaunchAttr attr, Args&&... args) {
  cudaLaunchAttribute a[1];
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = a;
  cfg.numAttrs = 0;
  cudaError_t err = cudaSuccess;
  switch (attr.kind) {
    case LaunchAttr::Kind::Plain: break;
    case LaunchAttr::Kind::Pdl: {
      int device = 0, major = 0;
      err = cudaGetDevice(&device);
      if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
      if (err != cudaSuccess) return err;
      if (major >= 9) {
        a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        a[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.numAttrs = 1;
      }
      break;
    }
    case LaunchAttr::Kind::Cluster:
      if (attr.cluster > kMaxPortableCluster) {
        err = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
        if (err != cudaSuccess) return err;
      }
      a[0].id = cudaLaunchAttributeClusterDimension;
      a[0].val.clusterDim.x = static_cast<unsigned>(attr.cluster);
      a[0].val.clusterDim.y = 1;
      a[0].val.clusterDim.z = 1;
      cfg.numAttrs = 1;
      break;
  }
  err = cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
  if (err != cudaSuccess) (void)cudaGetLastError();
  return err;
}

struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
  __host__ __device__ static constexpr float identity() { return -__builtin_huge_valf(); }
};
struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
  __host__ __device__ static constexpr float identity() { return 0.f; }
};

// Butterfly reduction: every lane ends with the reduction over `width` lanes.
template <typename Op, int width = kWarpSize>
__device__ __forceinline__ float warp_reduce(float v, Op op = Op()) {
#pragma unroll
  for (int off = width / 2; off > 0; off /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Block-wide reduction returned to every thread; blockDim.x must be a multiple
// of 32. `smem` needs 32 floats and must not be reused by the caller before a
// following __syncthreads (use distinct buffers for back-to-back reductions).
template <typename Op>
__device__ __forceinline__ float block_reduce(float v, float* smem, Op op = Op()) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int nwarps = blockDim.x / kWarpSize;
  v = warp_reduce<Op>(v, op);
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = lane < nwarps ? smem[lane] : Op::identity();
  return warp_reduce<Op>(v, op);
}

// exp(x) for softmax, computed as Triton computes tl.exp on float32: x * log2(e)
// rounded to float, then ex2.approx (MUFU.EX2; PTX ISA, "Floating Point
// Instructions: ex2": at most 2 ulp from the correctly rounded result), which
// is what the PTX of a Triton 3.7 kernel compiled for sm_90 shows (mul.f32 by
// 0f3FB8AA3B, then ex2.approx.f32). Here with .ftz: without it ptxas wraps MUFU.EX2 in three
// more instructions (a compare and two multiplies) to produce subnormal results, a third of
// a register-resident softmax's instructions (docs/tuning/softmax.md). The only difference from Triton's result: a y
// below 2^-126 (x < -87.3) is +0 instead of a subnormal, an absolute change under 1.2e-38.
// exp(-inf) = +0, NaN stays NaN. Softmax only takes it of x - max <= 0, where the product's
// rounding adds at most |x| * 2^-24 relative error (~6e-7 at x = -10, far below the float32
// gate's 1e-5).
__device__ __forceinline__ float exp_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f));
  return y;
}

// Online-softmax state (running max m, sum s of exp(x - m)), Milakov &
// Gimelshein 2018, arXiv:1805.02867, eq. (4). An empty state is (-inf, 0).
struct MaxSum {
  float m, s;
};

__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  // The equality tests keep (-inf, 0) states from producing exp(-inf + inf).
  const float sa = a.m == m ? a.s : a.s * exp_approx(a.m - m);
  const float sb = b.m == m ? b.s : b.s * exp_approx(b.m - m);
  return {m, sa + sb};
}

__device__ __forceinline__ MaxSum warp_reduce(MaxSum v) {
#pragma unroll
  for (int off = kWarpSize / 2; off > 0; off /= 2) {
    MaxSum o{__shfl_xor_sync(0xffffffffu, v.m, off), __shfl_xor_sync(0xffffffffu, v.s, off)};
    v = combine(v, o);
  }
  return v;
}

// Block-wide MaxSum reduction to every thread; `smem` needs 32 entries.
__device__ __forceinline__ MaxSum block_reduce(MaxSum v, MaxSum* smem) {
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  v = warp_reduce(v);
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = lane < static_cast<int>(blockDim.x / kWarpSize) ? smem[lane]
                                                      : MaxSum{-__builtin_huge_valf(), 0.f};
  return warp_reduce(v);
}

}  // namespace cuda
}  // namespace fusebench
