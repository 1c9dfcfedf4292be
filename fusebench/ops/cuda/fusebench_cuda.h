// Host-side API of the fusebench CUDA kernels (gelu.cu, softmax.cu).
//
// Plain C++ with the CUDA runtime types only, so both nvcc-compiled kernel
// files and the host-compiled torch binding (binding.cpp) can include it.
// Every launcher takes raw device pointers, element counts, a dtype and a
// stream, launches asynchronously, and returns the launch's cudaError_t.
#pragma once

#include <cstdint>
#include <cuda_runtime_api.h>

namespace fusebench {
namespace cuda {

// Element type of a tensor. Arithmetic is always fp32; 16-bit types are
// converted on load and rounded to nearest-even on store.
enum class DType : int { Float32 = 0, BFloat16 = 1, Float16 = 2 };

// y = gelu_tanh(x) elementwise over n elements; x and y may alias exactly.
// Memory-bound: reads and writes n * itemsize bytes (2 * itemsize per element).
// pdl: 1 launch as a programmatic dependent launch (sm_90+; ignored below), 0 a
// plain launch, -1 the library's default (kGeluPdlDefault in gelu.cu); any
// other value is cudaErrorInvalidValue. threads: threads per block, 128, 256 or 512, -1 the
// library's default (kGeluThreadsDefault in gelu.cu); any other value is cudaErrorInvalidValue.
cudaError_t gelu(const void* x, void* y, int64_t n, DType dtype, cudaStream_t stream,
                 int pdl = -1, int threads = -1);

// Softmax variants; Auto lets softmax_pick_variant choose.
enum class SoftmaxVariant : int {
  Auto = 0,
  WarpPerRow = 1,    // cols <= 1024: one warp per row, row in registers
  BlockPerRow = 2,   // cols <= 32768: one block per row, row in registers (*)
  Online = 3,        // any cols: one block per row, online max/sum + 2nd pass
  SplitRow = 4,      // any cols, rows <= 65535: row split over blocks, two kernels
  OnlineL2 = 5,      // any cols: Online with one block per SM looping over rows
  Coop = 6,          // cols <= ~capacity * chunk: row split over co-resident CTAs, one pass (**)
  Cluster = 7,       // sm_90+, 16-byte vectors, cols <= 16 * 32768: row split over a thread-block
                     // cluster, staged by cp.async, held in registers, partials through
                     // distributed shared memory (st.async), one pass (softmax_cluster.cu)
  Tma = 8,           // sm_90+, 16-byte vectors: a row's chunks staged in shared memory by bulk
                     // copies, split over a cluster of <= 16 CTAs, partials through distributed
                     // shared memory, one read and one write (softmax_tma.cu)
  TmaGrid = 9,       // as Tma, a row split over co-resident CTAs of the grid (cooperative launch),
                     // partials through global memory: few, long rows (softmax_tma.cu)
};
// (*) With unaligned pointers or cols not a multiple of the 16-byte vector
// width, BlockPerRow runs Online for cols > 16384.
// (**) Coop: each CTA handles a chunk of a row and the CTAs of a row exchange
// (max, sum) partials through global memory; a CTA loads its chunk of the next
// row while it waits for the partials of the previous one, then re-reads that
// chunk from L2 to write y, so the input is read from DRAM once. It needs
// chunks = ceil(cols / chunk) CTAs co-resident (a cooperative launch), i.e.
// chunks <= CTAs per SM * SMs; otherwise it returns cudaErrorInvalidValue.
// Every chunk's CTA fits at least once per SM, so cols <= sm_count * chunk
// always runs.

// Largest cols each register-caching variant accepts.
constexpr int64_t kWarpPerRowMaxCols = 1024;
constexpr int64_t kBlockPerRowMaxCols = 32768;

// Coop chunk lengths (elements of a row per CTA) that softmax accepts as
// coop_chunk_elems, for every dtype: CTAs of 256, 256, 256, 512, 1024 threads,
// 8, 16, 32, 32, 32 elements per thread (see coop() in softmax.cu).
inline constexpr int kCoopChunkElems[] = {2048, 4096, 8192, 16384, 32768};
// Coop's chunk when none is given (coop_chunk_elems == 0), every dtype: 256
// threads of 32 elements, at least 4 CTAs per SM (within a few % of the best chunk measured).
constexpr int kCoopDefaultChunkElems = 8192;
// Whether chunk_elems is one of kCoopChunkElems.
constexpr bool softmax_coop_chunk_supported(int64_t chunk_elems) {
  for (int c : kCoopChunkElems)
    if (c == chunk_elems) return true;
  return false;
}

// Cluster chunk lengths (elements of a row per CTA, 256 threads of chunk / 256 values) that
// softmax_cluster accepts, for every dtype (see cluster_dispatch in softmax_cluster.cu).
inline constexpr int kClusterChunkElems[] = {4096, 8192, 16384, 32768};

// Tuning knobs of Tma / TmaGrid; 0 in a field means its default (softmax_tma_resolve).
struct TmaConfig {
  int chunk_bytes = 0;  // Tma: most bytes of a row per CTA, one of kTmaChunkBytes
  int ctas_per_sm = 0;  // TmaGrid: CTAs per SM over all rows (1..4); a row gets floor(that * SMs / rows)
  int threads = 0;      // 128, 256 or 512 threads per CTA
  int pieces = 0;       // bulk copies (each with its own mbarrier) a CTA's chunk is cut into: 1, 2, 4, 8
  int bulk_store = 0;   // 1: y written back into shared memory and stored by bulk copies
};
inline constexpr int kTmaChunkBytes[] = {16384, 32768, 49152, 65536, 98304, 131072, 196608};
inline constexpr int kTmaNumChunkBytes = 7;
inline constexpr int kTmaThreads[] = {128, 256, 512};
// Defaults, the fastest measured (docs/tuning/softmax.md): 64 KB per CTA in every dtype, 256
// threads, one bulk copy; TmaGrid one CTA per SM.
constexpr int kTmaDefaultChunkBytes32 = 65536;
constexpr int kTmaDefaultChunkBytes16 = 65536;
constexpr int kTmaDefaultThreads = 256;
constexpr int kTmaDefaultPieces = 1;
constexpr int kTmaDefaultCtasPerSm = 1;

// cfg with every 0 field replaced by its default for elem_size-byte elements.
TmaConfig softmax_tma_resolve(TmaConfig cfg, int elem_size);

// CTAs per row of Tma (grid false) or TmaGrid (true) for this problem and config (0 when the
// problem is empty); the workspace of TmaGrid is rows * groups * 8 bytes, its counters 2 * rows.
int softmax_tma_groups(int64_t rows, int64_t cols, int elem_size, TmaConfig cfg, bool grid,
                       int sm_count);

// The one source of which variant accepts which problem: 0 when `variant` can run (rows, cols) of
// elem_size-byte elements on a GPU of sm_count SMs and compute capability cc_major, with rows
// 16-byte aligned (`aligned`) or not; else 1 and why, one line without a prefix, in `why` (may be
// null). tma: Tma/TmaGrid knobs; chunk_elems: Coop's or Cluster's chunk (0 = default). Pure (no
// CUDA calls); a co-residency it cannot know (Coop with more than one CTA per SM) is left to
// the launch, which then fails with a CUDA error.
int softmax_refusal(int64_t rows, int64_t cols, int elem_size, SoftmaxVariant variant,
                    int sm_count, int cc_major, bool aligned, const TmaConfig& tma,
                    int chunk_elems, char* why, int why_len);

// Pure heuristic (no CUDA calls): which variant softmax uses for a
// (rows, cols) problem of elem_size-byte elements on a GPU with sm_count SMs.
SoftmaxVariant softmax_pick_variant(int64_t rows, int64_t cols, int elem_size, int sm_count);

// Scratch bytes softmax needs for this problem and (resolved) variant;
// nonzero only for SplitRow and Coop (8 bytes per (row, chunk) partial; for
// Coop, chunks = ceil(cols / coop_chunk_elems), 0 meaning the default chunk).
// Need not be initialized; may be reused freely between stream-ordered calls.
int64_t softmax_workspace_bytes(int64_t rows, int64_t cols, DType dtype, int sm_count,
                                SoftmaxVariant variant, int coop_chunk_elems = 0);

// int32 counters softmax needs for this problem and (resolved) variant:
// 2 * rows for Coop (a row's arrivals and departures), else 0. They must be
// all zero when a Coop launch starts, and every Coop launch that runs to
// completion leaves them all zero again, so a caller zeroes a buffer once and
// keeps it: one buffer per stream (calls on one stream are serialized by it;
// two launches running at once must not share counters). Grow it (zeroed)
// when a call needs more; a larger buffer than needed is fine.
int64_t softmax_counter_ints(int64_t rows, int64_t cols, DType dtype, int sm_count,
                             SoftmaxVariant variant);

// y[r, :] = softmax(x[r, :]) for a contiguous row-major (rows, cols) tensor.
// Auto resolves through softmax_pick_variant. workspace must hold
// softmax_workspace_bytes(...) bytes and counters softmax_counter_ints(...)
// zeroed int32s (see there); either may be null when its size is 0.
// coop_chunk_elems: Coop's chunk, one of kCoopChunkElems or 0 for
// kCoopDefaultChunkElems (pass the same value to softmax_workspace_bytes);
// ignored by the other variants. sm_count: the device's SM count (Coop sizes
// its grid from it; <= 0 queries the current device).
// Returns cudaErrorInvalidValue for a variant that cannot take cols (Coop:
// chunks exceed the co-resident CTAs, or an unsupported chunk), sizes beyond
// the kernels' index range, or a missing workspace or counters buffer.
cudaError_t softmax(const void* x, void* y, int64_t rows, int64_t cols, DType dtype,
                    SoftmaxVariant variant, int sm_count, void* workspace, int* counters,
                    cudaStream_t stream, int coop_chunk_elems = 0);

// Tuning entry point (fusebench tune cuda): SplitRow with chunk `param`
// elements (a multiple of 1024; 0 = the default) and kernel 2 as a
// programmatic dependent launch when `flag` != 0; or WarpPerRow's 16-byte
// path with `param` (1, 2, 4, 8) vectors in flight per thread. SplitRow
// needs rows * ceil(cols / chunk) * 8 bytes of workspace.
cudaError_t softmax_tuned(const void* x, void* y, int64_t rows, int64_t cols, DType dtype,
                          SoftmaxVariant variant, int64_t param, int flag, int sm_count,
                          void* workspace, cudaStream_t stream);

// Softmax of long rows with each row split across a thread-block cluster
// (softmax_cluster.cu; sm_90+): CTAs of `chunk` elements (4096, 8192, 16384 or
// 32768; 0 = softmax_cluster_chunk) stage their share in shared memory by
// per-thread asynchronous copies, hold it in registers and exchange their
// (max, sum) partials through distributed shared memory: one read, one write.
// Returns cudaErrorNotSupported below sm_90, cudaErrorInvalidValue for an
// unsupported chunk, unaligned pointers, cols not a multiple of the 16-byte
// vector width, or a row needing more than 16 CTAs.
cudaError_t softmax_cluster(const void* x, void* y, int64_t rows, int64_t cols, DType dtype,
                            int chunk, cudaStream_t stream);

// Softmax with the row staged in shared memory by bulk copies (softmax_tma.cu; sm_90+): Tma
// (grid false: a row over a cluster of <= 16 CTAs) or TmaGrid (true: a row over
// softmax_tma_groups co-resident CTAs; workspace rows * groups * 8 bytes, counters 2 * rows zeroed
// int32s, as Coop's). Returns cudaErrorNotSupported below sm_90, cudaErrorInvalidValue where
// softmax_refusal refuses or a TmaGrid buffer is missing, or the launch's error (a cluster or
// cooperative grid that cannot be scheduled).
cudaError_t softmax_tma(const void* x, void* y, int64_t rows, int64_t cols, DType dtype,
                        bool grid, TmaConfig cfg, int sm_count, void* workspace, int* counters,
                        cudaStream_t stream);

// Default cluster chunk for a row of `cols` elements (pure; 0 when no cluster
// of <= 16 CTAs holds the row).
int softmax_cluster_chunk(int64_t cols, int elem_size);

}  // namespace cuda
}  // namespace fusebench
