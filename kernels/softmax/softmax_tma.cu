// Softmax with the row (or a CTA's share of it) staged in SHARED memory by Hopper bulk copies
// (sm_90+): variant Tma, a row split over a thread-block cluster. One read and one write of every
// element.
//
// Method (the shape of QuACK's softmax, Dao-AILab/quack quack/softmax.py and
// quack/reduction_base.py: row in shared memory, loads all in flight at once, cluster size from
// the row length, partials through distributed shared memory; our own code):
//  1. A row is split into `groups` consecutive chunks of `chunk` elements (a multiple of the
//     16-byte vector), one per CTA. Thread 0 initializes one mbarrier per piece (the chunk is cut
//     into `pieces` pieces of whole vectors), sets each barrier's expected transaction bytes
//     (mbarrier.arrive.expect_tx) and issues one bulk copy per piece,
//     cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes, global -> this CTA's
//     dynamic shared memory (PTX ISA 8.0+, "Data Movement and Conversion Instructions:
//     cp.async.bulk"; source and destination 16-byte aligned, size a multiple of 16; the copy
//     completes the barrier's transaction count, "Parallel Synchronization and Communication
//     Instructions: mbarrier", "tx-count"). The whole chunk is thus in flight at once, without
//     registers or per-thread address arithmetic.
//  2. Every thread waits for piece p (mbarrier.try_wait.parity, phase 0: each barrier completes
//     once per launch) and folds its vectors of the piece into a running (max, sum of exp)
//     (Milakov & Gimelshein 2018, "Online normalizer calculation for softmax", arXiv:1805.02867),
//     so piece 0 is reduced while the last pieces are still arriving. A block reduction gives the
//     CTA's (m_r, l_r); an all -inf chunk gives (-FLT_MAX, 0), never exp(-inf + inf).
//  3. The CTAs of a row form a thread-block cluster (dimension `groups` <= 16; above 8 the
//     non-portable size attribute); each publishes (m_r, l_r) in its shared memory, a cluster
//     barrier orders that, and every CTA reads the `groups` pairs through distributed shared
//     memory (CUDA C++ Programming Guide, "Thread Block Clusters", "Distributed Shared Memory";
//     cooperative_groups::cluster_group::map_shared_rank). A second barrier (arrive after the
//     reads, wait before exit) keeps a CTA's shared memory alive while others read it.
//  4. y = exp(x - M) / L from shared memory, piece by piece: 16-byte global stores, or
//     (bulk_store) written back in place, fence.proxy.async.shared::cta, and one bulk copy
//     shared -> global per piece (cp.async.bulk.global.shared::cta.bulk_group, waited for with
//     cp.async.bulk.wait_group.read before the CTA exits).
// Requires 16-byte aligned x and y and cols a multiple of the vector width (4 float32, 8 16-bit);
// softmax_tma() refuses everything else before launching (softmax_refusal says why).
#include <cooperative_groups.h>

#include <cstdio>
#include <iterator>

#include "common.cuh"
#include "sm90.cuh"

namespace fusebench {
namespace cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kTmaMaxPieces = 8;
// Dynamic shared memory a CTA may take: an H100/H200 allows 227 KB per block (opt-in); the
// static part (mbarriers, reduction scratch) stays below 1 KB.
constexpr int kTmaMaxChunkBytes = 226 * 1024;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
constexpr int kTmaUnroll = 4;  // smem vectors per thread per step of the reduction and the write

__device__ __forceinline__ void bulk_load(void* dst, const void* src, unsigned bytes,
                                          uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(smem_u32(dst)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
}
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
__device__ __forceinline__ void bulk_store(void* dst, const void* src, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst),
               "r"(smem_u32(src)), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
__device__ __forceinline__ void bulk_store_drain() {
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}
// Vectors [begin, end) of a piece: pieces of ceil(nvec / pieces) vectors.
struct Span {
  int begin, end;
};
__device__ __forceinline__ Span piece_span(int nvec, int pieces, int p) {
  const int per = (nvec + pieces - 1) / pieces;
  const int b = p * per < nvec ? p * per : nvec;
  return {b, b + per < nvec ? b + per : nvec};
}
#endif

// Grid = rows * groups CTAs; CTA b handles chunk b % groups of row b / groups (a cluster of
// `groups` CTAs, whose rank is b % groups). chunk: elements per CTA (multiple of VEC).
// Unused (false, null, null): the bool and last two parameters keep the kernel's name, which run
// records' kernel ids hash, unchanged since the variant that used them was removed.
template <typename T, int THREADS, bool>
__global__ void __launch_bounds__(THREADS)
    softmax_tma_kernel(const T* x, T* y, int64_t cols, int chunk, int groups, int pieces,
                       int bulk_stores, MaxSum*, int*) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int VEC = 16 / static_cast<int>(sizeof(T));
  constexpr float kNegInf = -__builtin_huge_valf();
  constexpr float kFltMax = 3.402823466e38f;
  extern __shared__ __align__(128) unsigned char tma_smem[];
  T* buf = reinterpret_cast<T*>(tma_smem);
  __shared__ uint64_t bars[kTmaMaxPieces];
  __shared__ MaxSum part;  // this CTA's (m_r, l_r), read by the cluster
  const int rank = static_cast<int>(blockIdx.x % static_cast<unsigned>(groups));
  const int64_t row = blockIdx.x / static_cast<unsigned>(groups);
  const int64_t base = static_cast<int64_t>(rank) * chunk;
  const int64_t left = cols - base;
  const int len = left <= 0 ? 0 : left < chunk ? static_cast<int>(left) : chunk;
  const int nvec = len / VEC;
  const T* xr = x + row * cols + base;
  T* yr = y + row * cols + base;

  // 1. Barriers, then every piece's bulk copy in flight.
  if (threadIdx.x == 0) {
    for (int p = 0; p < pieces; ++p) mbar_init(&bars[p], 1);
    fence_mbar_init();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int p = 0; p < pieces; ++p) {
      const Span s = piece_span(nvec, pieces, p);
      if (s.end > s.begin) {
        const unsigned bytes = static_cast<unsigned>(s.end - s.begin) * 16u;
        mbar_expect_tx(&bars[p], bytes);
        bulk_load(buf + s.begin * VEC, xr + s.begin * VEC, bytes, &bars[p]);
      }
    }
  }

  // 2. The chunk's max, piece by piece as they land (no exp yet).
  __shared__ float red_f[kWarpSize], red_s[kWarpSize];  // distinct: back-to-back reductions
  float mx = kNegInf;
  for (int p = 0; p < pieces; ++p) {
    const Span s = piece_span(nvec, pieces, p);
    if (s.end <= s.begin) continue;  // uniform: no copy was issued
    mbar_wait(&bars[p], 0);
    for (int i = s.begin + static_cast<int>(threadIdx.x); i < s.end; i += THREADS * kTmaUnroll) {
#pragma unroll
      for (int u = 0; u < kTmaUnroll; ++u) {
        const int j = i + u * THREADS;
        if (j < s.end) {
          float v[VEC];
          load_vec<T, VEC>(buf + j * VEC, v);
#pragma unroll
          for (int k = 0; k < VEC; ++k) mx = fmaxf(mx, v[k]);
        }
      }
    }
  }
  // All -inf chunk (or none): m = -FLT_MAX, e = exp(-inf) = 0, never exp(-inf - -inf).
  const float m_cta = fmaxf(block_reduce<MaxOp>(mx, red_f), -kFltMax);

  // 2b. e = exp(x - m_cta), once per element, written back in place (in T: a 16-bit e is
  // rounded once more before the final scale), and its sum. One exp per element keeps the SFU
  // (16 ex2 per SM per clock) well below what a 16-bit stream at copy bandwidth asks for.
  // (x - m) first, as exp_approx: -m * log2(e) would overflow to +inf for m = -FLT_MAX (an all
  // -inf chunk), and -inf + inf is NaN.
  float cs = 0.f;
  for (int i = static_cast<int>(threadIdx.x); i < nvec; i += THREADS) {
    float v[VEC];
    load_vec<T, VEC>(buf + i * VEC, v);
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      v[k] = exp_approx(v[k] - m_cta);
      cs += v[k];
    }
    store_vec<T, VEC>(buf + i * VEC, v);
  }
  MaxSum st{m_cta, block_reduce<SumOp>(cs, red_s)};  // its barrier also orders 2b's smem writes

  // 3. Combine the row's partials.
  MaxSum tot = st;
  if (groups > 1) {
    cg::cluster_group cluster = cg::this_cluster();
    if (threadIdx.x == 0) part = st;
    cluster.sync();  // every CTA's pair is published
    MaxSum acc{-kFltMax, 0.f};
    for (int r = 0; r < groups; ++r) acc = combine(acc, *cluster.map_shared_rank(&part, r));
    tot = acc;
    cluster.barrier_arrive();  // done reading the other CTAs' shared memory
  }

  // 4. y = exp(x - M) / L. All -inf row: L = 0, 1 / L = inf, exp = 0: NaN, as torch.softmax.
  const float scale = exp_approx(m_cta - tot.m) / tot.s;
  for (int p = 0; p < pieces; ++p) {
    const Span s = piece_span(nvec, pieces, p);
    if (s.end <= s.begin) continue;
    for (int i = s.begin + static_cast<int>(threadIdx.x); i < s.end; i += THREADS * kTmaUnroll) {
      float v[kTmaUnroll][VEC];
#pragma unroll
      for (int u = 0; u < kTmaUnroll; ++u) {
        const int j = i + u * THREADS;
        if (j < s.end) load_vec<T, VEC>(buf + j * VEC, v[u]);
      }
#pragma unroll
      for (int u = 0; u < kTmaUnroll; ++u) {
        const int j = i + u * THREADS;
        if (j < s.end) {
#pragma unroll
          for (int k = 0; k < VEC; ++k) v[u][k] *= scale;
          store_vec<T, VEC>(bulk_stores ? buf + j * VEC : yr + j * VEC, v[u]);
        }
      }
    }
    if (bulk_stores) {
      fence_proxy_async_smem();  // this thread's smem writes, visible to the bulk copy
      __syncthreads();
      if (threadIdx.x == 0)
        bulk_store(yr + s.begin * VEC, buf + s.begin * VEC,
                   static_cast<unsigned>(s.end - s.begin) * 16u);
    }
  }
  if (bulk_stores && threadIdx.x == 0) bulk_store_drain();  // smem is read before the CTA exits
  if (groups > 1) cg::this_cluster().barrier_wait();  // keep `part` alive for the others
#else
  __trap();  // launched only on sm_90+ (softmax_tma refuses below)
#endif
}

struct TmaPlan {
  int groups = 0;  // CTAs per row
  int chunk = 0;   // elements per CTA
};

// The split of a row: groups = ceil(cols / (chunk_bytes / elem)), then the chunk balanced over
// the groups, rounded up to whole 16-byte vectors, and groups left empty dropped.
TmaPlan tma_plan(int64_t cols, int elem_size, const TmaConfig& cfg) {
  const int vec = 16 / elem_size;
  TmaPlan plan;
  int64_t groups = ceil_div(cols, cfg.chunk_bytes / elem_size);
  if (groups > 0x7fffffff) return plan;
  int64_t chunk = ceil_div(ceil_div(cols, groups), vec) * vec;
  groups = ceil_div(cols, chunk);
  if (chunk > 0x7fffffff) return plan;
  plan.groups = static_cast<int>(groups);
  plan.chunk = static_cast<int>(chunk);
  return plan;
}

template <typename T, int THREADS>
cudaError_t tma_launch(const T* x, T* y, int64_t rows, int64_t cols, const TmaPlan& plan,
                       const TmaConfig& cfg, cudaStream_t s) {
  constexpr auto kernel = softmax_tma_kernel<T, THREADS, false>;
  const int smem = plan.chunk * static_cast<int>(sizeof(T));
  const cudaError_t err = allow_dynamic_smem<kernel>(smem);
  if (err != cudaSuccess) return err;
  const LaunchAttr attr = plan.groups > 1 ? LaunchAttr::clusters(plan.groups) : LaunchAttr::plain();
  return launch(kernel, dim3(static_cast<unsigned>(rows * plan.groups)), dim3(THREADS),
                static_cast<size_t>(smem), s, attr, x, y, cols, plan.chunk, plan.groups,
                cfg.pieces, cfg.bulk_store, static_cast<MaxSum*>(nullptr), static_cast<int*>(nullptr));
}

template <typename T>
cudaError_t tma_threads(const void* x, void* y, int64_t rows, int64_t cols, const TmaPlan& plan,
                        const TmaConfig& cfg, cudaStream_t s) {
  const T* xt = static_cast<const T*>(x);
  T* yt = static_cast<T*>(y);
  switch (cfg.threads) {
    case 128: return tma_launch<T, 128>(xt, yt, rows, cols, plan, cfg, s);
    case 256: return tma_launch<T, 256>(xt, yt, rows, cols, plan, cfg, s);
    case 512: return tma_launch<T, 512>(xt, yt, rows, cols, plan, cfg, s);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t tma_dtype(const void* x, void* y, int64_t rows, int64_t cols, DType dtype,
                      const TmaPlan& plan, const TmaConfig& cfg, cudaStream_t s) {
  switch (dtype) {
    case DType::Float32: return tma_threads<float>(x, y, rows, cols, plan, cfg, s);
    case DType::BFloat16: return tma_threads<__nv_bfloat16>(x, y, rows, cols, plan, cfg, s);
    case DType::Float16: return tma_threads<__half>(x, y, rows, cols, plan, cfg, s);
  }
  return cudaErrorInvalidValue;
}

bool in_list(int v, const int* list, int n) {
  for (int i = 0; i < n; ++i)
    if (list[i] == v) return true;
  return false;
}

}  // namespace

TmaConfig softmax_tma_resolve(TmaConfig cfg, int elem_size) {
  if (cfg.chunk_bytes == 0) cfg.chunk_bytes = elem_size == 4 ? kTmaDefaultChunkBytes32 : kTmaDefaultChunkBytes16;
  if (cfg.threads == 0) cfg.threads = kTmaDefaultThreads;
  if (cfg.pieces == 0) cfg.pieces = kTmaDefaultPieces;
  return cfg;
}

int softmax_tma_groups(int64_t rows, int64_t cols, int elem_size, TmaConfig cfg) {
  if (rows <= 0 || cols <= 0 || (elem_size != 2 && elem_size != 4)) return 0;
  return tma_plan(cols, elem_size, softmax_tma_resolve(cfg, elem_size)).groups;
}

int softmax_refusal(int64_t rows, int64_t cols, int elem_size, SoftmaxVariant variant,
                    int cc_major, bool aligned, const TmaConfig& tma, int chunk_elems, char* why,
                    int why_len) {
  // A macro, not a lambda: the format stays a string literal at every call (-Wformat-security).
#define FB_REFUSE(...) \
  ((why != nullptr && why_len > 0 ? std::snprintf(why, static_cast<size_t>(why_len), __VA_ARGS__) : 0), 1)
  if (why != nullptr && why_len > 0) why[0] = '\0';
  const long long r = rows, c = cols;
  const int vec = elem_size > 0 ? 16 / elem_size : 1;
  if (elem_size != 2 && elem_size != 4) return FB_REFUSE("element size must be 2 or 4, got %d", elem_size);
  if (rows < 0 || cols < 0 || cols > 0x7fffffff)
    return FB_REFUSE("rows and cols must be >= 0 and cols < 2^31, got %lld x %lld", r, c);
  const bool sixteen = aligned && cols % vec == 0;
  switch (variant) {
    case SoftmaxVariant::Auto:
    case SoftmaxVariant::Online:
    case SoftmaxVariant::OnlineL2: return 0;
    case SoftmaxVariant::WarpPerRow:
      if (cols > kWarpPerRowMaxCols)
        return FB_REFUSE("warp_per_row needs cols <= %lld, got %lld", (long long)kWarpPerRowMaxCols, c);
      return 0;
    case SoftmaxVariant::BlockPerRow:
      if (cols > kBlockPerRowMaxCols)
        return FB_REFUSE("block_per_row needs cols <= %lld, got %lld", (long long)kBlockPerRowMaxCols, c);
      return 0;
    case SoftmaxVariant::SplitRow:
      if (rows > 65535) return FB_REFUSE("split_row needs rows <= 65535, got %lld", r);
      return 0;
    case SoftmaxVariant::Cluster: {
      const int ch = chunk_elems == 0 ? softmax_cluster_chunk(cols, elem_size) : chunk_elems;
      const int n_chunks = static_cast<int>(std::size(kClusterChunkElems));
      if (chunk_elems != 0 && !in_list(ch, kClusterChunkElems, n_chunks))
        return FB_REFUSE("chunk must be 0 or one of (4096, 8192, 16384, 32768), got %d", chunk_elems);
      if (cc_major < 9) return FB_REFUSE("thread-block clusters need sm_90 or newer");
      if (!sixteen || ch == 0 || ceil_div(cols, ch) > kMaxCluster)
        return FB_REFUSE("needs 16-byte aligned rows, cols a multiple of %d and at most 16 CTAs of %d "
                      "per row, got cols %lld", vec, ch == 0 ? 32768 : ch, c);
      return 0;
    }
    case SoftmaxVariant::Tma: {
      const char* name = "tma";
      const TmaConfig cfg = softmax_tma_resolve(tma, elem_size);
      if (!in_list(cfg.chunk_bytes, kTmaChunkBytes, kTmaNumChunkBytes))
        return FB_REFUSE("%s: chunk_kb must be 0 or one of (16, 32, 48, 64, 96, 128, 192), got %d",
                      name, tma.chunk_bytes / 1024);
      if (!in_list(cfg.threads, kTmaThreads, 3))
        return FB_REFUSE("%s: threads must be 0, 128, 256 or 512, got %d", name, tma.threads);
      if (cfg.pieces < 1 || cfg.pieces > kTmaMaxPieces || (cfg.pieces & (cfg.pieces - 1)))
        return FB_REFUSE("%s: pieces must be 0, 1, 2, 4 or 8, got %d", name, tma.pieces);
      if (cfg.bulk_store != 0 && cfg.bulk_store != 1)
        return FB_REFUSE("%s: bulk_store must be 0 or 1, got %d", name, tma.bulk_store);
      if (cc_major < 9) return FB_REFUSE("%s: bulk copies and clusters need sm_90 or newer", name);
      if (!sixteen)
        return FB_REFUSE("%s: needs 16-byte aligned rows and cols a multiple of %d, got cols %lld", name,
                      vec, c);
      if (rows == 0 || cols == 0) return 0;
      const TmaPlan plan = tma_plan(cols, elem_size, cfg);
      const long long bytes = static_cast<long long>(plan.chunk) * elem_size;
      if (plan.groups == 0 || bytes > kTmaMaxChunkBytes)
        return FB_REFUSE("%s: a CTA's share of a row is %lld bytes, at most %d fit in shared memory",
                      name, bytes, kTmaMaxChunkBytes);
      if (plan.groups > kMaxCluster)
        return FB_REFUSE("%s: needs %d CTAs of %d KB per row, at most 16 (a cluster); use a larger "
                      "chunk_kb", name, plan.groups, cfg.chunk_bytes / 1024);
      if (rows * static_cast<int64_t>(plan.groups) > 0x7fffffff)
        return FB_REFUSE("%s: %lld x %d CTAs exceed the grid", name, r, plan.groups);
      return 0;
    }
  }
  return FB_REFUSE("unknown variant %d", static_cast<int>(variant));
#undef FB_REFUSE
}

cudaError_t softmax_tma(const void* x, void* y, int64_t rows, int64_t cols, DType dtype,
                        TmaConfig cfg, cudaStream_t stream) {
  const int esize = dtype == DType::Float32 ? 4 : 2;
  int device = 0, major = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess)
    err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  if (err != cudaSuccess) return err;
  if (major < 9) return cudaErrorNotSupported;
  const bool aligned = aligned16(x) && aligned16(y);
  if (softmax_refusal(rows, cols, esize, SoftmaxVariant::Tma, major, aligned, cfg, 0, nullptr, 0))
    return cudaErrorInvalidValue;
  if (rows == 0 || cols == 0) return cudaSuccess;
  cfg = softmax_tma_resolve(cfg, esize);
  return tma_dtype(x, y, rows, cols, dtype, tma_plan(cols, esize, cfg), cfg, stream);
}

}  // namespace cuda
}  // namespace fusebench
