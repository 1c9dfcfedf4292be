// Numerically stable softmax over the last dimension of a contiguous
// row-major (rows, cols) tensor: y = exp(x - max(x)) / sum(exp(x - max(x))),
// fp32 arithmetic (expf, no fast-math), 16-bit types converted on load/store.
//
// Memory-bound: the ideal is one read and one write, 2 * itemsize bytes per
// element. Four variants (see SoftmaxVariant in fusebench_cuda.h):
//  - WarpPerRow (cols <= 1024): one warp per row, the row in registers, warp
//    shuffles only, kWarpRows rows per block. The "persistent softmax" of
//    Apex / PyTorch (aten/src/ATen/native/cuda/PersistentSoftmax.cuh).
//  - BlockPerRow (cols <= 32768): one block per row, the row in registers
//    (<= 32 fp32 values per thread), two block reductions (warp shuffles +
//    shared memory). Reads the input once. The scalar (unaligned) path holds
//    <= 16 values per thread; longer such rows run Online instead.
//  - Online (any cols): one block per row; pass 1 keeps a running (max, sum)
//    per thread and merges them (Milakov & Gimelshein 2018, "Online normalizer
//    calculation for softmax", arXiv:1805.02867); pass 2 walks the row's
//    chunks in reverse, so the chunks read last in pass 1 (most likely still
//    in L2) are re-read first.
//  - SplitRow (any cols): a row is split into chunks of whole blocks so few,
//    long rows still fill the GPU. Kernel 1 writes each chunk's (max, sum)
//    partial; kernel 2 merges its row's partials and normalizes its chunk
//    (re-read from L2 when rows * cols * itemsize fits there).
// All variants load 16-byte vectors when both base pointers are 16-byte
// aligned and cols is a multiple of the vector width, else scalars.
#include "common.cuh"

namespace fusebench {
namespace cuda {
namespace {

constexpr float kNegInf = -__builtin_huge_valf();

constexpr int kWarpRows = 4;             // WarpPerRow: rows (warps) per 128-thread block
constexpr int kBlockTargetThreads = 256; // BlockPerRow: preferred block size
constexpr int kBlockMaxItems = 32;       // BlockPerRow: fp32 values per thread (vectorized)
constexpr int kBlockMaxItemsScalar = 16; // ... scalar path (32 spills under 64 registers)
constexpr int kOnlineThreads = 512;      // Online: block size
constexpr int kSplitThreads = 256;       // SplitRow: block size
constexpr int kUnroll = 4;               // Online/SplitRow: vectors in flight per thread
constexpr int64_t kSplitChunkQuantum = 4096;  // SplitRow chunk granule (elements)
constexpr int64_t kSplitMinRowBytes = 64 * 1024;

template <typename T, int N>
__device__ __forceinline__ void load_or_fill(const T* p, bool valid, float (&v)[N]) {
  if (valid) {
    load_vec<T, N>(p, v);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = kNegInf;
  }
}

// ---------------------------------------------------------------- WarpPerRow
// Lane l holds vectors l, l + 32, ... of its row: ITEMS = NV * VEC elements,
// cols <= 32 * ITEMS. Out-of-row slots hold -inf and are not stored.
template <typename T, int NV, int VEC>
__global__ void __launch_bounds__(kWarpRows * kWarpSize)
    softmax_warp_kernel(const T* x, T* y, int64_t rows, int cols) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpRows + threadIdx.x / kWarpSize;
  if (row >= rows) return;  // uniform per warp
  const int lane = threadIdx.x % kWarpSize;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  float v[NV][VEC];
  float m = kNegInf;
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int c = (k * kWarpSize + lane) * VEC;
    load_or_fill<T, VEC>(xr + c, c < cols, v[k]);
#pragma unroll
    for (int i = 0; i < VEC; ++i) m = fmaxf(m, v[k][i]);
  }
  m = warp_reduce<MaxOp>(m);
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < NV; ++k)
#pragma unroll
    for (int i = 0; i < VEC; ++i) s += (v[k][i] = expf(v[k][i] - m));
  const float r = 1.f / warp_reduce<SumOp>(s);
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int c = (k * kWarpSize + lane) * VEC;
    if (c < cols) {
#pragma unroll
      for (int i = 0; i < VEC; ++i) v[k][i] *= r;
      store_vec<T, VEC>(yr + c, v[k]);
    }
  }
}

// --------------------------------------------------------------- BlockPerRow
// Block b owns row b; thread t holds vectors t, t + blockDim.x, ... (NV of
// them), so cols <= blockDim.x * NV * VEC.
template <typename T, int NV, int VEC>
__global__ void __launch_bounds__(1024) softmax_block_kernel(const T* x, T* y, int cols) {
  __shared__ float red_max[kWarpSize], red_sum[kWarpSize];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  float v[NV][VEC];
  float m = kNegInf;
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int c = (k * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x)) * VEC;
    load_or_fill<T, VEC>(xr + c, c < cols, v[k]);
#pragma unroll
    for (int i = 0; i < VEC; ++i) m = fmaxf(m, v[k][i]);
  }
  m = block_reduce<MaxOp>(m, red_max);
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < NV; ++k)
#pragma unroll
    for (int i = 0; i < VEC; ++i) s += (v[k][i] = expf(v[k][i] - m));
  const float r = 1.f / block_reduce<SumOp>(s, red_sum);
#pragma unroll
  for (int k = 0; k < NV; ++k) {
    const int c = (k * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x)) * VEC;
    if (c < cols) {
#pragma unroll
      for (int i = 0; i < VEC; ++i) v[k][i] *= r;
      store_vec<T, VEC>(yr + c, v[k]);
    }
  }
}

// ----------------------------------------------------- Online and SplitRow
// This thread's (max, sum) over vectors [begin, end) of row xr, visited in
// steps of blockDim.x * kUnroll vectors; one merge (two expf) per step.
template <typename T, int VEC>
__device__ __forceinline__ MaxSum thread_stats(const T* xr, int64_t begin, int64_t end) {
  MaxSum st{kNegInf, 0.f};
  const int64_t step = static_cast<int64_t>(blockDim.x) * kUnroll;
  for (int64_t base = begin + threadIdx.x; base < end; base += step) {
    float v[kUnroll][VEC];
    float cm = kNegInf;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + static_cast<int64_t>(u) * blockDim.x;
      load_or_fill<T, VEC>(xr + i * VEC, i < end, v[u]);
#pragma unroll
      for (int k = 0; k < VEC; ++k) cm = fmaxf(cm, v[u][k]);
    }
    float cs = 0.f;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int k = 0; k < VEC; ++k) cs += expf(v[u][k] - cm);
    if (cm != kNegInf) st = combine(st, MaxSum{cm, cs});
  }
  return st;
}

// y = exp(x - m) * r over vectors [begin, end), steps visited last-to-first
// when `reverse`.
template <typename T, int VEC>
__device__ __forceinline__ void normalize(const T* xr, T* yr, int64_t begin, int64_t end,
                                          float m, float r, bool reverse) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * kUnroll;
  const int64_t nsteps = (end - begin + step - 1) / step;
  for (int64_t j = 0; j < nsteps; ++j) {
    const int64_t base = begin + (reverse ? nsteps - 1 - j : j) * step + threadIdx.x;
    float v[kUnroll][VEC];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + static_cast<int64_t>(u) * blockDim.x;
      if (i < end) load_vec<T, VEC>(xr + i * VEC, v[u]);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t i = base + static_cast<int64_t>(u) * blockDim.x;
      if (i < end) {
#pragma unroll
        for (int k = 0; k < VEC; ++k) v[u][k] = expf(v[u][k] - m) * r;
        store_vec<T, VEC>(yr + i * VEC, v[u]);
      }
    }
  }
}

template <typename T, int VEC>
__global__ void __launch_bounds__(kOnlineThreads) softmax_online_kernel(const T* x, T* y,
                                                                        int64_t cols) {
  __shared__ MaxSum red[kWarpSize];
  const int64_t row = blockIdx.x, nvec = cols / VEC;
  const T* xr = x + row * cols;
  const MaxSum st = block_reduce(thread_stats<T, VEC>(xr, 0, nvec), red);
  normalize<T, VEC>(xr, y + row * cols, 0, nvec, st.m, 1.f / st.s, /*reverse=*/true);
}

// Kernel 1 of SplitRow: grid (chunks, rows); partial[row * chunks + chunk].
template <typename T, int VEC>
__global__ void __launch_bounds__(kSplitThreads)
    softmax_split_stats_kernel(const T* x, MaxSum* partial, int64_t cols, int64_t chunk_vecs) {
  __shared__ MaxSum red[kWarpSize];
  const int64_t row = blockIdx.y, nvec = cols / VEC, begin = blockIdx.x * chunk_vecs;
  const int64_t end = begin + chunk_vecs < nvec ? begin + chunk_vecs : nvec;
  const MaxSum st = block_reduce(thread_stats<T, VEC>(x + row * cols, begin, end), red);
  if (threadIdx.x == 0) partial[row * gridDim.x + blockIdx.x] = st;
}

// Kernel 2 of SplitRow: same grid; merge the row's partials, normalize the chunk.
template <typename T, int VEC>
__global__ void __launch_bounds__(kSplitThreads)
    softmax_split_norm_kernel(const T* x, T* y, const MaxSum* partial, int64_t cols,
                              int64_t chunk_vecs) {
  __shared__ MaxSum red[kWarpSize];
  const int64_t row = blockIdx.y, nvec = cols / VEC, begin = blockIdx.x * chunk_vecs;
  const int64_t end = begin + chunk_vecs < nvec ? begin + chunk_vecs : nvec;
  MaxSum st{kNegInf, 0.f};
  for (unsigned j = threadIdx.x; j < gridDim.x; j += blockDim.x)
    st = combine(st, partial[row * gridDim.x + j]);
  st = block_reduce(st, red);
  normalize<T, VEC>(x + row * cols, y + row * cols, begin, end, st.m, 1.f / st.s,
                    /*reverse=*/false);
}

// ------------------------------------------------------------------- host side
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// SplitRow chunk length in elements (a multiple of kSplitChunkQuantum, so of
// every vector width): aim for >= 2 blocks per SM over all rows.
int64_t split_chunk_elems(int64_t rows, int64_t cols, int sm_count) {
  const int64_t want = ceil_div(2 * static_cast<int64_t>(sm_count > 0 ? sm_count : 1), rows);
  return ceil_div(ceil_div(cols, want), kSplitChunkQuantum) * kSplitChunkQuantum;
}

template <typename T>
int pick_vec(const void* x, const void* y, int64_t cols, int max_vec) {
  const int v = vec16<T>() < max_vec ? vec16<T>() : max_vec;
  return aligned16(x) && aligned16(y) && cols % v == 0 ? v : 1;
}

template <typename T, int NV, int VEC>
cudaError_t launch_warp(const T* x, T* y, int64_t rows, int cols, cudaStream_t s) {
  const int64_t blocks = ceil_div(rows, kWarpRows);
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  softmax_warp_kernel<T, NV, VEC>
      <<<static_cast<unsigned>(blocks), kWarpRows * kWarpSize, 0, s>>>(x, y, rows, cols);
  return cudaGetLastError();
}

// ITEMS = elements per lane (power of two, 1..32).
template <typename T, int ITEMS>
cudaError_t warp_items(const T* x, T* y, int64_t rows, int cols, cudaStream_t s) {
  constexpr int kVec = vec16<T>() < ITEMS ? vec16<T>() : ITEMS;
  if (pick_vec<T>(x, y, cols, kVec) == kVec)
    return launch_warp<T, ITEMS / kVec, kVec>(x, y, rows, cols, s);
  return launch_warp<T, ITEMS, 1>(x, y, rows, cols, s);
}

template <typename T>
cudaError_t warp_per_row(const T* x, T* y, int64_t rows, int cols, cudaStream_t s) {
  if (cols > kWarpPerRowMaxCols) return cudaErrorInvalidValue;
  if (cols <= 32) return warp_items<T, 1>(x, y, rows, cols, s);
  if (cols <= 64) return warp_items<T, 2>(x, y, rows, cols, s);
  if (cols <= 128) return warp_items<T, 4>(x, y, rows, cols, s);
  if (cols <= 256) return warp_items<T, 8>(x, y, rows, cols, s);
  if (cols <= 512) return warp_items<T, 16>(x, y, rows, cols, s);
  return warp_items<T, 32>(x, y, rows, cols, s);
}

template <typename T>
cudaError_t online(const T* x, T* y, int64_t rows, int64_t cols, cudaStream_t s) {
  if (rows > 0x7fffffff) return cudaErrorInvalidValue;
  const unsigned grid = static_cast<unsigned>(rows);
  if (pick_vec<T>(x, y, cols, vec16<T>()) > 1)
    softmax_online_kernel<T, vec16<T>()><<<grid, kOnlineThreads, 0, s>>>(x, y, cols);
  else
    softmax_online_kernel<T, 1><<<grid, kOnlineThreads, 0, s>>>(x, y, cols);
  return cudaGetLastError();
}

template <typename T, int VEC, int NV>
cudaError_t block_nv(const T* x, T* y, int64_t rows, int cols, cudaStream_t s) {
  if constexpr (NV * VEC * 2 <= (VEC > 1 ? kBlockMaxItems : kBlockMaxItemsScalar)) {
    // Grow NV until the block is at most kBlockTargetThreads (or NV is capped).
    if (ceil_div(cols / VEC, NV) > kBlockTargetThreads)
      return block_nv<T, VEC, NV * 2>(x, y, rows, cols, s);
  }
  const int64_t threads = ceil_div(ceil_div(cols / VEC, NV), kWarpSize) * kWarpSize;
  if (threads > 1024 || rows > 0x7fffffff) return cudaErrorInvalidValue;
  softmax_block_kernel<T, NV, VEC>
      <<<static_cast<unsigned>(rows), static_cast<unsigned>(threads), 0, s>>>(x, y, cols);
  return cudaGetLastError();
}

template <typename T>
cudaError_t block_per_row(const T* x, T* y, int64_t rows, int cols, cudaStream_t s) {
  if (cols > kBlockPerRowMaxCols) return cudaErrorInvalidValue;
  if (pick_vec<T>(x, y, cols, vec16<T>()) > 1)
    return block_nv<T, vec16<T>(), 1>(x, y, rows, cols, s);
  // The scalar path holds at most 1024 * kBlockMaxItemsScalar elements per row.
  if (cols > 1024 * kBlockMaxItemsScalar) return online<T>(x, y, rows, cols, s);
  return block_nv<T, 1, 1>(x, y, rows, cols, s);
}

template <typename T, int VEC>
cudaError_t launch_split(const T* x, T* y, MaxSum* partial, int64_t rows, int64_t cols,
                         int64_t chunk, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(ceil_div(cols, chunk)), static_cast<unsigned>(rows));
  softmax_split_stats_kernel<T, VEC><<<grid, kSplitThreads, 0, s>>>(x, partial, cols, chunk / VEC);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  softmax_split_norm_kernel<T, VEC>
      <<<grid, kSplitThreads, 0, s>>>(x, y, partial, cols, chunk / VEC);
  return cudaGetLastError();
}

template <typename T>
cudaError_t split_row(const T* x, T* y, int64_t rows, int64_t cols, int sm_count, void* ws,
                      cudaStream_t s) {
  const int64_t chunk = split_chunk_elems(rows, cols, sm_count);
  if (ws == nullptr || rows > 65535 || ceil_div(cols, chunk) > 0x7fffffff)
    return cudaErrorInvalidValue;
  MaxSum* partial = static_cast<MaxSum*>(ws);
  if (pick_vec<T>(x, y, cols, vec16<T>()) > 1)
    return launch_split<T, vec16<T>()>(x, y, partial, rows, cols, chunk, s);
  return launch_split<T, 1>(x, y, partial, rows, cols, chunk, s);
}

template <typename T>
cudaError_t run(const void* xv, void* yv, int64_t rows, int64_t cols, SoftmaxVariant variant,
                int sm_count, void* ws, cudaStream_t s) {
  const T* x = static_cast<const T*>(xv);
  T* y = static_cast<T*>(yv);
  switch (variant) {
    case SoftmaxVariant::WarpPerRow: return warp_per_row<T>(x, y, rows, static_cast<int>(cols), s);
    case SoftmaxVariant::BlockPerRow:
      return block_per_row<T>(x, y, rows, static_cast<int>(cols), s);
    case SoftmaxVariant::Online: return online<T>(x, y, rows, cols, s);
    case SoftmaxVariant::SplitRow: return split_row<T>(x, y, rows, cols, sm_count, ws, s);
    case SoftmaxVariant::Auto: break;
  }
  return cudaErrorInvalidValue;
}

int elem_size(DType dtype) { return dtype == DType::Float32 ? 4 : 2; }

}  // namespace

SoftmaxVariant softmax_pick_variant(int64_t rows, int64_t cols, int elem_size, int sm_count) {
  if (cols <= kWarpPerRowMaxCols) return SoftmaxVariant::WarpPerRow;
  // Fewer rows than SMs: a block per row would leave SMs idle; splitting pays
  // a second launch and a re-read (from L2 if it fits), so only for long rows.
  if (rows < sm_count && cols * elem_size >= kSplitMinRowBytes) return SoftmaxVariant::SplitRow;
  if (cols <= kBlockPerRowMaxCols) return SoftmaxVariant::BlockPerRow;
  return SoftmaxVariant::Online;
}

int64_t softmax_workspace_bytes(int64_t rows, int64_t cols, DType dtype, int sm_count,
                                SoftmaxVariant variant) {
  if (variant == SoftmaxVariant::Auto)
    variant = softmax_pick_variant(rows, cols, elem_size(dtype), sm_count);
  if (variant != SoftmaxVariant::SplitRow || rows <= 0 || cols <= 0) return 0;
  return rows * ceil_div(cols, split_chunk_elems(rows, cols, sm_count)) *
         static_cast<int64_t>(sizeof(MaxSum));
}

cudaError_t softmax(const void* x, void* y, int64_t rows, int64_t cols, DType dtype,
                    SoftmaxVariant variant, int sm_count, void* workspace, cudaStream_t stream) {
  if (rows < 0 || cols < 0 || cols > 0x7fffffff) return cudaErrorInvalidValue;
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (variant == SoftmaxVariant::Auto)
    variant = softmax_pick_variant(rows, cols, elem_size(dtype), sm_count);
  switch (dtype) {
    case DType::Float32: return run<float>(x, y, rows, cols, variant, sm_count, workspace, stream);
    case DType::BFloat16:
      return run<__nv_bfloat16>(x, y, rows, cols, variant, sm_count, workspace, stream);
    case DType::Float16: return run<__half>(x, y, rows, cols, variant, sm_count, workspace, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace fusebench
