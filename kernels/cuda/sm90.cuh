// Hopper (sm_90+) synchronization and asynchronous-copy primitives shared by the softmax kernels
// that stage data in shared memory and reduce across thread-block clusters (softmax_tma.cu,
// softmax_cluster.cu), and the host-side shared-memory opt-in.
//
// PTX ISA 8.x: "Parallel Synchronization and Communication Instructions: mbarrier" (init,
// arrive.expect_tx, try_wait.parity; the transaction count that asynchronous copies and st.async
// complete), "barrier.cluster", "mapa", "st.async", "Data Movement and Conversion Instructions:
// cp.async" (per-thread 16-byte global -> shared copies). CUDA C++ Programming Guide, "Thread
// Block Clusters" and "Distributed Shared Memory".
#pragma once

#include <atomic>

#include "common.cuh"

namespace fusebench {
namespace cuda {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ unsigned smem_u32(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count)
               : "memory");
}
// Makes the initialized barriers visible to the async proxy (copies, st.async) and the cluster.
__device__ __forceinline__ void fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// One arrival on `bar`, after raising its expected transaction count by `bytes`.
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
}
// Spins until the phase of parity `parity` of `bar` has completed (acquire, CTA scope).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; "
        "selp.u32 %0, 1, 0, p; }"
        : "=r"(done)
        : "r"(smem_u32(bar)), "r"(parity)
        : "memory");
  } while (!done);
}

// 16 bytes global -> this CTA's shared memory through L1 (.ca); completes at cp_async_wait_all.
// When `!valid` nothing is read (src-size 0) and the 16 bytes are zero-filled, without a branch.
// Not .cg: with L1 bypassed, two 16-byte requests read each 32-byte L2 sector twice
// (docs/tuning/softmax.md).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid = true) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;" ::"r"(smem_u32(dst)), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
// Waits for all of this thread's cp.async copies; their data is then visible to this thread.
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.commit_group;\n\tcp.async.wait_group 0;" ::: "memory");
}

// Cluster barrier in two halves, every thread of every CTA of the cluster: arrive (relaxed: no
// memory ordering; pair it with fence_mbar_init for barrier initialization) and wait.
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() {
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}

// The shared::cluster address of `p` (a variable of this CTA's shared memory) in CTA `rank` of
// the cluster.
__device__ __forceinline__ unsigned map_to_rank(const void* p, unsigned rank) {
  unsigned a;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(smem_u32(p)), "r"(rank));
  return a;
}
// Stores (a, b) to the shared::cluster address `dst` of another (or this) CTA of the cluster
// and completes 8 bytes of the transaction count of the mbarrier at shared::cluster address
// `bar` in that same CTA.
__device__ __forceinline__ void st_async_f32x2(unsigned dst, float a, float b, unsigned bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];" ::"r"(
          dst),
      "f"(a), "f"(b), "r"(bar)
      : "memory");
}
#endif

// Lets `Kernel` take `bytes` of dynamic shared memory (the opt-in above 48 KB), raised (never
// lowered) once per device: cudaFuncSetAttribute(cudaFuncAttributeMaxDynamicSharedMemorySize).
// Returns the device query's or the attribute's error.
template <auto Kernel>
cudaError_t allow_dynamic_smem(int bytes) {
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  static std::atomic<int> set[kMaxDevices] = {};
  if (device < kMaxDevices && set[device].load(std::memory_order_relaxed) >= bytes)
    return cudaSuccess;
  err = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (err == cudaSuccess && device < kMaxDevices) set[device].store(bytes, std::memory_order_relaxed);
  return err;
}

}  // namespace cuda
}  // namespace fusebench
