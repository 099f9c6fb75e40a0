// The portable kernels, one object per op code. The symbol of op code
// NAME_PARTS is kNameParts (LINEAR_F32 -> kLinearF32): the generated kernel
// table relies on this rule.
#ifndef TORCHMCU_KERNELS_PORTABLE_KERNELS_H_
#define TORCHMCU_KERNELS_PORTABLE_KERNELS_H_

#include "core/kernel.h"

namespace torchmcu {
namespace portable {

extern const Kernel kLinearF32;
extern const Kernel kConv2dF32;
extern const Kernel kDepthwiseConv2dF32;
extern const Kernel kClampF32;
extern const Kernel kSigmoidF32;
extern const Kernel kTanhF32;
extern const Kernel kAddF32;
extern const Kernel kMulF32;
extern const Kernel kMaxPool2dF32;
extern const Kernel kAvgPool2dF32;
extern const Kernel kMeanF32;
extern const Kernel kSoftmaxF32;
extern const Kernel kPermute;
extern const Kernel kConcat;
extern const Kernel kCopy;
extern const Kernel kQuantizeS8;
extern const Kernel kDequantizeS8;
extern const Kernel kConv2dS8;
extern const Kernel kDepthwiseConv2dS8;
extern const Kernel kLinearS8;
extern const Kernel kAddS8;
extern const Kernel kMulS8;
extern const Kernel kMaxPool2dS8;
extern const Kernel kAvgPool2dS8;
extern const Kernel kSoftmaxS8;
extern const Kernel kClampS8;
extern const Kernel kLutS8;
extern const Kernel kPad;
extern const Kernel kMaximumF32;
extern const Kernel kMinimumF32;
extern const Kernel kMaximumS8;
extern const Kernel kMinimumS8;
extern const Kernel kHardswishF32;
extern const Kernel kBatchMatmulF32;
extern const Kernel kBatchMatmulS8;
extern const Kernel kConv2dS4;
extern const Kernel kDepthwiseConv2dS4;
extern const Kernel kLinearS4;
// a16w8 (ops_s16.cc)
extern const Kernel kQuantizeS16;
extern const Kernel kDequantizeS16;
extern const Kernel kConv2dS16;
extern const Kernel kDepthwiseConv2dS16;
extern const Kernel kLinearS16;
extern const Kernel kAddS16;
extern const Kernel kMulS16;
extern const Kernel kMaxPool2dS16;
extern const Kernel kAvgPool2dS16;
extern const Kernel kSoftmaxS16;
extern const Kernel kRequantize;
// conv + pool/resize (ops_conv_pool.cc)
extern const Kernel kTransposeConv2dF32;
extern const Kernel kTransposeConv2dS8;
extern const Kernel kTransposeConv2dS16;
extern const Kernel kResizeNearest;
extern const Kernel kResizeBilinearF32;
extern const Kernel kResizeBilinearS8;
extern const Kernel kResizeBilinearS16;
extern const Kernel kAdaptiveAvgPool2dF32;
extern const Kernel kAdaptiveAvgPool2dS8;
extern const Kernel kAdaptiveAvgPool2dS16;
// capture / views / shape (slice.cc)
extern const Kernel kSlice;
// C: element-wise, reductions, normalisation and attention (ops_activations.cc,
// ops_arith.cc, ops_reductions.cc, ops_attention_norm.cc)
extern const Kernel kActivationF32;
extern const Kernel kLutS16;
extern const Kernel kPreluF32;
extern const Kernel kPreluS8;
extern const Kernel kPreluS16;
extern const Kernel kSubF32;
extern const Kernel kSubS8;
extern const Kernel kSubS16;
extern const Kernel kDivF32;
extern const Kernel kDivS8;
extern const Kernel kLogSoftmaxF32;
extern const Kernel kLogSoftmaxS8;
extern const Kernel kMeanS8;
extern const Kernel kMeanS16;
extern const Kernel kLayerNormF32;
extern const Kernel kLayerNormS8;
extern const Kernel kLayerNormS16;
extern const Kernel kGluF32;
extern const Kernel kGluS8;
extern const Kernel kGluS16;
extern const Kernel kSoftmaxMaskedS8;
extern const Kernel kSoftmaxMaskedS16;
extern const Kernel kBatchMatmulS16;
// recurrent layers (ops_recurrent.cc)
extern const Kernel kLstmF32;
extern const Kernel kGruF32;
extern const Kernel kRnnF32;
extern const Kernel kLstmS8;
extern const Kernel kLstmS16;
extern const Kernel kGruS8;
extern const Kernel kRnnS8;
extern const Kernel kGruS16;
extern const Kernel kRnnS16;

}  // namespace portable
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_PORTABLE_KERNELS_H_
