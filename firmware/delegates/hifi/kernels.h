// The HiFi kernels: CONV2D_S8, DEPTHWISE_CONV2D_S8 and LINEAR_S8 on Cadence's
// HiFi 4 NN library (nnlib), chosen at build time for an Xtensa HiFi core
// (`torchmcu build` for a board with arch = "xtensa"; kernel set "hifi"), as the
// CMSIS-NN kernels are for Cortex-M. nnlib is not part of torchmcu: the build
// takes its headers and library from TORCHMCU_NNLIB_DIR, built with its
// default double rounding (TFLITE_SINGLE_ROUNDING=0).
//
// Each kernel's check is the portable check plus nnlib's own: for a shape
// nnlib is called for (batch 1, no dilation) the planned scratch operand is at
// least what nnlib's getsize function asks for on this core. Its run (an
// invoke: a non-zero nnlib return code becomes Error::DelegateFailed) calls
// nnlib when the requantization values, read each run as the portable kernels
// read them, are in the reference's range, where nnlib computes exactly the
// reference's bits (aot/torchmcu/backends/hifi/nnlib.py), and the portable kernel
// otherwise (which then outputs zeros, as it defines for such values); the
// compiler's report marks the same ops "hifi". nnlib has no fused activation:
// the clamp is a second pass. No heap: nnlib works in the op's planned scratch.
#ifndef TORCHMCU_DELEGATES_HIFI_KERNELS_H_
#define TORCHMCU_DELEGATES_HIFI_KERNELS_H_

#include "core/kernel.h"

namespace torchmcu {
namespace hifi {

extern const Kernel kConv2dS8;
extern const Kernel kDepthwiseConv2dS8;
extern const Kernel kLinearS8;

}  // namespace hifi
}  // namespace torchmcu

#endif  // TORCHMCU_DELEGATES_HIFI_KERNELS_H_
