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

#include "common.cuh"

namespace fusebench {
namespace cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kMaxPortableCluster = 8;
constexpr int kMaxCluster = 16;

template <typename T, int NV, int VEC, int THREADS>
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
  float v[NV][VEC];
  float m = kClusterNegInf;
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int64_t c = base + (static_cast<int64_t>(k) * THREADS + threadIdx.x) * VEC;
    if (c < cols) {
      load_vec<T, VEC>(xr + c, v[k]);
    } else {
#pragma unroll
      for (int i = 0; i < VEC; ++i) v[k][i] = kClusterNegInf;
    }
#pragma unroll
    for (int i = 0; i < VEC; ++i) m = fmaxf(m, v[k][i]);
  }
  // An all -inf chunk gives (-FLT_MAX, 0), never exp(-inf - -inf) = nan.
  m = fmaxf(block_reduce<MaxOp>(m, red_max), -kFltMax);
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < NV; ++k)
#pragma unroll
    for (int i = 0; i < VEC; ++i) s += (v[k][i] = exp_approx(v[k][i] - m));
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
    const int64_t c = base + (static_cast<int64_t>(k) * THREADS + threadIdx.x) * VEC;
    if (c < cols) {
#pragma unroll
      for (int i = 0; i < VEC; ++i) v[k][i] *= scale;
      store_vec<T, VEC>(yr + c, v[k]);
    }
  }
  cluster.barrier_wait();  // keep `part` alive until every CTA has read it
#else
  __trap();  // launched only on sm_90+ (see cluster_launch)
#endif
}

int64_t cluster_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <typename T, int THREADS, int NV>
cudaError_t cluster_launch(const T* x, T* y, int64_t rows, int64_t cols, cudaStream_t s) {
  constexpr int VEC = vec16<T>();
  constexpr int64_t kChunk = int64_t{THREADS} * NV * VEC;
  const int64_t csize = cluster_ceil_div(cols, kChunk);
  if (csize > kMaxCluster || rows * csize > 0x7fffffff) return cudaErrorInvalidValue;
  const auto kernel = softmax_cluster_kernel<T, NV, VEC, THREADS>;
  if (csize > kMaxPortableCluster) {
    const cudaError_t err =
        cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (err != cudaSuccess) return err;
  }
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = static_cast<unsigned>(csize);
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(rows * csize));
  cfg.blockDim = dim3(THREADS);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, x, y, cols);
  if (err != cudaSuccess) (void)cudaGetLastError();  // a refused launch is not left pending
  return err;
}

// CTA chunk (elements) -> launch: 16 values per thread up to 1024 threads, then 32.
template <typename T>
cudaError_t cluster_dispatch(const T* x, T* y, int64_t rows, int64_t cols, int chunk,
                             cudaStream_t s) {
  constexpr int VEC = vec16<T>();
  switch (chunk) {
    case 4096: return cluster_launch<T, 256, 16 / VEC>(x, y, rows, cols, s);
    case 8192: return cluster_launch<T, 512, 16 / VEC>(x, y, rows, cols, s);
    case 16384: return cluster_launch<T, 1024, 16 / VEC>(x, y, rows, cols, s);
    case 32768: return cluster_launch<T, 1024, 32 / VEC>(x, y, rows, cols, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

int softmax_cluster_chunk(int64_t cols, int elem_size) {
  (void)elem_size;
  // The largest chunk (fewest CTAs per row) measured fastest on an H200 (scripts/tune_cuda.py
  // at commit 5790afd, float32): 4096 x 65536 642 us against 707 (8192) and 879 (16384);
  // 256 x 262144 197 us against 418 (16384).
  return cluster_ceil_div(cols, 32768) <= kMaxCluster ? 32768 : 0;
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
