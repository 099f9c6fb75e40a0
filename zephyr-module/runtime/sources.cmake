# The runtime's sources, relative to firmware/: the one place the Zephyr
# module names them. tests/test_zephyr.py checks these lists against
# aot/torchmcu/sources.py (CORE_SOURCES, APP_SOURCES, kernel_sources(), the
# CMSIS-NN kernels and DELEGATE_SOURCES), so a file added, renamed or removed
# there fails the test until it is listed here too.

set(TORCHMCU_CORE_SOURCES
  core/c_api.cc
  core/method.cc
  core/program.cc
)

set(TORCHMCU_APP_SOURCES
  app/app.cc
)

set(TORCHMCU_PORTABLE_KERNEL_SOURCES
  kernels/portable/activations.cc
  kernels/portable/arith.cc
  kernels/portable/attention_norm.cc
  kernels/portable/batch_matmul.cc
  kernels/portable/batch_matmul_s8.cc
  kernels/portable/binary.cc
  kernels/portable/binary_s8.cc
  kernels/portable/concat.cc
  kernels/portable/conv2d.cc
  kernels/portable/conv2d_s16.cc
  kernels/portable/conv2d_s4.cc
  kernels/portable/conv2d_s8.cc
  kernels/portable/linear.cc
  kernels/portable/linear_s8.cc
  kernels/portable/mean.cc
  kernels/portable/ops_activations.cc
  kernels/portable/ops_arith.cc
  kernels/portable/ops_attention_norm.cc
  kernels/portable/ops_conv_pool.cc
  kernels/portable/ops_f32.cc
  kernels/portable/ops_recurrent.cc
  kernels/portable/ops_reductions.cc
  kernels/portable/ops_s16.cc
  kernels/portable/ops_s8.cc
  kernels/portable/pad.cc
  kernels/portable/permute.cc
  kernels/portable/pool2d.cc
  kernels/portable/pool2d_s8.cc
  kernels/portable/quantize_s8.cc
  kernels/portable/recurrent_f32.cc
  kernels/portable/recurrent_s8.cc
  kernels/portable/reductions.cc
  kernels/portable/requantize_s8.cc
  kernels/portable/resize.cc
  kernels/portable/slice.cc
  kernels/portable/softmax.cc
  kernels/portable/softmax_s8.cc
  kernels/portable/transpose_conv.cc
  kernels/portable/unary.cc
)

set(TORCHMCU_CMSIS_NN_KERNEL_SOURCES
  kernels/cmsis_nn/batch_matmul.cc
  kernels/cmsis_nn/binary_s8.cc
  kernels/cmsis_nn/conv_s4.cc
  kernels/cmsis_nn/conv_s8.cc
  kernels/cmsis_nn/linear_s4.cc
  kernels/cmsis_nn/linear_s8.cc
  kernels/cmsis_nn/lstm.cc
  kernels/cmsis_nn/ops_s16.cc
  kernels/cmsis_nn/pool_s8.cc
  kernels/cmsis_nn/softmax_s8.cc
  kernels/cmsis_nn/transpose_conv_s8.cc
)

# build.py's DELEGATE_SOURCES less the bare-metal NPU board support
# (boards/npu/ethos_u.cc): on Zephyr the kernel's Ethos-U driver starts the NPU
# and provides the driver's OS hooks, and platform_zephyr.cc reports its state.
set(TORCHMCU_ETHOS_U_SOURCES
  delegates/ethos_u/blob.cc
  delegates/ethos_u/ethos_u.cc
)
