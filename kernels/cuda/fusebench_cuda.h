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
cudaError_t gelu(const void* x, void* y, int64_t n, DType dtype, cudaStream_t stream);

// Softmax variants; Auto lets softmax_pick_variant choose.
enum class SoftmaxVariant : int {
  Auto = 0,
  WarpPerRow = 1,    // cols <= 1024: one warp per row, row in registers
  BlockPerRow = 2,   // cols <= 32768: one block per row, row in registers (*)
  Online = 3,        // any cols: one block per row, online max/sum + 2nd pass
  SplitRow = 4,      // any cols, rows <= 65535: row split over blocks, two kernels
  OnlineL2 = 5,      // any cols: Online with one block per SM looping over rows
};
// (*) With unaligned pointers or cols not a multiple of the 16-byte vector
// width, BlockPerRow runs Online for cols > 16384.

// Largest cols each register-caching variant accepts.
constexpr int64_t kWarpPerRowMaxCols = 1024;
constexpr int64_t kBlockPerRowMaxCols = 32768;

// Pure heuristic (no CUDA calls): which variant softmax uses for a
// (rows, cols) problem of elem_size-byte elements on a GPU with sm_count SMs.
SoftmaxVariant softmax_pick_variant(int64_t rows, int64_t cols, int elem_size, int sm_count);

// Scratch bytes softmax needs for this problem and (resolved) variant;
// nonzero only for SplitRow (8 bytes per (row, chunk) partial).
int64_t softmax_workspace_bytes(int64_t rows, int64_t cols, DType dtype, int sm_count,
                                SoftmaxVariant variant);

// y[r, :] = softmax(x[r, :]) for a contiguous row-major (rows, cols) tensor.
// Auto resolves through softmax_pick_variant. workspace must hold
// softmax_workspace_bytes(...) bytes (may be null when that is 0).
// Returns cudaErrorInvalidValue for a variant that cannot take cols, sizes
// beyond the kernels' index range, or a missing workspace.
cudaError_t softmax(const void* x, void* y, int64_t rows, int64_t cols, DType dtype,
                    SoftmaxVariant variant, int sm_count, void* workspace,
                    cudaStream_t stream);

// Softmax of long rows with each row split across a thread-block cluster
// (softmax_cluster.cu; sm_90+): CTAs of `chunk` elements (4096, 8192, 16384
// or 32768; 0 = softmax_cluster_chunk) hold the row in registers and combine
// their partials through distributed shared memory: one read, one write.
// Returns cudaErrorNotSupported below sm_90, cudaErrorInvalidValue for an
// unsupported chunk, unaligned pointers, cols not a multiple of the 16-byte
// vector width, or a row needing more than 16 CTAs.
cudaError_t softmax_cluster(const void* x, void* y, int64_t rows, int64_t cols, DType dtype,
                            int chunk, cudaStream_t stream);

// Default cluster chunk for a row of `cols` elements (pure; 0 when no cluster
// of <= 16 CTAs holds the row).
int softmax_cluster_chunk(int64_t cols, int elem_size);

}  // namespace cuda
}  // namespace fusebench
