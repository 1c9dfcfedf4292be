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
  // 6 is unused (a removed variant): the other codes stay as the run records name them.
  Cluster = 7,       // sm_90+, 16-byte vectors, cols <= 16 * 32768: row split over a thread-block
                     // cluster, staged by cp.async, held in registers, partials through
                     // distributed shared memory (st.async), one pass (softmax_cluster.cu)
  Tma = 8,           // sm_90+, 16-byte vectors: a row's chunks staged in shared memory by bulk
                     // copies, split over a cluster of <= 16 CTAs, partials through distributed
                     // shared memory, one read and one write (softmax_tma.cu)
};
// (*) With unaligned pointers or cols not a multiple of the 16-byte vector
// width, BlockPerRow runs Online for cols > 16384.

// Largest cols each register-caching variant accepts.
constexpr int64_t kWarpPerRowMaxCols = 1024;
constexpr int64_t kBlockPerRowMaxCols = 32768;

// Cluster chunk lengths (elements of a row per CTA, 256 threads of chunk / 256 values) that
// softmax_cluster accepts, for every dtype (see cluster_dispatch in softmax_cluster.cu).
inline constexpr int kClusterChunkElems[] = {4096, 8192, 16384, 32768};

// Tuning knobs of Tma; 0 in a field means its default (softmax_tma_resolve).
struct TmaConfig {
  int chunk_bytes = 0;  // most bytes of a row per CTA, one of kTmaChunkBytes
  int threads = 0;      // 128, 256 or 512 threads per CTA
  int pieces = 0;       // bulk copies (each with its own mbarrier) a CTA's chunk is cut into: 1, 2, 4, 8
  int bulk_store = 0;   // 1: y written back into shared memory and stored by bulk copies
};
inline constexpr int kTmaChunkBytes[] = {16384, 32768, 49152, 65536, 98304, 131072, 196608};
inline constexpr int kTmaNumChunkBytes = 7;
inline constexpr int kTmaThreads[] = {128, 256, 512};
// Defaults, the fastest measured (docs/tuning/softmax.md): 64 KB per CTA in every dtype, 256
// threads, one bulk copy.
constexpr int kTmaDefaultChunkBytes32 = 65536;
constexpr int kTmaDefaultChunkBytes16 = 65536;
constexpr int kTmaDefaultThreads = 256;
constexpr int kTmaDefaultPieces = 1;

// cfg with every 0 field replaced by its default for elem_size-byte elements.
TmaConfig softmax_tma_resolve(TmaConfig cfg, int elem_size);

// CTAs per row of Tma for this problem and config (0 when the problem is empty).
int softmax_tma_groups(int64_t rows, int64_t cols, int elem_size, TmaConfig cfg);

// The one source of which variant accepts which problem: 0 when `variant` can run (rows, cols) of
// elem_size-byte elements on a GPU of compute capability cc_major, with rows 16-byte aligned
// (`aligned`) or not; else 1 and why, one line without a prefix, in `why` (may be null). tma:
// Tma's knobs; chunk_elems: Cluster's chunk (0 = default). Pure (no CUDA calls).
int softmax_refusal(int64_t rows, int64_t cols, int elem_size, SoftmaxVariant variant,
                    int cc_major, bool aligned, const TmaConfig& tma, int chunk_elems, char* why,
                    int why_len);

// Pure heuristic (no CUDA calls): which variant softmax uses for a
// (rows, cols) problem of elem_size-byte elements on a GPU with sm_count SMs.
SoftmaxVariant softmax_pick_variant(int64_t rows, int64_t cols, int elem_size, int sm_count);

// Scratch bytes softmax needs for this problem and (resolved) variant;
// nonzero only for SplitRow (8 bytes per (row, chunk) partial).
// Need not be initialized; may be reused freely between stream-ordered calls.
int64_t softmax_workspace_bytes(int64_t rows, int64_t cols, DType dtype, int sm_count,
                                SoftmaxVariant variant);

// y[r, :] = softmax(x[r, :]) for a contiguous row-major (rows, cols) tensor.
// Auto resolves through softmax_pick_variant. workspace must hold
// softmax_workspace_bytes(...) bytes; it may be null when that is 0.
// sm_count: the device's SM count (the pick, SplitRow's chunks and OnlineL2's
// grid depend on it).
// Returns cudaErrorInvalidValue for a variant that cannot take cols, sizes
// beyond the kernels' index range, or a missing workspace.
cudaError_t softmax(const void* x, void* y, int64_t rows, int64_t cols, DType dtype,
                    SoftmaxVariant variant, int sm_count, void* workspace, cudaStream_t stream);

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

// Softmax with the row staged in shared memory by bulk copies (softmax_tma.cu; sm_90+), Tma: a
// row over a cluster of <= 16 CTAs. Returns cudaErrorNotSupported below sm_90,
// cudaErrorInvalidValue where softmax_refusal refuses, or the launch's error (a cluster that
// cannot be scheduled).
cudaError_t softmax_tma(const void* x, void* y, int64_t rows, int64_t cols, DType dtype,
                        TmaConfig cfg, cudaStream_t stream);

// Default cluster chunk for a row of `cols` elements (pure; 0 when no cluster
// of <= 16 CTAs holds the row).
int softmax_cluster_chunk(int64_t cols, int elem_size);

}  // namespace cuda
}  // namespace fusebench
