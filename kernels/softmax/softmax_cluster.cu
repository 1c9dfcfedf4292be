// Softmax over long rows with a row split across a thread-block cluster (sm_90+): one read and
// one write of every element, the row held on chip, partials exchanged in one step.
//
// Method (the structure of QuACK's softmax, Dao-AILab/quack quack/softmax.py, quack/reduce.py
// and quack/reduction_base.py; our own code):
//  1. A cluster of C = ceil(cols / CHUNK) CTAs owns one row (C <= 16); CTA r holds elements
//     [r * CHUNK, (r + 1) * CHUNK) of it, CHUNK = THREADS * NV * VEC (NV 16-byte vectors of VEC
//     elements per thread; thread t owns vectors t, t + THREADS, ...).
//  2. Every thread issues all its NV loads at once as per-thread asynchronous copies into
//     shared memory (cp.async.ca, 16 bytes each; sm90.cuh says why not .cg): no register is
//     tied up by a load in flight, so the whole chunk is requested before the first value is
//     needed. After waiting for its own
//     copies a thread reads its vectors from shared memory once, into registers (slots past the
//     row's end hold -inf); no block barrier is needed, since each thread reads only what it copied.
//  3. Each warp reduces its values to (m_w, l_w) = (max, sum exp(x - m_w)), keeping
//     e = exp(x - m_w) in registers: one exp per element.
//  4. C > 1: lane j < C of every warp stores (m_w, l_w) into slot [rank * WARPS + warp] of CTA j's
//     shared exchange buffer with st.async, which also completes 8 bytes of the transaction count
//     of CTA j's mbarrier; each CTA waits on its own mbarrier until all C * WARPS pairs have
//     landed. (The barriers are initialized at the start and published by one relaxed cluster
//     arrive; the matching wait comes just before the first st.async, so it overlaps the loads.)
//     No second cluster barrier is needed: a CTA only ever receives, and it cannot exit before
//     it has received everything. C == 1: the same exchange through shared memory and one
//     __syncthreads. Every warp then combines the pairs into (M, L) (Milakov & Gimelshein 2018,
//     "Online normalizer calculation for softmax", arXiv:1805.02867).
//  5. y = e * (exp(m_w - M) / L), stored from registers with 16-byte stores.
// Requires 16-byte aligned x and y and cols a multiple of VEC; softmax_cluster refuses others.
#include "common.cuh"
#include "sm90.cuh"

namespace fusebench {
namespace cuda {
namespace {

constexpr int kClusterThreads = 256;

// CTAs per SM the register budget is fitted to (__launch_bounds__ minBlocksPerMultiprocessor)
// for VALUES floats per thread: 4 up to 32 values (64 registers), 3 up to 64 (85 registers),
// else 1. More resident CTAs keep more of the row in flight per SM (docs/tuning/softmax.md).
constexpr int cluster_min_blocks(int values) { return values <= 32 ? 4 : values <= 64 ? 3 : 1; }

template <typename T, int NV>
__global__ void __launch_bounds__(kClusterThreads,
                                  cluster_min_blocks(NV * 16 / static_cast<int>(sizeof(T))))
    softmax_cluster_kernel(const T* x, T* y, int cols, int csize) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int VEC = 16 / static_cast<int>(sizeof(T));
  constexpr float kNegInf = -__builtin_huge_valf();
  constexpr float kFltMax = 3.402823466e38f;
  constexpr int kChunk = kClusterThreads * NV * VEC;
  constexpr int kClusterWarps = kClusterThreads / kWarpSize;
  extern __shared__ __align__(16) unsigned char cluster_smem[];
  T* buf = reinterpret_cast<T*>(cluster_smem);
  __shared__ __align__(8) float2 pairs[kClusterWarps * kMaxCluster];  // (m_w, l_w) of the row
  __shared__ __align__(8) uint64_t bar;
  const unsigned rank = blockIdx.x % static_cast<unsigned>(csize);
  const int64_t row = blockIdx.x / static_cast<unsigned>(csize);
  const int base = static_cast<int>(rank) * kChunk;
  const int lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  if (csize > 1) {
    if (threadIdx.x == 0) {
      mbar_init(&bar, 1);
      fence_mbar_init();
      mbar_expect_tx(&bar, static_cast<unsigned>(csize * kClusterWarps * sizeof(float2)));
    }
    cluster_arrive_relaxed();  // waited for before the first st.async below
  }
  // This thread's vector k is at element offset k * kStride of these (immediate offsets).
  constexpr int kStride = kClusterThreads * VEC;
  const int first = base + static_cast<int>(threadIdx.x) * VEC;  // column of vector 0
  const T* src = xr + first;
  T* dst = yr + first;
  T* mine = buf + threadIdx.x * VEC;
  const int left = cols - first;  // this thread's vector k is in the row when k * kStride < left
  // No branches per vector: a vector past the row's end is zero-filled by its copy, then
  // replaced by -inf, and its store is predicated.
#pragma unroll
  for (int k = 0; k < NV; ++k) cp_async16(mine + k * kStride, src + k * kStride, k * kStride < left);
  cp_async_wait_all();

  float v[NV][VEC];
#pragma unroll
  for (int k = 0; k < NV; ++k) load_vec<T, VEC>(mine + k * kStride, v[k]);
  if (left < NV * kStride) {  // only threads of a row's last CTA
#pragma unroll
    for (int k = 0; k < NV; ++k)
#pragma unroll
      for (int i = 0; i < VEC; ++i) v[k][i] = k * kStride < left ? v[k][i] : kNegInf;
  }
  // Max and sum over kAcc independent accumulators, then a tree: a single running value would
  // be a chain of NV * VEC dependent instructions, which 2 to 4 warps per scheduler cannot hide.
  constexpr int kAcc = 4;
  float acc[kAcc];
#pragma unroll
  for (int a = 0; a < kAcc; ++a) acc[a] = kNegInf;
#pragma unroll
  for (int k = 0; k < NV; ++k)
#pragma unroll
    for (int i = 0; i < VEC; ++i) acc[i % kAcc] = fmaxf(acc[i % kAcc], v[k][i]);
  float m = fmaxf(fmaxf(acc[0], acc[1]), fmaxf(acc[2], acc[3]));
  // A warp with only -inf values gives (-FLT_MAX, 0), never exp(-inf - -inf) = nan.
  m = fmaxf(warp_reduce<MaxOp>(m), -kFltMax);
#pragma unroll
  for (int a = 0; a < kAcc; ++a) acc[a] = 0.f;
#pragma unroll
  for (int k = 0; k < NV; ++k)
#pragma unroll
    for (int i = 0; i < VEC; ++i) acc[i % kAcc] += (v[k][i] = exp_approx(v[k][i] - m));
  const float s = warp_reduce<SumOp>((acc[0] + acc[1]) + (acc[2] + acc[3]));

  const int npairs = csize * kClusterWarps;
  if (csize > 1) {
    cluster_wait();  // every CTA's barrier is initialized
    if (lane < csize) {
      const unsigned peer = static_cast<unsigned>(lane);
      st_async_f32x2(map_to_rank(&pairs[rank * kClusterWarps + warp], peer), m, s,
                     map_to_rank(&bar, peer));
    }
    mbar_wait(&bar, 0);
  } else {
    if (lane == 0) pairs[warp] = make_float2(m, s);
    __syncthreads();
  }
  // (M, L) over the row's pairs (at most 16 * 8 = 128: up to 4 per lane): M by a max reduction,
  // then L = sum l_j * exp(m_j - M) (every m_j >= -FLT_MAX is finite, so no inf - inf).
  float big = -kFltMax;
#pragma unroll 1
  for (int j = lane; j < npairs; j += kWarpSize) big = fmaxf(big, pairs[j].x);
  big = warp_reduce<MaxOp>(big);
  float sum = 0.f;
#pragma unroll 1
  for (int j = lane; j < npairs; j += kWarpSize) sum += pairs[j].y * exp_approx(pairs[j].x - big);
  sum = warp_reduce<SumOp>(sum);
  // All -inf row: (M, L) = (-FLT_MAX, 0), scale = 1 / 0 = inf, e = 0: y = nan, as torch.softmax.
  const float scale = exp_approx(m - big) / sum;
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    Vec<T, VEC> out;
#pragma unroll
    for (int i = 0; i < VEC; ++i) out.v[i] = from_float<T>(v[k][i] * scale);
    if (k * kStride < left) *reinterpret_cast<Vec<T, VEC>*>(dst + k * kStride) = out;
  }
#else
  __trap();  // launched only on sm_90+ (see cluster_launch)
#endif
}

template <typename T, int NV>
cudaError_t cluster_launch(const T* x, T* y, int64_t rows, int64_t cols, cudaStream_t s) {
  constexpr int64_t kChunk = int64_t{kClusterThreads} * NV * vec16<T>();
  const int64_t csize = ceil_div(cols, kChunk);
  if (csize > kMaxCluster || rows * csize > 0x7fffffff) return cudaErrorInvalidValue;
  constexpr auto kernel = softmax_cluster_kernel<T, NV>;
  constexpr int smem = static_cast<int>(kChunk * sizeof(T));
  const cudaError_t err = allow_dynamic_smem<kernel>(smem);
  if (err != cudaSuccess) return err;
  return launch(kernel, dim3(static_cast<unsigned>(rows * csize)), dim3(kClusterThreads), smem, s,
                csize > 1 ? LaunchAttr::clusters(static_cast<int>(csize)) : LaunchAttr::plain(), x,
                y, static_cast<int>(cols), static_cast<int>(csize));
}

// CTA chunk (elements) -> launch: 256 threads of chunk / 256 values each (16 to 128), held as
// floats; the chunk also takes chunk * itemsize bytes of shared memory (at most 128 KB).
template <typename T>
cudaError_t cluster_dispatch(const T* x, T* y, int64_t rows, int64_t cols, int chunk,
                             cudaStream_t s) {
  constexpr int VEC = vec16<T>();
  switch (chunk) {
    case 4096: return cluster_launch<T, 4096 / kClusterThreads / VEC>(x, y, rows, cols, s);
    case 8192: return cluster_launch<T, 8192 / kClusterThreads / VEC>(x, y, rows, cols, s);
    case 16384: return cluster_launch<T, 16384 / kClusterThreads / VEC>(x, y, rows, cols, s);
    case 32768: return cluster_launch<T, 32768 / kClusterThreads / VEC>(x, y, rows, cols, s);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace

int softmax_cluster_chunk(int64_t cols, int elem_size) {
  // float32: the smallest chunk that a portable cluster (8 CTAs) holds, else the smallest that
  // 16 CTAs hold; 16-bit: 16384 (64 values per thread, 3 CTAs per SM). The fastest measured
  // (docs/tuning/softmax.md).
  if (elem_size == 2) {
    for (const int chunk : {16384, 32768})
      if (ceil_div(cols, chunk) <= kMaxCluster) return chunk;
    return 0;
  }
  for (const int most : {kMaxPortableCluster, kMaxCluster})
    for (const int chunk : kClusterChunkElems)
      if (ceil_div(cols, chunk) <= most) return chunk;
  return 0;
}

cudaError_t softmax_cluster(const void* x, void* y, int64_t rows, int64_t cols, DType dtype,
                            int chunk, cudaStream_t stream) {
  if (rows < 0 || cols < 0 || cols > 0x7fffffff) return cudaErrorInvalidValue;
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
