# The runtime's sources, relative to firmware/: the one place the Zephyr
# module names them. tests/test_zephyr.py checks these lists against
# aot/torchmcu/sources.py (CORE_SOURCES, APP_SOURCES, kernel_sources(), the
# CMSIS-NN kernels and DELEGATE_SOURCES), so a file added, renamed or removed
# there fails the test until it is listed here too.

set(TORCHMCU_CORE_SOURCES
  core/program.cc
  core/method.cc
  core/c_api.cc
)

set(TORCHMCU_APP_SOURCES
  app/app.cc
)

set(TORCHMCU_PORTABLE_KERNEL_SOURCES
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
  kernels/portable/ops_f32.cc
  kernels/portable/ops_s16.cc
  kernels/portable/ops_s8.cc
  kernels/portable/pad.cc
  kernels/portable/permute.cc
  kernels/portable/pool2d.cc
  kernels/portable/pool2d_s8.cc
  kernels/portable/quantize_s8.cc
  kernels/portable/requantize_s8.cc
  kernels/portable/slice.cc
  kernels/portable/softmax.cc
  kernels/portable/softmax_s8.cc
  kernels/portable/unary.cc
)

set(TORCHMCU_CMSIS_NN_KERNEL_SOURCES
  kernels/cmsis_nn/binary_s8.cc
  kernels/cmsis_nn/conv_s4.cc
  kernels/cmsis_nn/conv_s8.cc
  kernels/cmsis_nn/linear_s4.cc
  kernels/cmsis_nn/linear_s8.cc
  kernels/cmsis_nn/ops_s16.cc
  kernels/cmsis_nn/pool_s8.cc
  kernels/cmsis_nn/softmax_s8.cc
)

# build.py's DELEGATE_SOURCES less the bare-metal NPU board support
# (boards/npu/ethos_u.cc): on Zephyr the kernel's Ethos-U driver starts the NPU
# and provides the driver's OS hooks, and platform_zephyr.cc reports its state.
set(TORCHMCU_ETHOS_U_SOURCES
  delegates/ethos_u/blob.cc
  delegates/ethos_u/ethos_u.cc
)
