// Numerically stable softmax over the last dimension of a contiguous
// row-major (rows, cols) tensor: y = exp(x - max(x)) / sum(exp(x - max(x))),
// fp32 arithmetic (exp as Triton computes it: exp_approx in common.cuh; no fast-math
// flags), 16-bit types converted on load/store.
//
// Memory-bound: the ideal is one read and one write, 2 * itemsize bytes per
// element. Five variants here (see SoftmaxVariant in fusebench_cuda.h):
//  - WarpPerRow (cols <= 1024): a warp (or, for rows of < 32 16-byte
//    vectors, a sub-warp group) per row, the row in registers, shuffles
//    only; short rows pack several rows per group so each thread keeps
//    kWarpVecsPerThread 16-byte vectors in flight. The "persistent softmax"
//    of Apex / PyTorch (aten/src/ATen/native/cuda/PersistentSoftmax.cuh).
//  - BlockPerRow (cols <= 32768): one block per row, the row in registers
//    (<= 32 fp32 values per thread), two block reductions (warp shuffles +
//    shared memory). Reads the input once. The scalar (unaligned) path holds
//    <= 16 values per thread; longer such rows run Online instead.
//  - Online (any cols): one block per row; pass 1 keeps a running (max, sum)
//    per thread and merges them (Milakov & Gimelshein 2018, "Online normalizer
//    calculation for softmax", arXiv:1805.02867); pass 2 walks the row's
//    chunks in reverse, so the chunks read last in pass 1 (most likely still
//    in L2) are re-read first.
//  - OnlineL2 (any cols): Online with one 1024-thread block per SM looping
//    over rows, so only sm_count rows are in flight; when they fit in L2,
//    pass 2 re-reads from L2 instead of DRAM.
//  - SplitRow (any cols): a row is split into chunks of whole blocks so few,
//    long rows still fill the GPU. Kernel 1 writes each chunk's (max, sum)
//    partial; kernel 2 (a programmatic dependent launch on sm_90+) loads its
//    chunk while kernel 1 finishes, then merges its row's partials and
//    normalizes the chunk (re-read from L2 when rows * cols * itemsize fits).
// Cluster (a row split over a thread-block cluster, partials through distributed
// shared memory) is in softmax_cluster.cu and Tma in softmax_tma.cu; softmax() dispatches them.
// All variants load 16-byte vectors when both base pointers are 16-byte
// aligned and cols is a multiple of the vector width, else scalars.
#include <type_traits>

#include "common.cuh"

namespace fusebench {
namespace cuda {
namespace {

constexpr float kNegInf = -__builtin_huge_valf();

constexpr int kWarpRows = 4;             // WarpPerRow: warps per 128-thread block
constexpr int kWarpVecsPerThread = 4;    // WarpPerRow (16-byte path): vectors in flight per thread
// ... for 16-bit types: 2, the fastest in both 16-bit dtypes at 65536 x 128; float32 keeps 4
// (docs/tuning/softmax.md).
constexpr int kWarpVecsPerThread16 = 2;
constexpr int kBlockTargetThreads = 256; // BlockPerRow: preferred block size
constexpr int kBlockMaxItems = 32;       // BlockPerRow: fp32 values per thread (vectorized)
constexpr int kBlockMaxItemsScalar = 16; // ... scalar path (32 spills under 64 registers)
constexpr int kOnlineThreads = 512;      // Online: block size
constexpr int kOnlineL2Threads = 1024;   // OnlineL2: block size (one block per SM)
constexpr int64_t kOnlineL2BudgetBytes = int64_t{36} << 20;  // rows in flight, < 50 MiB H100/H200 L2
constexpr int kSplitThreads = 128;       // SplitRow: block size
constexpr int64_t kSplitChunkElems = 16384;  // SplitRow: longest chunk (elements) by default
constexpr int64_t kSplitMaxChunks = 1024;    // SplitRow: chunks per row at most (kernel 2 reads all)
constexpr int kUnroll = 4;               // Online/SplitRow: vectors in flight per thread
constexpr int64_t kSplitChunkQuantum = 1024;  // SplitRow chunk granule (elements)
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
// A group of LANES lanes (a whole warp when LANES == 32, else a sub-warp)
// owns ROWS rows; lane l of a group holds vectors l, l + LANES, ... (NV of
// them) of each: ITEMS = NV * VEC elements per row, cols <= LANES * ITEMS.
// The warp's rows are consecutive, row r of group g being warp_first +
// r * (32 / LANES) + g, so one load instruction covers 32 / LANES adjacent
// rows. Short 16-bit rows (128 bf16 columns = 16 x 16 bytes) thus still use
// 16-byte vectors on every lane, and ROWS keeps several vectors per thread in
// flight. Reductions are butterflies of width LANES. Out-of-row slots hold
// -inf and are not stored; out-of-range rows are computed but not stored.
template <typename T, int NV, int VEC, int LANES, int ROWS>
__global__ void __launch_bounds__(kWarpRows * kWarpSize)
    softmax_warp_kernel(const T* x, T* y, int64_t rows, int cols) {
  constexpr int kGroups = kWarpSize / LANES;
  const int lane = threadIdx.x % kWarpSize, sub = lane % LANES;
  const int64_t first =
      (static_cast<int64_t>(blockIdx.x) * kWarpRows + threadIdx.x / kWarpSize) * kGroups * ROWS +
      lane / LANES;
  if (first - lane / LANES >= rows) return;  // uniform per warp
  float v[ROWS][NV][VEC];
  float m[ROWS], s[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    const int64_t row = first + r * kGroups;
    m[r] = kNegInf;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int c = (k * LANES + sub) * VEC;
      const bool ok = row < rows && c < cols;
      load_or_fill<T, VEC>(ok ? x + row * cols + c : x, ok, v[r][k]);
#pragma unroll
      for (int i = 0; i < VEC; ++i) m[r] = fmaxf(m[r], v[r][k][i]);
    }
  }
#pragma unroll
  for (int r = 0; r < ROWS; ++r) m[r] = warp_reduce<MaxOp, LANES>(m[r]);
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    s[r] = 0.f;
#pragma unroll
    for (int k = 0; k < NV; ++k)
#pragma unroll
      for (int i = 0; i < VEC; ++i) s[r] += (v[r][k][i] = exp_approx(v[r][k][i] - m[r]));
  }
#pragma unroll
  for (int r = 0; r < ROWS; ++r) s[r] = 1.f / warp_reduce<SumOp, LANES>(s[r]);
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    const int64_t row = first + r * kGroups;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      const int c = (k * LANES + sub) * VEC;
      if (row < rows && c < cols) {
#pragma unroll
        for (int i = 0; i < VEC; ++i) v[r][k][i] *= s[r];
        store_vec<T, VEC>(y + row * cols + c, v[r][k]);
      }
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
    for (int i = 0; i < VEC; ++i) s += (v[k][i] = exp_approx(v[k][i] - m));
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
// steps of blockDim.x * kUnroll vectors; one merge (two exps) per step.
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
      for (int k = 0; k < VEC; ++k) cs += exp_approx(v[u][k] - cm);
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
        for (int k = 0; k < VEC; ++k) v[u][k] = exp_approx(v[u][k] - m) * r;
        store_vec<T, VEC>(yr + i * VEC, v[u]);
      }
    }
  }
}

// Block b handles rows b, b + gridDim.x, ... (one row when the grid covers
// every row; the OnlineL2 launch caps the grid so that the rows in flight fit
// in L2 and pass 2 re-reads from there).
template <typename T, int VEC, int THREADS>
__global__ void __launch_bounds__(THREADS) softmax_online_kernel(const T* x, T* y, int64_t rows,
                                                                 int64_t cols) {
  __shared__ MaxSum red[kWarpSize];
  const int64_t nvec = cols / VEC;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * cols;
    const MaxSum st = block_reduce(thread_stats<T, VEC>(xr, 0, nvec), red);
    normalize<T, VEC>(xr, y + row * cols, 0, nvec, st.m, 1.f / st.s, /*reverse=*/true);
    __syncthreads();  // `red` is rewritten by the next row's reduction
  }
}

// Programmatic dependent launch (sm_90+): the primary kernel lets the
// dependent one start early; the dependent one waits (griddepcontrol.wait)
// until the primary grid has completed and its writes are visible. No-ops
// on older GPUs, where the host also launches without the attribute.
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
}

// Kernel 1 of SplitRow: grid (chunks, rows); partial[row * chunks + chunk].
template <typename T, int VEC>
__global__ void __launch_bounds__(kSplitThreads)
    softmax_split_stats_kernel(const T* x, MaxSum* partial, int64_t cols, int64_t chunk_vecs) {
  __shared__ MaxSum red[kWarpSize];
  pdl_trigger();  // kernel 2 may start prefetching x now
  const int64_t row = blockIdx.y, nvec = cols / VEC, begin = blockIdx.x * chunk_vecs;
  const int64_t end = begin + chunk_vecs < nvec ? begin + chunk_vecs : nvec;
  const MaxSum st = block_reduce(thread_stats<T, VEC>(x + row * cols, begin, end), red);
  if (threadIdx.x == 0) partial[row * gridDim.x + blockIdx.x] = st;
}

// Kernel 2 of SplitRow: same grid. Loads the chunk's first step of x (which
// kernel 1 does not write) before waiting for kernel 1, then merges the
// row's partials and normalizes the chunk.
template <typename T, int VEC>
__global__ void __launch_bounds__(kSplitThreads)
    softmax_split_norm_kernel(const T* x, T* y, const MaxSum* partial, int64_t cols,
                              int64_t chunk_vecs) {
  __shared__ MaxSum red[kWarpSize];
  const int64_t row = blockIdx.y, nvec = cols / VEC, begin = blockIdx.x * chunk_vecs;
  const int64_t end = begin + chunk_vecs < nvec ? begin + chunk_vecs : nvec;
  const T* xr = x + row * cols;
  T* yr = y + row * cols;
  float v[kUnroll][VEC];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t i = begin + threadIdx.x + static_cast<int64_t>(u) * blockDim.x;
    if (i < end) load_vec<T, VEC>(xr + i * VEC, v[u]);
  }
  pdl_wait();
  MaxSum st{kNegInf, 0.f};
  for (unsigned j = threadIdx.x; j < gridDim.x; j += blockDim.x)
    st = combine(st, partial[row * gridDim.x + j]);
  st = block_reduce(st, red);
  const float r = 1.f / st.s;
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t i = begin + threadIdx.x + static_cast<int64_t>(u) * blockDim.x;
    if (i < end) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) v[u][k] = exp_approx(v[u][k] - st.m) * r;
      store_vec<T, VEC>(yr + i * VEC, v[u]);
    }
  }
  const int64_t step = static_cast<int64_t>(blockDim.x) * kUnroll;
  if (begin + step < end) normalize<T, VEC>(xr, yr, begin + step, end, st.m, r, /*reverse=*/false);
}

// ------------------------------------------------------------------- host side

// SplitRow chunk length in elements (a multiple of kSplitChunkQuantum, so of
// every vector width): kSplitChunkElems, halved while the grid would have fewer
// blocks than SMs, and grown so that a row has at most kSplitMaxChunks chunks
// (the chunk lengths measured: docs/tuning/softmax.md).
int64_t split_chunk_elems(int64_t rows, int64_t cols, int sm_count) {
  const int64_t sms = sm_count > 0 ? sm_count : 1;
  int64_t chunk = kSplitChunkElems;
  while (chunk > kSplitChunkQuantum && rows * ceil_div(cols, chunk) < sms) chunk /= 2;
  const int64_t longest = ceil_div(ceil_div(cols, kSplitMaxChunks), kSplitChunkQuantum);
  return chunk > longest * kSplitChunkQuantum ? chunk : longest * kSplitChunkQuantum;
}

template <typename T>
int pick_vec(const void* x, const void* y, int64_t cols, int max_vec) {
  const int v = vec16<T>() < max_vec ? vec16<T>() : max_vec;
  return aligned16(x) && aligned16(y) && cols % v == 0 ? v : 1;
}

template <typename T, int NV, int VEC, int LANES = kWarpSize, int ROWS = 1>
cudaError_t launch_warp(const T* x, T* y, int64_t rows, int cols, cudaStream_t s) {
  const int64_t blocks = ceil_div(rows, int64_t{kWarpRows} * (kWarpSize / LANES) * ROWS);
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  softmax_warp_kernel<T, NV, VEC, LANES, ROWS>
      <<<static_cast<unsigned>(blocks), kWarpRows * kWarpSize, 0, s>>>(x, y, rows, cols);
  return cudaGetLastError();
}

// ITEMS = elements per lane (power of two, 1..32), a whole warp per row.
template <typename T, int ITEMS>
cudaError_t warp_items(const T* x, T* y, int64_t rows, int cols, cudaStream_t s) {
  constexpr int kVec = vec16<T>() < ITEMS ? vec16<T>() : ITEMS;
  if (pick_vec<T>(x, y, cols, kVec) == kVec)
    return launch_warp<T, ITEMS / kVec, kVec>(x, y, rows, cols, s);
  return launch_warp<T, ITEMS, 1>(x, y, rows, cols, s);
}

// 16-byte vectors only (aligned, cols % VEC == 0): LANES = the row's vector
// count rounded up to a power of two (<= 32), NV vectors per lane and row,
// ROWS rows per group so that each thread keeps kWarpVecsPerThread vectors
// in flight (fewer only for rows longer than that alone provides).
template <typename T, int R = kWarpVecsPerThread>
cudaError_t warp_packed(const T* x, T* y, int64_t rows, int cols, cudaStream_t s) {
  constexpr int V = vec16<T>();
  const int nvec = cols / V;
  if (nvec <= 1) return launch_warp<T, 1, V, 1, R>(x, y, rows, cols, s);
  if (nvec <= 2) return launch_warp<T, 1, V, 2, R>(x, y, rows, cols, s);
  if (nvec <= 4) return launch_warp<T, 1, V, 4, R>(x, y, rows, cols, s);
  if (nvec <= 8) return launch_warp<T, 1, V, 8, R>(x, y, rows, cols, s);
  if (nvec <= 16) return launch_warp<T, 1, V, 16, R>(x, y, rows, cols, s);
  if (nvec <= 32) return launch_warp<T, 1, V, 32, R>(x, y, rows, cols, s);
  if (nvec <= 64) return launch_warp<T, 2, V, 32, (R / 2 > 1 ? R / 2 : 1)>(x, y, rows, cols, s);
  if (nvec <= 128) return launch_warp<T, 4, V, 32, (R / 4 > 1 ? R / 4 : 1)>(x, y, rows, cols, s);
  return launch_warp<T, 8, V, 32, 1>(x, y, rows, cols, s);
}

template <typename T>
cudaError_t warp_per_row(const T* x, T* y, int64_t rows, int cols, cudaStream_t s) {
  if (cols > kWarpPerRowMaxCols) return cudaErrorInvalidValue;
  if (pick_vec<T>(x, y, cols, vec16<T>()) == vec16<T>())
    return warp_packed<T, sizeof(T) == 2 ? kWarpVecsPerThread16 : kWarpVecsPerThread>(x, y, rows,
                                                                                       cols, s);
  if (cols <= 32) return warp_items<T, 1>(x, y, rows, cols, s);
  if (cols <= 64) return warp_items<T, 2>(x, y, rows, cols, s);
  if (cols <= 128) return warp_items<T, 4>(x, y, rows, cols, s);
  if (cols <= 256) return warp_items<T, 8>(x, y, rows, cols, s);
  if (cols <= 512) return warp_items<T, 16>(x, y, rows, cols, s);
  return warp_items<T, 32>(x, y, rows, cols, s);
}

// Online with grid = min(rows, max_grid); max_grid 0 means one block per row.
template <typename T, int THREADS>
cudaError_t launch_online(const T* x, T* y, int64_t rows, int64_t cols, int64_t max_grid,
                          cudaStream_t s) {
  const int64_t grid = max_grid > 0 && max_grid < rows ? max_grid : rows;
  if (grid > 0x7fffffff) return cudaErrorInvalidValue;
  const unsigned g = static_cast<unsigned>(grid);
  if (pick_vec<T>(x, y, cols, vec16<T>()) > 1)
    softmax_online_kernel<T, vec16<T>(), THREADS><<<g, THREADS, 0, s>>>(x, y, rows, cols);
  else
    softmax_online_kernel<T, 1, THREADS><<<g, THREADS, 0, s>>>(x, y, rows, cols);
  return cudaGetLastError();
}

template <typename T>
cudaError_t online(const T* x, T* y, int64_t rows, int64_t cols, cudaStream_t s) {
  return launch_online<T, kOnlineThreads>(x, y, rows, cols, 0, s);
}

// OnlineL2: one kOnlineL2Threads block per SM, each looping over rows, so
// sm_count rows are in flight (sm_count * row bytes, within L2 when
// softmax_pick_variant chooses it) and pass 2's reverse re-read hits L2.
template <typename T>
cudaError_t online_l2(const T* x, T* y, int64_t rows, int64_t cols, int sm_count,
                      cudaStream_t s) {
  return launch_online<T, kOnlineL2Threads>(x, y, rows, cols, sm_count > 0 ? sm_count : 1, s);
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
                         int64_t chunk, bool pdl, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(ceil_div(cols, chunk)), static_cast<unsigned>(rows));
  softmax_split_stats_kernel<T, VEC><<<grid, kSplitThreads, 0, s>>>(x, partial, cols, chunk / VEC);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  // Kernel 2 as a programmatic dependent launch where the GPU supports it.
  return launch(softmax_split_norm_kernel<T, VEC>, grid, dim3(kSplitThreads), 0, s,
                LaunchAttr::pdl(pdl), x, y, partial, cols, chunk / VEC);
}

// chunk 0: split_chunk_elems; pdl: kernel 2 as a programmatic dependent launch (sm_90+).
template <typename T>
cudaError_t split_row(const T* x, T* y, int64_t rows, int64_t cols, int sm_count, void* ws,
                      cudaStream_t s, int64_t chunk = 0, bool pdl = true) {
  if (chunk == 0) chunk = split_chunk_elems(rows, cols, sm_count);
  if (ws == nullptr || rows > 65535 || chunk % kSplitChunkQuantum != 0 ||
      ceil_div(cols, chunk) > 0x7fffffff)
    return cudaErrorInvalidValue;
  MaxSum* partial = static_cast<MaxSum*>(ws);
  if (pick_vec<T>(x, y, cols, vec16<T>()) > 1)
    return launch_split<T, vec16<T>()>(x, y, partial, rows, cols, chunk, pdl, s);
  return launch_split<T, 1>(x, y, partial, rows, cols, chunk, pdl, s);
}

// warp_per_row's 16-byte path with R vectors in flight per thread (tuning).
template <typename T>
cudaError_t warp_tuned(const T* x, T* y, int64_t rows, int cols, int vecs, cudaStream_t s) {
  if (cols > kWarpPerRowMaxCols || pick_vec<T>(x, y, cols, vec16<T>()) != vec16<T>())
    return cudaErrorInvalidValue;
  switch (vecs) {
    case 1: return warp_packed<T, 1>(x, y, rows, cols, s);
    case 2: return warp_packed<T, 2>(x, y, rows, cols, s);
    case 4: return warp_packed<T, 4>(x, y, rows, cols, s);
    case 8: return warp_packed<T, 8>(x, y, rows, cols, s);
    default: return cudaErrorInvalidValue;
  }
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
    case SoftmaxVariant::OnlineL2: return online_l2<T>(x, y, rows, cols, sm_count, s);
    case SoftmaxVariant::Cluster:  // dispatched by softmax() (softmax_cluster.cu)
    case SoftmaxVariant::Tma:      // dispatched by softmax() (softmax_tma.cu)
    case SoftmaxVariant::Auto: break;
  }
  return cudaErrorInvalidValue;
}

int elem_size(DType dtype) { return dtype == DType::Float32 ? 4 : 2; }

}  // namespace

namespace {
// The pick without the Tma variants: what softmax() falls back to where they cannot run.
SoftmaxVariant pick_classic(int64_t rows, int64_t cols, int elem_size, int sm_count) {
  if (cols <= kWarpPerRowMaxCols) return SoftmaxVariant::WarpPerRow;
  // Cluster is chosen, where it is, by softmax_pick_variant; this is also the fallback where it
  // cannot run.
  // Fewer rows than SMs: a block per row would leave SMs idle; splitting pays
  // a second launch and a re-read (from L2 if it fits), so only for long rows.
  if (rows < sm_count && cols * elem_size >= kSplitMinRowBytes) return SoftmaxVariant::SplitRow;
  if (cols <= kBlockPerRowMaxCols) return SoftmaxVariant::BlockPerRow;
  // Long 16-bit rows (where Cluster and Tma cannot run, or fewer rows than SMs): split_row
  // measured fastest of the two-pass variants (docs/tuning/softmax.md).
  if (elem_size == 2 && rows <= 65535) return SoftmaxVariant::SplitRow;
  // Long rows: with one block per row, far more rows are in flight than L2
  // holds, so pass 2 re-reads mostly from DRAM; one block per SM keeps the
  // re-read in L2 when sm_count rows fit in kOnlineL2BudgetBytes.
  if (rows >= 2 * static_cast<int64_t>(sm_count) &&
      static_cast<int64_t>(sm_count) * cols * elem_size <= kOnlineL2BudgetBytes)
    return SoftmaxVariant::OnlineL2;
  return SoftmaxVariant::Online;
}
}  // namespace

// Tma, from reasoning (fusebench tune cuda times every config beside the classic variants): it
// reads x once from DRAM with the whole chunk in flight, where the classic variants either hold
// the row in registers (block_per_row: few bytes in flight per SM at 16 bits) or re-read it.
// Short rows (<= 8192 float32, <= 4096 16-bit: a few KB per CTA) keep their register variants,
// which match QuACK there.
SoftmaxVariant softmax_pick_variant(int64_t rows, int64_t cols, int elem_size, int sm_count) {
  // Cluster (softmax_cluster.cu) for rows longer than 16384 that 16 CTAs of the default chunk
  // hold, where the row's CTAs fill at least half the SMs: ahead of tma and block_per_row there.
  // Rows of 16384 stay as they were, cluster being within a point. Rows whose CTAs would fill
  // fewer than half the SMs go to split_row (through the classic pick), which spreads a row over
  // more CTAs.
  if (elem_size != 2 && elem_size != 4) return pick_classic(rows, cols, elem_size, sm_count);
  if (cols > 16384) {
    const int chunk = softmax_cluster_chunk(cols, elem_size);
    if (chunk > 0 && rows * ceil_div(cols, chunk) >= sm_count / 2) return SoftmaxVariant::Cluster;
  }
  const int64_t min_cols = elem_size == 4 ? 32769 : 16384;
  if (cols >= min_cols) {
    const int groups = softmax_tma_groups(rows, cols, elem_size, TmaConfig{});
    const bool few_rows = rows * groups < sm_count / 2;  // one long row: split_row spreads it wider
    if (groups > 0 && groups <= 16 && !few_rows) return SoftmaxVariant::Tma;
  }
  return pick_classic(rows, cols, elem_size, sm_count);
}

namespace {
int64_t workspace_of(int64_t rows, int64_t cols, int sm_count, SoftmaxVariant variant) {
  if (rows <= 0 || cols <= 0) return 0;
  if (variant == SoftmaxVariant::SplitRow)
    return rows * ceil_div(cols, split_chunk_elems(rows, cols, sm_count)) *
           static_cast<int64_t>(sizeof(MaxSum));
  return 0;
}
int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
}  // namespace

// Auto: enough for the pick and for the classic pick softmax() falls back to when Tma or Cluster
// is refused at run time.
int64_t softmax_workspace_bytes(int64_t rows, int64_t cols, DType dtype, int sm_count,
                                SoftmaxVariant variant) {
  if (variant != SoftmaxVariant::Auto) return workspace_of(rows, cols, sm_count, variant);
  const int es = elem_size(dtype);
  return max64(workspace_of(rows, cols, sm_count, softmax_pick_variant(rows, cols, es, sm_count)),
               workspace_of(rows, cols, sm_count, pick_classic(rows, cols, es, sm_count)));
}

cudaError_t softmax(const void* x, void* y, int64_t rows, int64_t cols, DType dtype,
                    SoftmaxVariant variant, int sm_count, void* workspace, cudaStream_t stream) {
  if (rows < 0 || cols < 0 || cols > 0x7fffffff) return cudaErrorInvalidValue;
  if (rows == 0 || cols == 0) return cudaSuccess;
  const bool picked = variant == SoftmaxVariant::Auto;
  if (picked) variant = softmax_pick_variant(rows, cols, elem_size(dtype), sm_count);
  if (variant == SoftmaxVariant::Tma) {
    const cudaError_t err = softmax_tma(x, y, rows, cols, dtype, TmaConfig{}, stream);
    // Refused before any launch (below sm_90, unaligned, cols not a multiple of the vector): an
    // automatic pick falls back to the classic pick (covered by softmax_workspace_bytes of Auto).
    if (!picked || (err != cudaErrorNotSupported && err != cudaErrorInvalidValue)) return err;
    variant = pick_classic(rows, cols, elem_size(dtype), sm_count);
  }
  if (variant == SoftmaxVariant::Cluster) {
    const cudaError_t err = softmax_cluster(x, y, rows, cols, dtype, 0, stream);
    // Refused before any launch (below sm_90, unaligned, cols not a multiple of the vector): an
    // automatic pick falls back to the classic pick (covered by softmax_workspace_bytes of Auto).
    if (!picked || (err != cudaErrorNotSupported && err != cudaErrorInvalidValue)) return err;
    variant = pick_classic(rows, cols, elem_size(dtype), sm_count);
  }
  switch (dtype) {
    case DType::Float32: return run<float>(x, y, rows, cols, variant, sm_count, workspace, stream);
    case DType::BFloat16:
      return run<__nv_bfloat16>(x, y, rows, cols, variant, sm_count, workspace, stream);
    case DType::Float16: return run<__half>(x, y, rows, cols, variant, sm_count, workspace, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t softmax_tuned(const void* xv, void* yv, int64_t rows, int64_t cols, DType dtype,
                          SoftmaxVariant variant, int64_t param, int flag, int sm_count, void* ws,
                          cudaStream_t s) {
  if (rows <= 0 || cols <= 0 || cols > 0x7fffffff) return cudaErrorInvalidValue;
  auto go = [&](auto* x, auto* y) -> cudaError_t {
    using T = std::remove_const_t<std::remove_pointer_t<decltype(x)>>;
    if (variant == SoftmaxVariant::SplitRow)
      return split_row<T>(x, y, rows, cols, sm_count, ws, s, param, flag != 0);
    if (variant == SoftmaxVariant::WarpPerRow)
      return warp_tuned<T>(x, y, rows, static_cast<int>(cols), static_cast<int>(param), s);
    return cudaErrorInvalidValue;
  };
  switch (dtype) {
    case DType::Float32:
      return go(static_cast<const float*>(xv), static_cast<float*>(yv));
    case DType::BFloat16:
      return go(static_cast<const __nv_bfloat16*>(xv), static_cast<__nv_bfloat16*>(yv));
    case DType::Float16: return go(static_cast<const __half*>(xv), static_cast<__half*>(yv));
  }
  return cudaErrorInvalidValue;
}

}  // namespace cuda
}  // namespace fusebench
