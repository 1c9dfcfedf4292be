// Numerically stable softmax over the last dimension of a contiguous
// row-major (rows, cols) tensor: y = exp(x - max(x)) / sum(exp(x - max(x))),
// fp32 arithmetic (expf, no fast-math), 16-bit types converted on load/store.
//
// Memory-bound: the ideal is one read and one write, 2 * itemsize bytes per
// element. Six variants here (see SoftmaxVariant in fusebench_cuda.h):
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
//  - Coop (cols <= CTAs per SM * SMs * chunk): one pass for long rows. A row
//    is split into chunks of kCoopChunkElems (THREADS x ITEMS elements), each
//    held in one CTA's registers; the `chunks` CTAs of a row (a group) publish
//    their chunk's (max, sum) partial to global memory, count arrivals, spin
//    until the whole group arrived, merge the partials (Milakov & Gimelshein
//    2018) and write y from registers: x is read once. A cooperative launch
//    makes every CTA co-resident, which is what makes the spin-wait safe.
//    Grid = groups * chunks <= capacity; a group loops over rows. Forced only:
//    softmax_pick_variant never picks it (measured slower than Cluster and
//    SplitRow on an H200).
// A seventh, Cluster (a row split over a thread-block cluster, partials through
// distributed shared memory), is in softmax_cluster.cu; softmax() dispatches it.
// All variants load 16-byte vectors when both base pointers are 16-byte
// aligned and cols is a multiple of the vector width, else scalars.
#include <atomic>
#include <cfloat>
#include <type_traits>

#include "common.cuh"

namespace fusebench {
namespace cuda {
namespace {

constexpr float kNegInf = -__builtin_huge_valf();

constexpr int kWarpRows = 4;             // WarpPerRow: warps per 128-thread block
constexpr int kWarpVecsPerThread = 4;    // WarpPerRow (16-byte path): vectors in flight per thread
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
constexpr int kMaxDevices = 64;          // Coop: per-device occupancy cache slots

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
      for (int i = 0; i < VEC; ++i) s[r] += (v[r][k][i] = expf(v[r][k][i] - m[r]));
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
      for (int k = 0; k < VEC; ++k) v[u][k] = expf(v[u][k] - st.m) * r;
      store_vec<T, VEC>(yr + i * VEC, v[u]);
    }
  }
  const int64_t step = static_cast<int64_t>(blockDim.x) * kUnroll;
  if (begin + step < end) normalize<T, VEC>(xr, yr, begin + step, end, st.m, r, /*reverse=*/false);
}

// --------------------------------------------------------------------- Coop
// Acquire load at GPU scope (PTX ISA "Memory Consistency Model"; sm_70+):
// later loads of this thread see every write that was visible to a thread
// before it released the value read here.
__device__ __forceinline__ int load_acquire_gpu(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// Grid = groups * chunks CTAs; CTA b is chunk c = b % chunks of group
// g = b / chunks and handles chunk c of rows g, g + groups, ... Its chunk
// covers columns [c * CHUNK, (c + 1) * CHUNK), CHUNK = THREADS * ITEMS; thread
// t holds vectors t, t + THREADS, ... (NV = ITEMS / VEC of them) in registers,
// out-of-row slots -inf. Per row:
//  1. m_c = block max (an all -inf chunk is clamped to -FLT_MAX, so its
//     partial is (-FLT_MAX, 0) and no exp(-inf + inf) arises), l_c = block
//     sum of expf(x - m_c).
//  2. Thread 0 stores (m_c, l_c) to partial[row * chunks + c] (L2, st.cg),
//     __threadfence() (release), atomicAdd(arrive[row], 1), then spins on an
//     acquire load until arrive[row] == chunks; __syncthreads() passes that
//     on to the CTA. The spin cannot deadlock only because the launch is
//     cooperative (cudaLaunchAttributeCooperative): the driver runs every CTA
//     of the grid at once or fails the launch (CUDA C++ Programming Guide,
//     "Cooperative Groups", grid synchronization / cooperative launch).
//  3. The row's partials (ld.cg, L1 bypassed) are merged into (M, L) with
//     combine() (Milakov & Gimelshein 2018, arXiv:1805.02867, eq. (4)); every
//     thread writes y = expf(x - M) * (1 / L) from its registers.
//  4. Thread 0 counts itself out (atomicAdd(depart[row], 1)); the last CTA
//     out (every other one has seen arrive[row] == chunks by then) resets
//     arrive[row] and depart[row] to 0, so the counters are all zero when the
//     launch ends. counters = {arrive[0], depart[0], arrive[1], ...}.
// Each row is handled by one group once per launch, so its partials and
// counters are not reused within a launch.
template <typename T, int THREADS, int ITEMS, int VEC>
__global__ void __launch_bounds__(THREADS)
    softmax_coop_kernel(const T* x, T* y, MaxSum* partial, int* counters, int64_t rows,
                        int64_t cols, int chunks, int groups) {
  static_assert(ITEMS % VEC == 0, "ITEMS must be a multiple of VEC");
  constexpr int NV = ITEMS / VEC;
  constexpr int CHUNK = THREADS * ITEMS;
  __shared__ float red_max[kWarpSize], red_sum[kWarpSize];
  __shared__ MaxSum red[kWarpSize];
  const int c = static_cast<int>(blockIdx.x) % chunks;
  // This thread's first column, and the columns left from there (may be <= 0): vector k is at
  // offset k * THREADS * VEC, a constant, and in the row when that is < left.
  const int64_t first = static_cast<int64_t>(c) * CHUNK + static_cast<int64_t>(threadIdx.x) * VEC;
  const int left = static_cast<int>(cols - first);  // > -CHUNK, as first < chunks * CHUNK
  for (int64_t row = static_cast<int>(blockIdx.x) / chunks; row < rows; row += groups) {
    const T* xt = x + row * cols + first;
    float v[NV][VEC];
    float m = kNegInf;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      load_or_fill<T, VEC>(xt + k * THREADS * VEC, k * THREADS * VEC < left, v[k]);
#pragma unroll
      for (int i = 0; i < VEC; ++i) m = fmaxf(m, v[k][i]);
    }
    m = block_reduce<MaxOp>(m, red_max);
    if (m == kNegInf) m = -FLT_MAX;
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < NV; ++k)
#pragma unroll
      for (int i = 0; i < VEC; ++i) s += expf(v[k][i] - m);
    s = block_reduce<SumOp>(s, red_sum);
    int* arrive = counters + 2 * row;
    int* depart = arrive + 1;
    MaxSum* part = partial + row * chunks;
    if (threadIdx.x == 0) {
      __stcg(reinterpret_cast<float2*>(part + c), make_float2(m, s));
      __threadfence();
      atomicAdd(arrive, 1);
      while (load_acquire_gpu(arrive) != chunks) {
      }
    }
    __syncthreads();
    MaxSum st{kNegInf, 0.f};
    for (int j = static_cast<int>(threadIdx.x); j < chunks; j += THREADS) {
      const float2 p = __ldcg(reinterpret_cast<const float2*>(part + j));
      st = combine(st, MaxSum{p.x, p.y});
    }
    st = block_reduce(st, red);  // its __syncthreads: every thread has read its partials
    if (threadIdx.x == 0 && atomicAdd(depart, 1) == chunks - 1) {
      atomicExch(arrive, 0);
      atomicExch(depart, 0);
    }
    const float r = 1.f / st.s;
    T* yt = y + row * cols + first;
#pragma unroll
    for (int k = 0; k < NV; ++k) {
      if (k * THREADS * VEC < left) {
#pragma unroll
        for (int i = 0; i < VEC; ++i) v[k][i] = expf(v[k][i] - st.m) * r;
        store_vec<T, VEC>(yt + k * THREADS * VEC, v[k]);
      }
    }
  }
}

// ------------------------------------------------------------------- host side
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// SplitRow chunk length in elements (a multiple of kSplitChunkQuantum, so of
// every vector width): kSplitChunkElems, halved while the grid would have fewer
// blocks than SMs, and grown so that a row has at most kSplitMaxChunks chunks.
// Measured on an H200 (scripts/tune_cuda.py at commit 8957408, us, chunk 1024 /
// 2048 / 4096 / 8192 / 16384; the previous rule, about 4 blocks per SM in total,
// in brackets): 256 x 262144 bf16 511 / 263 / 155 / 132 / 123 (134); 1 x 1048576
// bf16 16 / 9.3 / 7.9 / 9.0 / 11.3 (9.3); 4096 x 65536 bf16 1920 / 1023 / 592 / 495
// / 461 (461). Triton's own geometry (16 KB blocks of 256 threads, kernel 2 in
// reverse order) was slower here (148 us at 256 x 262144 bf16, commit c644c6d).
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
  if (pick_vec<T>(x, y, cols, vec16<T>()) == vec16<T>()) return warp_packed<T>(x, y, rows, cols, s);
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
  int device = 0, major = 0;
  err = cudaGetDevice(&device);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (err != cudaSuccess) return err;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kSplitThreads);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = major >= 9 && pdl ? 1 : 0;
  const T* xc = x;
  const MaxSum* pc = partial;
  const int64_t chunk_vecs = chunk / VEC;
  return cudaLaunchKernelEx(&cfg, softmax_split_norm_kernel<T, VEC>, xc, y, pc, cols, chunk_vecs);
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

// Coop with THREADS x ITEMS chunks: capacity = CTAs per SM (occupancy, cached
// per device) * sm_count; chunks = ceil(cols / CHUNK) must be <= capacity
// (else cudaErrorInvalidValue); groups = min(rows, capacity / chunks).
template <typename T, int THREADS, int ITEMS, int VEC>
cudaError_t launch_coop(const T* x, T* y, MaxSum* partial, int* counters, int64_t rows,
                        int64_t cols, int sm_count, cudaStream_t s) {
  static std::atomic<int> per_sm_cache[kMaxDevices] = {};
  const auto kernel = softmax_coop_kernel<T, THREADS, ITEMS, VEC>;
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  int per_sm = device < kMaxDevices ? per_sm_cache[device].load(std::memory_order_relaxed) : 0;
  if (per_sm == 0) {
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, THREADS, 0);
    if (err != cudaSuccess) return err;
    if (device < kMaxDevices) per_sm_cache[device].store(per_sm, std::memory_order_relaxed);
  }
  if (sm_count <= 0) {
    err = cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device);
    if (err != cudaSuccess) return err;
  }
  const int64_t capacity = static_cast<int64_t>(per_sm) * sm_count;
  const int64_t chunks = ceil_div(cols, int64_t{THREADS} * ITEMS);
  if (chunks > capacity || capacity > 0x7fffffff) return cudaErrorInvalidValue;
  const int64_t groups = capacity / chunks < rows ? capacity / chunks : rows;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(static_cast<unsigned>(groups * chunks));
  cfg.blockDim = dim3(THREADS);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  const int nchunks = static_cast<int>(chunks), ngroups = static_cast<int>(groups);
  err = cudaLaunchKernelEx(&cfg, kernel, x, y, partial, counters, rows, cols, nchunks, ngroups);
  if (err != cudaSuccess) (void)cudaGetLastError();  // a refused launch is not left pending
  return err;
}

template <typename T, int THREADS, int ITEMS>
cudaError_t coop_cfg(const T* x, T* y, MaxSum* partial, int* counters, int64_t rows, int64_t cols,
                     int sm_count, cudaStream_t s) {
  if (pick_vec<T>(x, y, cols, vec16<T>()) > 1)
    return launch_coop<T, THREADS, ITEMS, vec16<T>()>(x, y, partial, counters, rows, cols,
                                                      sm_count, s);
  return launch_coop<T, THREADS, ITEMS, 1>(x, y, partial, counters, rows, cols, sm_count, s);
}

// The chunk configurations of kCoopChunkElems (THREADS x ITEMS).
static_assert(sizeof(kCoopChunkElems) == 4 * sizeof(int) && kCoopChunkElems[0] == 4096 &&
                  kCoopChunkElems[1] == 8192 && kCoopChunkElems[2] == 16384 &&
                  kCoopChunkElems[3] == 32768,
              "coop() has a case for each of kCoopChunkElems");
template <typename T>
cudaError_t coop(const T* x, T* y, int64_t rows, int64_t cols, int chunk, int sm_count, void* ws,
                 int* counters, cudaStream_t s) {
  if (ws == nullptr || counters == nullptr) return cudaErrorInvalidValue;
  MaxSum* partial = static_cast<MaxSum*>(ws);
  switch (chunk == 0 ? kCoopDefaultChunkElems : chunk) {
    case 4096: return coop_cfg<T, 256, 16>(x, y, partial, counters, rows, cols, sm_count, s);
    case 8192: return coop_cfg<T, 512, 16>(x, y, partial, counters, rows, cols, sm_count, s);
    case 16384: return coop_cfg<T, 1024, 16>(x, y, partial, counters, rows, cols, sm_count, s);
    case 32768: return coop_cfg<T, 1024, 32>(x, y, partial, counters, rows, cols, sm_count, s);
    default: return cudaErrorInvalidValue;
  }
}

template <typename T>
cudaError_t run(const void* xv, void* yv, int64_t rows, int64_t cols, SoftmaxVariant variant,
                int sm_count, void* ws, int* counters, int coop_chunk, cudaStream_t s) {
  const T* x = static_cast<const T*>(xv);
  T* y = static_cast<T*>(yv);
  switch (variant) {
    case SoftmaxVariant::WarpPerRow: return warp_per_row<T>(x, y, rows, static_cast<int>(cols), s);
    case SoftmaxVariant::BlockPerRow:
      return block_per_row<T>(x, y, rows, static_cast<int>(cols), s);
    case SoftmaxVariant::Online: return online<T>(x, y, rows, cols, s);
    case SoftmaxVariant::SplitRow: return split_row<T>(x, y, rows, cols, sm_count, ws, s);
    case SoftmaxVariant::OnlineL2: return online_l2<T>(x, y, rows, cols, sm_count, s);
    case SoftmaxVariant::Coop:
      return coop<T>(x, y, rows, cols, coop_chunk, sm_count, ws, counters, s);
    case SoftmaxVariant::Cluster:  // dispatched by softmax() (softmax_cluster.cu)
    case SoftmaxVariant::Auto: break;
  }
  return cudaErrorInvalidValue;
}

int elem_size(DType dtype) { return dtype == DType::Float32 ? 4 : 2; }

}  // namespace

SoftmaxVariant softmax_pick_variant(int64_t rows, int64_t cols, int elem_size, int sm_count) {
  if (cols <= kWarpPerRowMaxCols) return SoftmaxVariant::WarpPerRow;
  // Long float32 rows that a portable cluster (<= 8 CTAs of softmax_cluster_chunk elements)
  // holds: Cluster reads x once. Measured on an H200 (scripts/tune_cuda.py at commit 5790afd):
  // 4096 x 65536 642 us against 711 (online_l2) and 719 (triton); 256 x 262144 197 us against
  // 205 (online). 16-bit rows were slower with it than split (183 against 129 us at
  // 256 x 262144), so they keep the two-pass variants. softmax() falls back to Online where
  // Cluster cannot run (below sm_90, unaligned rows, cols not a multiple of 4).
  // Coop (co-resident CTAs waiting on global counters) is never picked: slower than Cluster or
  // SplitRow on every case measured (e.g. 309 us at 256 x 262144 float32).
  if (elem_size == 4 && cols > kBlockPerRowMaxCols) {
    const int chunk = softmax_cluster_chunk(cols, elem_size);
    if (chunk > 0 && ceil_div(cols, chunk) <= 8) return SoftmaxVariant::Cluster;
  }
  // Fewer rows than SMs: a block per row would leave SMs idle; splitting pays
  // a second launch and a re-read (from L2 if it fits), so only for long rows.
  if (rows < sm_count && cols * elem_size >= kSplitMinRowBytes) return SoftmaxVariant::SplitRow;
  if (cols <= kBlockPerRowMaxCols) return SoftmaxVariant::BlockPerRow;
  // Long 16-bit rows: split_row measured fastest on an H200 (scripts/tune_cuda.py at commit
  // 5790afd: 4096 x 65536 bf16 462 us against 502 (online) and 535 (online_l2); 256 x 262144
  // bf16 133 against 134 and 135).
  if (elem_size == 2 && rows <= 65535) return SoftmaxVariant::SplitRow;
  // Long rows: with one block per row, far more rows are in flight than L2
  // holds, so pass 2 re-reads mostly from DRAM; one block per SM keeps the
  // re-read in L2 when sm_count rows fit in kOnlineL2BudgetBytes.
  if (rows >= 2 * static_cast<int64_t>(sm_count) &&
      static_cast<int64_t>(sm_count) * cols * elem_size <= kOnlineL2BudgetBytes)
    return SoftmaxVariant::OnlineL2;
  return SoftmaxVariant::Online;
}

int64_t softmax_workspace_bytes(int64_t rows, int64_t cols, DType dtype, int sm_count,
                                SoftmaxVariant variant, int coop_chunk_elems) {
  if (variant == SoftmaxVariant::Auto)
    variant = softmax_pick_variant(rows, cols, elem_size(dtype), sm_count);
  if (rows <= 0 || cols <= 0) return 0;
  if (variant == SoftmaxVariant::SplitRow)
    return rows * ceil_div(cols, split_chunk_elems(rows, cols, sm_count)) *
           static_cast<int64_t>(sizeof(MaxSum));
  if (variant == SoftmaxVariant::Coop) {
    const int64_t chunk = coop_chunk_elems > 0 ? coop_chunk_elems : kCoopDefaultChunkElems;
    return rows * ceil_div(cols, chunk) * static_cast<int64_t>(sizeof(MaxSum));
  }
  return 0;
}

int64_t softmax_counter_ints(int64_t rows, int64_t cols, DType dtype, int sm_count,
                             SoftmaxVariant variant) {
  if (variant == SoftmaxVariant::Auto)
    variant = softmax_pick_variant(rows, cols, elem_size(dtype), sm_count);
  return variant == SoftmaxVariant::Coop && rows > 0 && cols > 0 ? 2 * rows : 0;
}

cudaError_t softmax(const void* x, void* y, int64_t rows, int64_t cols, DType dtype,
                    SoftmaxVariant variant, int sm_count, void* workspace, int* counters,
                    cudaStream_t stream, int coop_chunk_elems) {
  if (rows < 0 || cols < 0 || cols > 0x7fffffff) return cudaErrorInvalidValue;
  if (coop_chunk_elems != 0 && !softmax_coop_chunk_supported(coop_chunk_elems))
    return cudaErrorInvalidValue;
  if (rows == 0 || cols == 0) return cudaSuccess;
  const bool picked = variant == SoftmaxVariant::Auto;
  if (picked) variant = softmax_pick_variant(rows, cols, elem_size(dtype), sm_count);
  if (variant == SoftmaxVariant::Cluster) {
    const cudaError_t err = softmax_cluster(x, y, rows, cols, dtype, 0, stream);
    // Refused before any launch (below sm_90, unaligned, cols not a multiple of the vector):
    // an automatic pick falls back to Online, which needs no workspace.
    if (!picked || (err != cudaErrorNotSupported && err != cudaErrorInvalidValue)) return err;
    variant = SoftmaxVariant::Online;
  }
  const int cc = coop_chunk_elems;
  switch (dtype) {
    case DType::Float32:
      return run<float>(x, y, rows, cols, variant, sm_count, workspace, counters, cc, stream);
    case DType::BFloat16:
      return run<__nv_bfloat16>(x, y, rows, cols, variant, sm_count, workspace, counters, cc,
                                stream);
    case DType::Float16:
      return run<__half>(x, y, rows, cols, variant, sm_count, workspace, counters, cc, stream);
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
