// The CMSIS-NN kernels: the same int8 op codes and names as the portable
// kernels (kernels/portable/kernels.h), chosen at build time
// (`torchmcu build --kernels cmsis-nn`), as TFLM's kernels/cmsis_nn/<op>.cc.
// CMSIS-NN itself is not part of torchmcu: the build takes it from
// TORCHMCU_CMSIS_NN_DIR.
//
// Each kernel's check is the portable check plus CMSIS-NN's own constraints
// (a scratch operand large enough for this core's variant); its run calls
// CMSIS-NN, or the portable run for the shapes CMSIS-NN has no kernel for
// (broadcasting add/mul, windows that may be empty, very wide softmax rows).
// Same bits as the portable kernels in every case. No heap: scratch comes from
// the op's planned scratch operand (sized by aot/torchmcu/backends/cmsis_nn/scratch.py for
// every ISA), the only exception being avg pool's per-channel accumulator on
// DSP cores, a fixed stack array.
#ifndef TORCHMCU_KERNELS_CMSIS_NN_KERNELS_H_
#define TORCHMCU_KERNELS_CMSIS_NN_KERNELS_H_

#include "core/kernel.h"

namespace torchmcu {
namespace cmsis_nn {

extern const Kernel kConv2dS8;
extern const Kernel kDepthwiseConv2dS8;
extern const Kernel kLinearS8;
extern const Kernel kAddS8;
extern const Kernel kMulS8;
extern const Kernel kMaxPool2dS8;
extern const Kernel kAvgPool2dS8;
extern const Kernel kSoftmaxS8;
extern const Kernel kConv2dS4;
extern const Kernel kDepthwiseConv2dS4;
extern const Kernel kLinearS4;
// a16w8 (ops_s16.cc)
extern const Kernel kConv2dS16;
extern const Kernel kDepthwiseConv2dS16;
extern const Kernel kLinearS16;
extern const Kernel kAddS16;
extern const Kernel kMulS16;
extern const Kernel kMaxPool2dS16;
extern const Kernel kAvgPool2dS16;
// conv + pool/resize (transpose_conv_s8.cc)
extern const Kernel kTransposeConv2dS8;
// C: attention (batch_matmul.cc)
extern const Kernel kBatchMatmulS8;
extern const Kernel kBatchMatmulS16;
// recurrent layers (lstm.cc)
extern const Kernel kLstmS8;
extern const Kernel kLstmS16;

}  // namespace cmsis_nn
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_CMSIS_NN_KERNELS_H_
