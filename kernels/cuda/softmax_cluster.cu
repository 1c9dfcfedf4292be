// Softmax over long rows with a row split across a thread-block cluster
// (sm_90+): one read and one write of every element, the row held on chip.
//
// A cluster of C CTAs owns one row; CTA r holds elements [r * CHUNK, (r + 1) * CHUNK)
// of it in registers (CHUNK = THREADS * NV * VEC: NV 16-byte vectors per thread).
// Each CTA reduces its chunk to (m_r, l_r) = (max, sum exp(x - m_r)), keeping
// e = exp(x - m_r) in registers, and publishes the pair in its shared memory.
// After a cluster barrier every CTA reads the C pairs through distributed
// shared memory (DSMEM), combines them (Milakov & Gimelshein 2018, "Online
// normalizer calculation for softmax", arXiv:1805.02867) into (M, L), and
// writes y = e * (exp(m_r - M) / L). A second cluster barrier (arrive after
// the DSMEM reads, wait before exit) keeps each CTA's shared memory alive
// while the others read it. Clusters are co-scheduled by the hardware, so the
// barrier cannot deadlock (CUDA C++ Programming Guide, "Thread Block
// Clusters" and "Distributed Shared Memory").
//
// Compared with the two-pass variants (online, split_row) this moves
// 2 * itemsize bytes per element instead of about 3 * itemsize. Requires the
// 16-byte vector path (aligned pointers, cols % VEC == 0) and cols <= 16 * CHUNK
// (16 = the largest, non-portable, cluster size of an H100/H200).
#include <cooperative_groups.h>

#include <type_traits>

#include "common.cuh"

namespace fusebench {
namespace cuda {
namespace {

namespace cg = cooperative_groups;


#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900  // used only by the sm_90+ kernel body
// RAW storage: a 16-byte vector of 8 16-bit values as 4 words; word j holds elements 2j (low
// half) and 2j + 1 (high half). unpack2 converts a word to two floats; unpack2_fresh does the
// same in volatile asm, so that the compiler cannot reuse a conversion made before the cluster
// barrier (it would then keep 64 floats live across it instead of 32 words: nvcc 13.0 did so
// for bfloat16 with a plain conversion, 110 registers).
template <typename T> __device__ __forceinline__ void unpack2(unsigned w, float& a, float& b);
template <> __device__ __forceinline__ void unpack2<__nv_bfloat16>(unsigned w, float& a, float& b) {
  a = __uint_as_float(w << 16);
  b = __uint_as_float(w & 0xffff0000u);
}
template <> __device__ __forceinline__ void unpack2<__half>(unsigned w, float& a, float& b) {
  const __half2 h = *reinterpret_cast<const __half2*>(&w);
  a = __low2float(h);
  b = __high2float(h);
}
template <typename T> __device__ __forceinline__ void unpack2_fresh(unsigned w, float& a, float& b);
template <>
__device__ __forceinline__ void unpack2_fresh<__nv_bfloat16>(unsigned w, float& a, float& b) {
  asm volatile("{ shl.b32 %0, %2, 16; and.b32 %1, %2, 0xffff0000; }" : "=f"(a), "=f"(b) : "r"(w));
}
template <> __device__ __forceinline__ void unpack2_fresh<__half>(unsigned w, float& a, float& b) {
  asm volatile("{ .reg .b16 lo, hi; mov.b32 {lo, hi}, %2; cvt.f32.f16 %0, lo; cvt.f32.f16 %1, hi; }"
               : "=f"(a), "=f"(b) : "r"(w));
}
#endif

// RAW (16-bit types): the chunk is kept as loaded, NV 16-byte vectors of 8 elements (4 registers
// each), and exp(x - m_r) is computed twice (for l_r, then for y) instead of kept: 64 elements
// per thread in 32 registers, so a CTA holds twice the elements (and the same bytes) as a float32
// one. Both passes compute the identical exp_approx(x - m_r), so y is the same either way.
// (The sum adds the exps in another order than the float path; rounding differs in the last bit.)
template <typename T, int NV, int VEC, int THREADS, bool RAW>
__global__ void __launch_bounds__(THREADS) softmax_cluster_kernel(const T* x, T* y, int64_t cols) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr float kClusterNegInf = -__builtin_huge_valf();
  constexpr float kFltMax = 3.402823466e38f;
  constexpr int64_t kChunk = int64_t{THREADS} * NV * VEC;
  __shared__ float red_max[kWarpSize], red_sum[kWarpSize];
  __shared__ MaxSum part;  // this CTA's (m_r, l_r), read by the whole cluster
  cg::cluster_group cluster = cg::this_cluster();
  const unsigned rank = cluster.block_rank(), csize = cluster.num_blocks();
  const int64_t row = blockIdx.x / csize;
  const int64_t base = static_cast<int64_t>(rank) * kChunk;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  // v: the chunk as floats (!RAW); raw: as loaded (RAW). Slots past the row's end hold -inf.
  float v[RAW ? 1 : NV][VEC];
  uint4 raw[RAW ? NV : 1];  // RAW: VEC == 8
  auto col = [&](int k) { return base + (static_cast<int64_t>(k) * THREADS + threadIdx.x) * VEC; };
  float m = kClusterNegInf;
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int64_t c = col(k);
    if constexpr (RAW) {
      static_assert(VEC == 8 && sizeof(T) == 2, "RAW holds 16-byte vectors of 16-bit values");
      // -inf in both halves: 0xff80 (bfloat16), 0xfc00 (float16).
      constexpr unsigned kNegInf2 = std::is_same_v<T, __half> ? 0xfc00fc00u : 0xff80ff80u;
      raw[k] = c < cols ? *reinterpret_cast<const uint4*>(xr + c)
                        : make_uint4(kNegInf2, kNegInf2, kNegInf2, kNegInf2);
      const unsigned w[4] = {raw[k].x, raw[k].y, raw[k].z, raw[k].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float a, b;
        unpack2<T>(w[j], a, b);
        m = fmaxf(m, fmaxf(a, b));
      }
    } else {
      if (c < cols) {
        load_vec<T, VEC>(xr + c, v[k]);
      } else {
#pragma unroll
        for (int i = 0; i < VEC; ++i) v[k][i] = kClusterNegInf;
      }
#pragma unroll
      for (int i = 0; i < VEC; ++i) m = fmaxf(m, v[k][i]);
    }
  }
  // An all -inf chunk gives (-FLT_MAX, 0), never exp(-inf - -inf) = nan.
  m = fmaxf(block_reduce<MaxOp>(m, red_max), -kFltMax);
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    if constexpr (RAW) {
      const unsigned w[4] = {raw[k].x, raw[k].y, raw[k].z, raw[k].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        float a, b;
        unpack2<T>(w[j], a, b);
        s += exp_approx(a - m) + exp_approx(b - m);
      }
    } else {
#pragma unroll
      for (int i = 0; i < VEC; ++i) s += (v[k][i] = exp_approx(v[k][i] - m));
    }
  }
  s = block_reduce<SumOp>(s, red_sum);
  if (threadIdx.x == 0) part = MaxSum{m, s};
  cluster.sync();  // every CTA's pair is published
  MaxSum tot{-kFltMax, 0.f};
  for (unsigned r = 0; r < csize; ++r) tot = combine(tot, *cluster.map_shared_rank(&part, r));
  cluster.barrier_arrive();  // done reading the other CTAs' shared memory
  // All -inf row: tot = (-FLT_MAX, 0), scale = 1 / 0 = inf, e = 0: y = nan, as torch.softmax.
  const float scale = exp_approx(m - tot.m) / tot.s;
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int64_t c = col(k);
    if (c < cols) {
      float e[VEC];
      if constexpr (RAW) {
        const unsigned w[4] = {raw[k].x, raw[k].y, raw[k].z, raw[k].w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          unpack2_fresh<T>(w[j], e[2 * j], e[2 * j + 1]);
          e[2 * j] = exp_approx(e[2 * j] - m) * scale;
          e[2 * j + 1] = exp_approx(e[2 * j + 1] - m) * scale;
        }
      } else {
#pragma unroll
        for (int i = 0; i < VEC; ++i) e[i] = v[k][i] * scale;
      }
      store_vec<T, VEC>(yr + c, e);
    }
  }
  cluster.barrier_wait();  // keep `part` alive until every CTA has read it
#else
  __trap();  // launched only on sm_90+ (see cluster_launch)
#endif
}

template <typename T, int THREADS, int NV, bool RAW = false>
cudaError_t cluster_launch(const T* x, T* y, int64_t rows, int64_t cols, cudaStream_t s) {
  constexpr int VEC = vec16<T>();
  constexpr int64_t kChunk = int64_t{THREADS} * NV * VEC;
  const int64_t csize = ceil_div(cols, kChunk);
  if (csize > kMaxCluster || rows * csize > 0x7fffffff) return cudaErrorInvalidValue;
  const auto kernel = softmax_cluster_kernel<T, NV, VEC, THREADS, RAW>;
  return launch(kernel, dim3(static_cast<unsigned>(rows * csize)), dim3(THREADS), 0, s,
                LaunchAttr::clusters(static_cast<int>(csize)), x, y, cols);
}

// CTA chunk (elements) -> launch. float32: 16 values per thread up to 1024 threads, then 32.
// 16-bit types: 16 values per thread (as floats) up to 8192, then 64 raw values per thread
// (RAW: 32 registers) in CTAs of 256, 512 and 1024 threads; 65536 is 16-bit only.
template <typename T>
cudaError_t cluster_dispatch(const T* x, T* y, int64_t rows, int64_t cols, int chunk,
                             cudaStream_t s) {
  constexpr int VEC = vec16<T>();
  if constexpr (VEC == 4) {
    switch (chunk) {
      case 4096: return cluster_launch<T, 256, 4>(x, y, rows, cols, s);
      case 8192: return cluster_launch<T, 512, 4>(x, y, rows, cols, s);
      case 16384: return cluster_launch<T, 1024, 4>(x, y, rows, cols, s);
      case 32768: return cluster_launch<T, 1024, 8>(x, y, rows, cols, s);
      default: return cudaErrorInvalidValue;
    }
  } else {
    switch (chunk) {
      case 4096: return cluster_launch<T, 256, 2>(x, y, rows, cols, s);
      case 8192: return cluster_launch<T, 512, 2>(x, y, rows, cols, s);
      case 16384: return cluster_launch<T, 256, 8, true>(x, y, rows, cols, s);
      case 32768: return cluster_launch<T, 512, 8, true>(x, y, rows, cols, s);
      case 65536: return cluster_launch<T, 1024, 8, true>(x, y, rows, cols, s);
      default: return cudaErrorInvalidValue;
    }
  }
}

}  // namespace

int softmax_cluster_chunk(int64_t cols, int elem_size) {
  // The largest chunk (fewest CTAs per row) measured fastest on an H200 (scripts/tune_cuda.py
  // at commit 5790afd, float32): 4096 x 65536 642 us against 707 (8192) and 879 (16384);
  // 256 x 262144 197 us against 418 (16384). 16-bit types: 16384, 256 threads of 64 packed
  // values, 4 CTAs per SM (scripts/tune_cuda.py at 83e2ce1, us, chunk 16384 / 32768 / 65536):
  // 4096 x 65536 bf16 386 / 398 / 402; 256 x 262144 bf16 110 / 115 / 122.
  const int64_t chunk = elem_size == 2 ? 16384 : 32768;
  return ceil_div(cols, chunk) <= kMaxCluster ? static_cast<int>(chunk) : 0;
}

cudaError_t softmax_cluster(const void* x, void* y, int64_t rows, int64_t cols, DType dtype,
                            int chunk, cudaStream_t stream) {
  if (rows < 0 || cols < 0) return cudaErrorInvalidValue;
  if (rows == 0 || cols == 0) return cudaSuccess;
  int device = 0, major = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (err != cudaSuccess) return err;
  if (major < 9) return cudaErrorNotSupported;
  const int esize = dtype == DType::Float32 ? 4 : 2;
  if (chunk == 0) chunk = softmax_cluster_chunk(cols, esize);
  const int vec = 16 / esize;
  if (!aligned16(x) || !aligned16(y) || cols % vec != 0) return cudaErrorInvalidValue;
  switch (dtype) {
    case DType::Float32:
      return cluster_dispatch<float>(static_cast<const float*>(x), static_cast<float*>(y), rows,
                                     cols, chunk, stream);
    case DType::BFloat16:
      return cluster_dispatch<__nv_bfloat16>(static_cast<const __nv_bfloat16*>(x),
                                             static_cast<__nv_bfloat16*>(y), rows, cols, chunk,
                                             stream);
    case DType::Float16:
      return cluster_dispatch<__half>(static_cast<const __half*>(x), static_cast<__half*>(y), rows,
                                      cols, chunk, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace fusebench
