// Internal to the CMSIS-NN kernels: CMSIS-NN's headers and the conversions
// from operands to its argument structs.
#ifndef TORCHMCU_KERNELS_CMSIS_NN_COMMON_H_
#define TORCHMCU_KERNELS_CMSIS_NN_COMMON_H_

#include "arm_nnfunctions.h"
#include "core/kernel.h"
#include "kernels/portable/kernels.h"

namespace torchmcu {
namespace cmsis_nn {

/// An NHWC tensor as CMSIS-NN dims.
inline cmsis_nn_dims nhwc(const TensorView& t) {
  return cmsis_nn_dims{t.dims[0], t.dims[1], t.dims[2], t.dims[3]};
}

/// The optional scratch operand (input 6 of conv, depthwise and linear):
/// its bytes, or 0 when absent.
inline uint32_t scratch_bytes(const OpContext& ctx, uint32_t index) {
  return ctx.num_inputs > index && ctx.inputs[index].present() ? ctx.inputs[index].nbytes : 0;
}

inline cmsis_nn_context scratch(const OpContext& ctx, uint32_t index) {
  cmsis_nn_context c{nullptr, 0};
  if (ctx.num_inputs > index && ctx.inputs[index].present()) {
    c.buf = ctx.inputs[index].data;
    c.size = int32_t(ctx.inputs[index].nbytes);
  }
  return c;
}

/// CMSIS-NN's convolutions keep dims and pads in 16 bits.
inline bool fits_u16(int32_t v) { return v >= 0 && v <= 0xffff; }

}  // namespace cmsis_nn
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_CMSIS_NN_COMMON_H_
