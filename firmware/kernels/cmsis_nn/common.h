// Internal to the CMSIS-NN kernels: CMSIS-NN's headers and the conversions
// from kernel arguments to its argument structs.
#ifndef TORCHMCU_KERNELS_CMSIS_NN_COMMON_H_
#define TORCHMCU_KERNELS_CMSIS_NN_COMMON_H_

#include "arm_nnfunctions.h"
#include "core/kernel.h"
#include "kernels/portable/kernels.h"

namespace torchmcu {
namespace cmsis_nn {

/// NHWC dims as CMSIS-NN's.
inline cmsis_nn_dims nhwc(const int32_t* d) { return cmsis_nn_dims{d[0], d[1], d[2], d[3]}; }

/// The optional scratch operand (input `index`): its bytes, or none.
inline cmsis_nn_context scratch(const OpContext& ctx, uint32_t index) {
  cmsis_nn_context c{nullptr, 0};
  if (ctx.num_inputs() > index && OpContext::present(ctx.input(index))) {
    c.buf = ctx.in<void>(index);
    c.size = int32_t(ctx.input(index).nbytes);
  }
  return c;
}

/// CMSIS-NN's convolutions keep dims and pads in 16 bits.
inline bool fits_u16(int32_t v) { return v >= 0 && v <= 0xffff; }

}  // namespace cmsis_nn
}  // namespace torchmcu

#endif  // TORCHMCU_KERNELS_CMSIS_NN_COMMON_H_
