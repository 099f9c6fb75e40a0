# The model hook: an application names its model and the build compiles it
# ahead of time with torchmcu's command line, then compiles the generated
# arrays into the image. No generated file is copied by hand.
#
# Variables (set them before find_package(Zephyr), or with -D on the command
# line; relative paths are taken from the application's source directory):
#
#   TORCHMCU_MODEL        path/to/model.py:function (a function returning
#                         (nn.Module, example_inputs), as `torchmcu compile`
#                         takes it), or a directory `torchmcu compile` wrote.
#   TORCHMCU_BOARD        torchmcu board the memory plan is made for
#                         (`torchmcu boards`); default from the Zephyr CPU:
#                         M55 mps3-an547, M33 mps2-an505, M7 mps2-an500,
#                         M4 mps2-an386, M3 mps2-an385. The program itself
#                         runs on any Cortex-M; Zephyr's link checks the RAM.
#   TORCHMCU_QUANT        float32 (default) or int8.
#   TORCHMCU_IO           float (default) or int8: the program's input and
#                         output dtype (with int8 quantization).
#   TORCHMCU_IO_LAYOUT    nchw (default) or nhwc: the inputs' and outputs'
#                         order (nhwc: channels last, no permute at the edges).
#   TORCHMCU_SYMBOL       the model's C name (default model): its C API is
#                         NAME.h (tmcu_NAME_init, _input, _invoke, _output).
#   TORCHMCU_CALIBRATION  calibration data for int8: an .npz (one array per
#                         model input, samples along axis 0), or
#                         path.py:function returning such arrays.
#   TORCHMCU_INPUT        the samples the line-protocol app runs
#                         (CONFIG_TORCHMCU_APP): .npz/.npy, or
#                         path.py:function; default the model's example inputs.
#   TORCHMCU_MODEL_DEPENDS  further files whose change recompiles the model
#                         (e.g. a module the model file imports).
#   TORCHMCU_PYTHON       the interpreter that runs torchmcu; default the
#                         repository's .venv/bin/python when it exists, else
#                         Zephyr's Python. It needs torch and numpy; aot/ is
#                         put on its PYTHONPATH.
#
# The stack: after the compile, `torchmcu build` links the model's bare-metal
# firmware for TORCHMCU_BOARD (same CPU, same GCC, -Os, the same kernel set)
# and writes NAME_stack.h: TMCU_NAME_STACK_BYTES, the computed worst case of
# the model's calls (tmcu_NAME_init/invoke/reset) with the deepest exception
# frame. A thread that calls the model sizes its stack as that plus its own
# need (samples/keyword_spotting/src/main.c).
#
# What it makes: a Zephyr library `torchmcu_model` (model_pte.c,
# model_arenas.c, the model's C API NAME.cc, the kernel table of the ops the
# model uses and, with CONFIG_TORCHMCU_APP, model_io.c), and the application
# target `app` gets the include directory of NAME.h, model_pte.h and
# model_arenas.h (runtime/CMakeLists.txt gives it the runtime's headers).
# Generated files go to ${CMAKE_BINARY_DIR}/torchmcu/.

set(TORCHMCU_MODULE_DIR ${CMAKE_CURRENT_LIST_DIR}/..)

# An argument that names a Python function (path.py:function) rather than a file.
function(torchmcu_is_python_entry value result)
  if(value MATCHES "\\.py:[A-Za-z_][A-Za-z0-9_]*$")
    set(${result} TRUE PARENT_SCOPE)
  else()
    set(${result} FALSE PARENT_SCOPE)
  endif()
endfunction()

# Absolute path of a file argument, relative ones taken from the app's sources.
function(torchmcu_absolute value result)
  if(IS_ABSOLUTE "${value}")
    set(${result} "${value}" PARENT_SCOPE)
  else()
    get_filename_component(abs "${value}" ABSOLUTE BASE_DIR ${APPLICATION_SOURCE_DIR})
    set(${result} "${abs}" PARENT_SCOPE)
  endif()
endfunction()

function(torchmcu_default_board result)
  if(CONFIG_CPU_CORTEX_M55)
    set(board mps3-an547)
  elseif(CONFIG_CPU_CORTEX_M33)
    set(board mps2-an505)
  elseif(CONFIG_CPU_CORTEX_M7)
    set(board mps2-an500)
  elseif(CONFIG_CPU_CORTEX_M4)
    set(board mps2-an386)
  elseif(CONFIG_CPU_CORTEX_M3)
    set(board mps2-an385)
  else()
    message(FATAL_ERROR "torchmcu: no default torchmcu board for this CPU; set TORCHMCU_BOARD to one "
      "`torchmcu boards` lists (or a board .toml describing your memories)")
  endif()
  set(${result} ${board} PARENT_SCOPE)
endfunction()

# The python that runs torchmcu, checked once at configure time so that a
# missing torch or numpy is reported before the build starts.
function(torchmcu_find_python result)
  if(TORCHMCU_PYTHON)
    set(py ${TORCHMCU_PYTHON})
  elseif(EXISTS ${TORCHMCU_ROOT}/.venv/bin/python)
    set(py ${TORCHMCU_ROOT}/.venv/bin/python)
  elseif(Python3_EXECUTABLE)
    set(py ${Python3_EXECUTABLE})
  else()
    set(py ${PYTHON_EXECUTABLE})
  endif()
  execute_process(
    COMMAND ${CMAKE_COMMAND} -E env PYTHONPATH=${TORCHMCU_ROOT}/aot ${py} -c "import numpy, torchmcu.cli"
    RESULT_VARIABLE status OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "torchmcu: ${py} cannot import torchmcu (${err}); set TORCHMCU_PYTHON to a "
      "Python with torch and numpy installed (e.g. the repository's .venv/bin/python after `make setup`)")
  endif()
  set(${result} ${py} PARENT_SCOPE)
endfunction()

function(torchmcu_model_from_variables)
  if(NOT TORCHMCU_MODEL)
    return()
  endif()
  torchmcu_find_python(py)
  set(run ${CMAKE_COMMAND} -E env PYTHONPATH=${TORCHMCU_ROOT}/aot ${py})
  set(helper ${TORCHMCU_MODULE_DIR}/scripts/torchmcu_zephyr.py)
  set(gen ${CMAKE_BINARY_DIR}/torchmcu)
  file(MAKE_DIRECTORY ${gen})

  torchmcu_is_python_entry("${TORCHMCU_MODEL}" compile_model)
  if(compile_model)
    string(REGEX REPLACE ":[A-Za-z_][A-Za-z0-9_]*$" "" model_file "${TORCHMCU_MODEL}")
    string(REGEX MATCH "[A-Za-z_][A-Za-z0-9_]*$" model_function "${TORCHMCU_MODEL}")
    torchmcu_absolute("${model_file}" model_file)
    if(NOT EXISTS ${model_file})
      message(FATAL_ERROR "torchmcu: TORCHMCU_MODEL names ${model_file}, which does not exist")
    endif()
    set(model_dir ${gen}/model)
  else()
    torchmcu_absolute("${TORCHMCU_MODEL}" model_dir)
    if(NOT EXISTS ${model_dir}/model.json)
      message(FATAL_ERROR "torchmcu: TORCHMCU_MODEL=${TORCHMCU_MODEL} is neither path.py:function nor "
        "a directory written by `torchmcu compile` (no ${model_dir}/model.json)")
    endif()
  endif()
  if(TORCHMCU_SYMBOL)
    set(symbol ${TORCHMCU_SYMBOL})
  else()
    set(symbol model)
  endif()
  set(model_outputs
    ${model_dir}/${symbol}.h ${model_dir}/${symbol}.cc
    ${model_dir}/model_pte.c ${model_dir}/model_pte.h ${model_dir}/model_arenas.c
    ${model_dir}/model_arenas.h ${model_dir}/kernel_table.cc ${model_dir}/kernels.txt
    ${model_dir}/model.json ${model_dir}/model.pte ${model_dir}/example_inputs.npz)

  # Arrays given as path.py:function become .npz files first.
  foreach(kind CALIBRATION INPUT)
    set(value "${TORCHMCU_${kind}}")
    set(${kind}_file "")
    set(${kind}_depends "")
    if(value)
      torchmcu_is_python_entry("${value}" is_entry)
      if(is_entry)
        string(REGEX REPLACE ":[A-Za-z_][A-Za-z0-9_]*$" "" entry_file "${value}")
        string(REGEX MATCH "[A-Za-z_][A-Za-z0-9_]*$" entry_function "${value}")
        torchmcu_absolute("${entry_file}" entry_file)
        string(TOLOWER ${kind} name)
        set(${kind}_file ${gen}/${name}.npz)
        add_custom_command(
          OUTPUT ${${kind}_file}
          COMMAND ${run} ${helper} arrays ${entry_file}:${entry_function} ${${kind}_file}
          DEPENDS ${entry_file} ${helper} ${TORCHMCU_MODEL_DEPENDS}
          COMMENT "torchmcu: ${name} data from ${entry_file}:${entry_function}")
      else()
        torchmcu_absolute("${value}" ${kind}_file)
      endif()
      set(${kind}_depends ${${kind}_file})
    endif()
  endforeach()

  set(stamp ${gen}/model.stamp)
  if(compile_model)
    if(TORCHMCU_BOARD)
      set(board ${TORCHMCU_BOARD})
    else()
      torchmcu_default_board(board)
    endif()
    if(NOT TORCHMCU_QUANT)
      set(TORCHMCU_QUANT float32)
    endif()
    if(NOT TORCHMCU_IO)
      set(TORCHMCU_IO float)
    endif()
    if(NOT TORCHMCU_IO_LAYOUT)
      set(TORCHMCU_IO_LAYOUT nchw)
    endif()
    set(args ${model_file}:${model_function} --board ${board} -o ${model_dir}
      --quant ${TORCHMCU_QUANT} --io ${TORCHMCU_IO} --io-layout ${TORCHMCU_IO_LAYOUT} --symbol ${symbol})
    if(CALIBRATION_file)
      list(APPEND args --calibration ${CALIBRATION_file})
    endif()
    # Any change to the compiler can change the program: recompile then too.
    file(GLOB_RECURSE compiler_sources CONFIGURE_DEPENDS
      ${TORCHMCU_ROOT}/aot/torchmcu/*.py ${TORCHMCU_ROOT}/aot/torchmcu/*.fbs)
    add_custom_command(
      OUTPUT ${stamp}
      BYPRODUCTS ${model_outputs}
      COMMAND ${run} -m torchmcu.cli compile ${args}
      COMMAND ${CMAKE_COMMAND} -E touch ${stamp}
      DEPENDS ${model_file} ${CALIBRATION_depends} ${TORCHMCU_MODEL_DEPENDS} ${compiler_sources}
      COMMENT "torchmcu: compiling ${TORCHMCU_MODEL} for ${board} (${TORCHMCU_QUANT})"
      VERBATIM)
  else()
    add_custom_command(
      OUTPUT ${stamp}
      COMMAND ${CMAKE_COMMAND} -E touch ${stamp}
      DEPENDS ${model_outputs}
      COMMENT "torchmcu: using the compiled model in ${model_dir}")
  endif()

  # NAME_stack.h from the bare-metal link of the same model (see the top of this file).
  set(stack_header ${model_dir}/${symbol}_stack.h)
  set(stack_env PYTHONPATH=${TORCHMCU_ROOT}/aot)
  set(stack_kernels portable)
  if(CONFIG_TORCHMCU_KERNELS_CMSIS_NN AND ZEPHYR_CMSIS_NN_MODULE_DIR)
    set(stack_kernels cmsis-nn)
    list(APPEND stack_env TORCHMCU_CMSIS_NN_DIR=${ZEPHYR_CMSIS_NN_MODULE_DIR})
  endif()
  add_custom_command(
    OUTPUT ${stack_header}
    COMMAND ${CMAKE_COMMAND} -E env ${stack_env} ${py} -m torchmcu.cli build ${model_dir} --kernels ${stack_kernels}
    DEPENDS ${stamp}
    COMMENT "torchmcu: the model's stack (torchmcu build: ${symbol}_stack.h)"
    VERBATIM)

  set(sources ${model_dir}/model_pte.c ${model_dir}/model_arenas.c ${model_dir}/${symbol}.cc)
  set(generated ${stamp} ${stack_header})
  if(CONFIG_TORCHMCU_KERNELS_CMSIS_NN)
    set(table ${gen}/kernel_table_cmsis_nn.cc)
    add_custom_command(
      OUTPUT ${table}
      COMMAND ${run} ${helper} kernel-table ${model_dir} cmsis-nn ${table}
      DEPENDS ${stamp} ${helper}
      COMMENT "torchmcu: kernel table (CMSIS-NN where it has the kernel)")
    list(APPEND sources ${table})
    list(APPEND generated ${table})
  else()
    list(APPEND sources ${model_dir}/kernel_table.cc)
  endif()
  if(CONFIG_TORCHMCU_APP)
    if(INPUT_file)
      set(input ${INPUT_file})
    else()
      set(input ${model_dir}/example_inputs.npz)
    endif()
    set(io_args ${model_dir} ${input} ${gen}/model_io.c)
    if(CONFIG_TORCHMCU_PROFILING)
      list(APPEND io_args --profile)
    endif()
    add_custom_command(
      OUTPUT ${gen}/model_io.c
      COMMAND ${run} ${helper} io-blob ${io_args}
      DEPENDS ${stamp} ${INPUT_depends} ${helper}
      COMMENT "torchmcu: io blob of ${input}")
    list(APPEND sources ${gen}/model_io.c)
    list(APPEND generated ${gen}/model_io.c)
  endif()
  add_custom_target(torchmcu_model_generate DEPENDS ${generated})

  zephyr_library_named(torchmcu_model)
  zephyr_library_sources(${sources})
  zephyr_library_include_directories(${model_dir} ${TORCHMCU_FIRMWARE_DIR} ${TORCHMCU_FIRMWARE_DIR}/include)
  add_dependencies(torchmcu_model torchmcu_model_generate)

  # The application sees model_pte.h and model_arenas.h, once generated.
  target_include_directories(app PRIVATE ${model_dir})
  add_dependencies(app torchmcu_model_generate)
endfunction()
