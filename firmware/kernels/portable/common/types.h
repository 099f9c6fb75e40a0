// The types and conventions every family of portable kernels shares: the
// plain math, free of the program format (each family's ops_<family>.cc is
// the executor's side: load-time checks and run functions).
//
// Layouts: 4-D activations are NHWC (channels last). Convolution weights are
// OHWI ([out_channels][kernel_h][kernel_w][in_channels / groups]); depthwise
// weights are [kernel_h][kernel_w][out_channels] (CMSIS-NN's 1HWC), with
// out_channels = in_channels * multiplier and output channel c reading input
// channel c / multiplier. Every buffer is dense and row-major in that layout.
//
// Ownership: kernels never allocate; pointers are borrowed for the call.
// Input and output may be the same buffer only where a function says so.
// Shapes are trusted: the executor checks them when the program is loaded.
//
// Int8 kernels: the integer arithmetic of CMSIS-NN and of TensorFlow Lite
// Micro's reference kernels, bit for bit. aot/torchmcu/reference/ is the
// NumPy twin of every function and the expectation the tests use.
// Quantization: real = scale * (q - zero_point). Kernels take offsets, not
// zero points: input_offset = -input_zero_point (added to each input value),
// output_offset = output_zero_point (added after requantization). Outputs are
// clamped to [act_min, act_max] (int8 values; a fused ReLU raises act_min).
// Requantization (common/requantize.h) is CMSIS-NN's arm_nn_requantize, i.e.
// TFLite's MultiplyByQuantizedMultiplier with double rounding: the real
// multiplier is multiplier * 2^(shift - 31), multiplier in [2^30, 2^31) or 0,
// shift in [-31, 30].
//
// a16w8 kernels (_s16): int16 activations (symmetric, zero point 0) with int8
// weights, the integer arithmetic of CMSIS-NN's s16 kernels and of TensorFlow
// Lite Micro's int16x8 reference kernels, bit for bit. Zero points are 0, so
// no offsets are added; outputs are clamped to [act_min, act_max] (int16
// values). Convolution and linear layers accumulate in int64 with an int64
// bias and requantize with requantize_s64 (CMSIS-NN's arm_nn_requantize_s64):
// the multiplier is reduced to 16 bits, so the 64-bit product cannot overflow
// for any accumulator below 2^47. Element-wise add/mul and the pools use the
// int8 kernels' arithmetic (requantize) on int16 values. Every a16w8 function
// is defined for any values of its tensors (multipliers, shifts and biases
// included): out-of-range shifts are clamped and 64-bit products and sums wrap.
#ifndef TORCHMCU_KERNELS_PORTABLE_COMMON_TYPES_H_
#define TORCHMCU_KERNELS_PORTABLE_COMMON_TYPES_H_

#include <cstddef>
#include <cstdint>

namespace torchmcu {
namespace portable {

/// Fused activation: outputs are clamped to [min, max]. No activation is
/// (-inf, +inf); ReLU is (0, +inf); ReLU6 is (0, 6).
struct ActRange {
  float min;
  float max;
};

/// Dimensions of an NHWC tensor.
struct Shape4 {
  int32_t n, h, w, c;
};

/// The largest rank of a tensor the kernels take.
constexpr int32_t kMaxRank = 6;

}  // namespace portable
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_PORTABLE_COMMON_TYPES_H_
