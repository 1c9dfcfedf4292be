// PyTorch binding for the fusebench CUDA kernels (gelu.cu, softmax*.cu).
//
// Every op checks the device (CUDA) and dtype (float32, bfloat16, float16), makes the input
// contiguous (a copy for non-contiguous inputs; the result is always a new contiguous tensor of
// the input's shape), returns an empty result for empty inputs, and launches on the current
// CUDA stream of the input's device (c10::cuda::getCurrentCUDAStream, which at::cuda
// re-exports). Every op returns (y, error): errors are values, not exceptions (see Result).
// Only c10/cuda headers are used (not ATen/cuda/CUDAContext.h, which pulls in
// cuBLAS/cuSPARSE headers), so the file also compiles against a CUDA toolkit
// that ships just the runtime.
#include <torch/extension.h>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <atomic>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "fusebench_cuda.h"

namespace fc = fusebench::cuda;

namespace {

// What every op returns to Python: (y, "") when it ran, (None, "<op>: why") when it refused its
// input or a launch failed (y is std::nullopt then); kernels/cuda_ext.py raises RuntimeError with
// the message. Errors are values and messages are joined by cat() below, not c10::str or
// TORCH_CHECK: on the H200 (torch 2.11, CUDA 13.0) a throw or a c10::str message from this
// extension killed the process (SIGSEGV) instead of reaching Python (docs/cuda-extension.md;
// tests/test_cuda_ext_inputs.py). What can still throw is PyTorch's own allocation (at::empty,
// at::zeros, contiguous) when device memory runs out.
using Result = std::tuple<std::optional<at::Tensor>, std::string>;

// A message from strings and integers, without iostreams (see Result).
inline void append(std::string& s, const char* part) { s += part; }
inline void append(std::string& s, const std::string& part) { s += part; }
template <typename I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
void append(std::string& s, I part) {
  s += std::to_string(part);
}
template <typename... Parts>
std::string cat(const Parts&... parts) {
  std::string s;
  (append(s, parts), ...);
  return s;
}

template <typename... Parts>
Result fail(const Parts&... parts) {
  return {std::nullopt, cat(parts...)};
}

// Why x cannot be an op's input ("" when it can): a CUDA tensor of float32, bfloat16 or float16.
std::string input_error(const at::Tensor& x, const char* op) {
  if (!x.is_cuda()) return cat(op, ": expected a CUDA tensor, got device ", x.device().str());
  const auto t = x.scalar_type();
  if (t != at::kFloat && t != at::kBFloat16 && t != at::kHalf)
    return cat(op, ": dtype must be float32, bfloat16 or float16, got ", c10::toString(t));
  return std::string();
}

// "<op>: CUDA launch failed: <error>", or "" for cudaSuccess.
std::string launch_error(cudaError_t err, const char* op) {
  if (err == cudaSuccess) return std::string();
  return cat(op, ": CUDA launch failed: ", cudaGetErrorString(err));
}

// The preamble every op shares, for an `input` that input_error accepted: its dtype, its device
// made current while this lives, made contiguous (a copy when it is not) as `x`, a new tensor of
// its shape and dtype for the result as `y`, and x viewed as rows x cols for softmax: cols the
// last dimension (1 for a 0-d tensor), rows 0 when x is empty (nothing to launch: return `y`).
struct OpIO {
  explicit OpIO(const at::Tensor& input)
      : dtype(input.scalar_type() == at::kFloat      ? fc::DType::Float32
              : input.scalar_type() == at::kBFloat16 ? fc::DType::BFloat16
                                                     : fc::DType::Float16),
        guard(input.device()),
        x(input.contiguous()),
        y(at::empty(x.sizes(), x.options())),
        cols(x.dim() == 0 ? 1 : x.size(-1)),
        rows(x.numel() == 0 ? 0 : x.numel() / cols),
        stream(c10::cuda::getCurrentCUDAStream()) {}

  bool empty() const { return x.numel() == 0; }
  // (y, "") when err is cudaSuccess, else (None, "<op>: CUDA launch failed: ...").
  Result done(cudaError_t err, const char* op) const {
    std::string why = launch_error(err, op);
    if (!why.empty()) return {std::nullopt, std::move(why)};
    return {y, std::string()};
  }

  const fc::DType dtype;
  const c10::cuda::CUDAGuard guard;
  const at::Tensor x;
  const at::Tensor y;
  const int64_t cols, rows;
  const c10::cuda::CUDAStream stream;  // the current stream of x's device
};

// SM count of `device` into *n, queried once per device; why it could not be read ("" when it
// was), as input_error.
std::string sm_count(c10::DeviceIndex device, int* n, const char* op) {
  static std::atomic<int> cache[256] = {};
  std::atomic<int>& slot = cache[static_cast<uint8_t>(device)];
  *n = slot.load(std::memory_order_relaxed);
  if (*n > 0) return std::string();
  const cudaError_t err = cudaDeviceGetAttribute(n, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess) return cat(op, ": cannot read the SM count: ", cudaGetErrorString(err));
  slot.store(*n, std::memory_order_relaxed);
  return std::string();
}

// pdl: -1 the library's default, 0 a plain launch, 1 a programmatic dependent launch.
// threads: threads per block, 128, 256 or 512; -1 the library's default.
Result gelu(const at::Tensor& x, int64_t pdl, int64_t threads) {
  const char* op = "gelu";
  if (pdl < -1 || pdl > 1) return fail(op, ": pdl must be -1, 0 or 1, got ", pdl);
  if (threads != -1 && threads != 128 && threads != 256 && threads != 512)
    return fail(op, ": threads must be -1, 128, 256 or 512, got ", threads);
  if (std::string why = input_error(x, op); !why.empty()) return fail(why);
  const OpIO io(x);
  if (io.empty()) return {io.y, ""};
  return io.done(fc::gelu(io.x.const_data_ptr(), io.y.mutable_data_ptr(), io.x.numel(), io.dtype,
                          io.stream, static_cast<int>(pdl), static_cast<int>(threads)),
                 op);
}

// Whether `variant` is a SoftmaxVariant code (6 is unused: a removed variant).
bool known_variant(int64_t variant) { return variant >= 0 && variant <= 8 && variant != 6; }

// Softmax over the last dimension (a 0-d tensor is one row of one element).
Result softmax_impl(const at::Tensor& x, int64_t variant, const char* op) {
  if (!known_variant(variant)) return fail(op, ": variant must be 0..5, 7 or 8, got ", variant);
  if (std::string why = input_error(x, op); !why.empty()) return fail(why);
  const OpIO io(x);
  const int64_t cols = io.cols, rows = io.rows;
  const auto v = static_cast<fc::SoftmaxVariant>(variant);
  if (v == fc::SoftmaxVariant::WarpPerRow && cols > fc::kWarpPerRowMaxCols)
    return fail(op, ": variant 1 (warp per row) needs cols <= ", fc::kWarpPerRowMaxCols, ", got ",
                cols);
  if (v == fc::SoftmaxVariant::BlockPerRow && cols > fc::kBlockPerRowMaxCols)
    return fail(op, ": variant 2 (block per row) needs cols <= ", fc::kBlockPerRowMaxCols,
                ", got ", cols);
  if (io.empty()) return {io.y, ""};
  int sms = 0;
  if (std::string why = sm_count(x.device().index(), &sms, op); !why.empty()) return fail(why);
  const int64_t ws_bytes = fc::softmax_workspace_bytes(rows, cols, io.dtype, sms, v);
  at::Tensor ws;
  if (ws_bytes > 0) ws = at::empty({ws_bytes}, io.x.options().dtype(at::kByte));
  return io.done(fc::softmax(io.x.const_data_ptr(), io.y.mutable_data_ptr(), rows, cols, io.dtype,
                             v, sms, ws_bytes > 0 ? ws.mutable_data_ptr() : nullptr, io.stream),
                 op);
}

Result softmax(const at::Tensor& x) { return softmax_impl(x, 0, "softmax"); }

Result softmax_variant(const at::Tensor& x, int64_t variant) {
  return softmax_impl(x, variant, "softmax_variant");
}

// Tuning: split_row with chunk `param` and PDL `flag`, or warp_per_row with `param` vectors per
// thread (fc::softmax_tuned); the Python wrapper validates the arguments first.
Result softmax_tuned(const at::Tensor& x, int64_t variant, int64_t param, int64_t flag) {
  const char* op = "softmax_tuned";
  if (std::string why = input_error(x, op); !why.empty()) return fail(why);
  const OpIO io(x);
  if (io.empty()) return {io.y, ""};
  const int64_t cols = io.cols, rows = io.rows;
  int sms = 0;
  if (std::string why = sm_count(x.device().index(), &sms, op); !why.empty()) return fail(why);
  const auto v = static_cast<fc::SoftmaxVariant>(variant);
  at::Tensor ws;
  if (v == fc::SoftmaxVariant::SplitRow) {
    const int64_t bytes = param > 0 ? rows * ((cols + param - 1) / param) * 8
                                    : fc::softmax_workspace_bytes(rows, cols, io.dtype, sms, v);
    ws = at::empty({bytes}, io.x.options().dtype(at::kByte));
  }
  return io.done(fc::softmax_tuned(io.x.const_data_ptr(), io.y.mutable_data_ptr(), rows, cols,
                                   io.dtype, v, param, static_cast<int>(flag), sms,
                                   ws.defined() ? ws.mutable_data_ptr() : nullptr, io.stream),
                 op);
}

// Variant 7 (cluster) with a given chunk per CTA (0: softmax_cluster_chunk), for tuning.
Result softmax_cluster(const at::Tensor& x, int64_t chunk_elems) {
  const char* op = "softmax_cluster";
  if (std::string why = input_error(x, op); !why.empty()) return fail(why);
  const OpIO io(x);
  if (io.empty()) return {io.y, ""};
  const cudaError_t err =
      fc::softmax_cluster(io.x.const_data_ptr(), io.y.mutable_data_ptr(), io.rows, io.cols,
                          io.dtype, static_cast<int>(chunk_elems), io.stream);
  if (err == cudaSuccess) return {io.y, ""};
  return fail(op, ": ", cudaGetErrorString(err),
              " (needs sm_90+, 16-byte aligned rows of a multiple of 16 bytes, chunk_elems 0, "
              "4096, 8192, 16384 or 32768, and at most 16 CTAs per row; got cols ",
              io.cols, ", chunk_elems ", chunk_elems, ")");
}

fc::TmaConfig tma_config(int64_t chunk_kb, int64_t threads, int64_t pieces, int64_t bulk_store) {
  fc::TmaConfig cfg;
  cfg.chunk_bytes = static_cast<int>(chunk_kb * 1024);
  cfg.threads = static_cast<int>(threads);
  cfg.pieces = static_cast<int>(pieces);
  cfg.bulk_store = static_cast<int>(bulk_store);
  return cfg;
}

// Variant 8 (tma) with explicit knobs (0: default), for tuning; the Python wrapper asks
// softmax_refusal first.
Result softmax_tma(const at::Tensor& x, int64_t chunk_kb, int64_t threads, int64_t pieces,
                   int64_t bulk_store) {
  const char* op = "softmax_tma";
  if (std::string why = input_error(x, op); !why.empty()) return fail(why);
  const OpIO io(x);
  if (io.empty()) return {io.y, ""};
  return io.done(fc::softmax_tma(io.x.const_data_ptr(), io.y.mutable_data_ptr(), io.rows, io.cols,
                                 io.dtype, tma_config(chunk_kb, threads, pieces, bulk_store),
                                 io.stream),
                 op);
}

// fc::softmax_refusal: "" when the variant accepts the problem, else why (one line, no prefix).
std::string softmax_refusal(int64_t rows, int64_t cols, int64_t elem_size, int64_t variant,
                            int64_t cc_major, bool aligned, int64_t chunk_elems, int64_t chunk_kb,
                            int64_t threads, int64_t pieces, int64_t bulk_store) {
  if (!known_variant(variant)) return "unknown variant " + std::to_string(variant);
  char why[256];
  const int refused = fc::softmax_refusal(
      rows, cols, static_cast<int>(elem_size), static_cast<fc::SoftmaxVariant>(variant),
      static_cast<int>(cc_major), aligned, tma_config(chunk_kb, threads, pieces, bulk_store),
      static_cast<int>(chunk_elems), why, sizeof(why));
  return refused ? std::string(why) : std::string();
}

int64_t softmax_pick_variant(int64_t rows, int64_t cols, int64_t elem_size, int64_t sm_count) {
  return static_cast<int64_t>(fc::softmax_pick_variant(rows, cols, static_cast<int>(elem_size),
                                                       static_cast<int>(sm_count)));
}

int64_t softmax_cluster_chunk(int64_t cols, int64_t elem_size) {
  return fc::softmax_cluster_chunk(cols, static_cast<int>(elem_size));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() =
      "fusebench hand-written CUDA kernels; every op returns (y, error): y None and error "
      "'<op>: why' when it failed (errors are values, never exceptions)";
  m.def("gelu", &gelu,
        "GELU (tanh approximation) of a CUDA tensor; pdl: -1 default, 0 plain launch, 1 "
        "programmatic dependent launch (sm_90+); threads: 128, 256 or 512 per block, -1 default",
        py::arg("x"), py::arg("pdl") = -1, py::arg("threads") = -1);
  m.def("softmax", &softmax, "Softmax over the last dimension", py::arg("x"));
  m.def("softmax_variant", &softmax_variant,
        "Softmax with a forced variant: 0 auto, 1 warp/row, 2 block/row, 3 online, 4 split-row, "
        "5 online, one block per SM, 7 cluster (row split over a thread-block cluster, one pass; "
        "sm_90+), 8 tma (row chunks in shared memory by bulk copies over a cluster; sm_90+)",
        py::arg("x"), py::arg("variant"));
  m.def("softmax_tuned", &softmax_tuned,
        "Tuning: variant 4 (split_row) with chunk `param` (0 default) and PDL `flag`, or variant 1 "
        "(warp_per_row, 16-byte path) with `param` vectors in flight per thread",
        py::arg("x"), py::arg("variant"), py::arg("param"), py::arg("flag") = 1);
  m.def("softmax_cluster", &softmax_cluster,
        "Softmax, variant 7 (cluster) with a given chunk per CTA: chunk_elems 0 (default), 4096, "
        "8192, 16384 or 32768 elements; (None, why) where the variant cannot run",
        py::arg("x"), py::arg("chunk_elems") = 0);
  m.def("softmax_tma", &softmax_tma,
        "Softmax, variant 8 (tma: a row over a cluster) with knobs (0 = default): chunk_kb (KB of "
        "a row per CTA), threads, pieces, bulk_store; ask softmax_refusal first",
        py::arg("x"), py::arg("chunk_kb") = 0, py::arg("threads") = 0, py::arg("pieces") = 0,
        py::arg("bulk_store") = 0);
  m.def("softmax_refusal", &softmax_refusal,
        "Why softmax variant `variant` cannot take a (rows, cols) problem ('' when it can): the "
        "one source of the variant rules",
        py::arg("rows"), py::arg("cols"), py::arg("elem_size"), py::arg("variant"),
        py::arg("cc_major"), py::arg("aligned"), py::arg("chunk_elems") = 0, py::arg("chunk_kb") = 0,
        py::arg("threads") = 0, py::arg("pieces") = 0, py::arg("bulk_store") = 0);
  m.def("softmax_pick_variant", &softmax_pick_variant,
        "Variant softmax picks for (rows, cols, elem_size, sm_count)", py::arg("rows"),
        py::arg("cols"), py::arg("elem_size"), py::arg("sm_count"));
  m.def("softmax_cluster_chunk", &softmax_cluster_chunk,
        "Default cluster chunk (elements per CTA) for rows of `cols`; 0 when 16 CTAs cannot hold one",
        py::arg("cols"), py::arg("elem_size"));
}
