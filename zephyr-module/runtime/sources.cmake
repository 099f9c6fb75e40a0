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
  kernels/portable/activations/activations.cc
  kernels/portable/activations/ops_activations.cc
  kernels/portable/attention_norm/attention_norm.cc
  kernels/portable/attention_norm/batch_matmul_f32.cc
  kernels/portable/attention_norm/batch_matmul_s8.cc
  kernels/portable/attention_norm/ops_attention_norm.cc
  kernels/portable/common/requantize.cc
  kernels/portable/conv/conv2d_f32.cc
  kernels/portable/conv/conv2d_s16.cc
  kernels/portable/conv/conv2d_s4.cc
  kernels/portable/conv/conv2d_s8.cc
  kernels/portable/conv/linear_f32.cc
  kernels/portable/conv/linear_s8.cc
  kernels/portable/conv/ops_conv.cc
  kernels/portable/conv/transpose_conv.cc
  kernels/portable/elementwise/arith.cc
  kernels/portable/elementwise/binary_f32.cc
  kernels/portable/elementwise/binary_s16.cc
  kernels/portable/elementwise/binary_s8.cc
  kernels/portable/elementwise/ops_elementwise.cc
  kernels/portable/elementwise/quantize.cc
  kernels/portable/elementwise/select.cc
  kernels/portable/elementwise/unary_f32.cc
  kernels/portable/pool_resize/ops_pool_resize.cc
  kernels/portable/pool_resize/pool2d_f32.cc
  kernels/portable/pool_resize/pool2d_s16.cc
  kernels/portable/pool_resize/pool2d_s8.cc
  kernels/portable/pool_resize/resize.cc
  kernels/portable/recurrent/ops_recurrent.cc
  kernels/portable/recurrent/recurrent_f32.cc
  kernels/portable/recurrent/recurrent_s8.cc
  kernels/portable/reduce/mean_f32.cc
  kernels/portable/reduce/ops_reduce.cc
  kernels/portable/reduce/reductions.cc
  kernels/portable/reduce/softmax_f32.cc
  kernels/portable/reduce/softmax_s8.cc
  kernels/portable/shape_views/concat.cc
  kernels/portable/shape_views/gather.cc
  kernels/portable/shape_views/ops_shape_views.cc
  kernels/portable/shape_views/pad.cc
  kernels/portable/shape_views/permute.cc
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
