# torchmcu's CMake targets and functions, for the installed package
# (torchmcuConfig.cmake) and for add_subdirectory() of the source tree.
#
# Targets (static libraries compiled with the calling project's toolchain):
#   torchmcu::runtime        program reader, verifier, executor and the portable kernels
#   torchmcu::app            tmcu_app_run(): a program over an io blob, reported in the line protocol
#   torchmcu::platform_host  the platform layer for host builds (stdout, exit)
#   torchmcu::cmsis_nn       the CMSIS-NN kernels and CMSIS-NN itself; defined when CMSIS-NN is
#                            found: TORCHMCU_CMSIS_NN_DIR (CMake or environment variable, a
#                            CMSIS-NN checkout), else the pack `torchmcu deps cmsis-nn` cached
#
# Variable:
#   TORCHMCU_VERIFY          OFF builds the runtime for trusted programs only (minimal
#                            verification at load, no verifier in the image); default ON
#
# Functions:
#   torchmcu_add_model(<target> DIR <dir> [KERNEL_TABLE <file>])
#     Adds a compiled model (what `torchmcu compile -o <dir>` wrote: model_pte.c, model_arenas.c,
#     kernel_table.cc, and its C API NAME.cc with NAME.h) to <target> and links the runtime. The
#     kernel table names only the kernels the model uses, so the linker keeps only those. KERNEL_TABLE replaces it, e.g. with the
#     CMSIS-NN table `torchmcu build <dir> --kernels cmsis-nn` writes (fw/kernel_table_cmsis_nn.cc).
#     Several models in one target: compile each with its own `--symbol`, write one table for all
#     (`torchmcu kernel-table <dir>... -o <file>`) and pass that same KERNEL_TABLE to each call.
#   torchmcu_target_board(<target> BOARD <name|file.toml> [MODEL_DIR <dir>] [PYTHON <python>])
#     Links <target> as `torchmcu build` does for one of torchmcu's boards: its startup and
#     platform code, the linker script generated from the board description (with the model's
#     arenas when MODEL_DIR is given) and its link flags. Runs torchmcu (Python) at configure time:
#     PYTHON, else TORCHMCU_PYTHON, else the Python 3 CMake finds, must import torchmcu. The
#     compiler flags must already be the board's (TORCHMCU_CPU_FLAGS of arm-none-eabi.cmake).
include_guard(GLOBAL)

set_property(GLOBAL PROPERTY TORCHMCU_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")

# The flags torchmcu's own builds use (aot/torchmcu/sources.py), less -Werror: a
# newer compiler's warnings must not break a user's build.
function(_torchmcu_flags target)
  target_compile_features(${target} PUBLIC cxx_std_17)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE
      -ffunction-sections -fdata-sections -Wall -Wextra
      "$<$<COMPILE_LANGUAGE:CXX>:-fno-rtti;-fno-exceptions;-fno-threadsafe-statics>")
  endif()
endfunction()

# Where CMSIS-NN is: TORCHMCU_CMSIS_NN_DIR (CMake, then environment), else the
# record `torchmcu deps cmsis-nn` wrote in its cache ($TORCHMCU_CACHE_DIR, else
# $XDG_CACHE_HOME/torchmcu, else ~/.cache/torchmcu). Empty when none.
function(_torchmcu_find_cmsis_nn out)
  set(dir "${TORCHMCU_CMSIS_NN_DIR}")
  if(NOT dir AND DEFINED ENV{TORCHMCU_CMSIS_NN_DIR})
    set(dir "$ENV{TORCHMCU_CMSIS_NN_DIR}")
  endif()
  if(NOT dir)
    if(DEFINED ENV{TORCHMCU_CACHE_DIR} AND NOT "$ENV{TORCHMCU_CACHE_DIR}" STREQUAL "")
      set(cache "$ENV{TORCHMCU_CACHE_DIR}")
    elseif(DEFINED ENV{XDG_CACHE_HOME} AND NOT "$ENV{XDG_CACHE_HOME}" STREQUAL "")
      set(cache "$ENV{XDG_CACHE_HOME}/torchmcu")
    else()
      set(cache "$ENV{HOME}/.cache/torchmcu")
    endif()
    if(EXISTS "${cache}/cmsis-nn.json")
      file(READ "${cache}/cmsis-nn.json" record)
      string(JSON dir ERROR_VARIABLE json_error GET "${record}" path)
      if(json_error)
        set(dir "")
      endif()
    endif()
  endif()
  if(dir AND NOT EXISTS "${dir}/Include/arm_nnfunctions.h")
    message(FATAL_ERROR "torchmcu: TORCHMCU_CMSIS_NN_DIR=${dir} is not a CMSIS-NN checkout "
                        "(no Include/arm_nnfunctions.h)")
  endif()
  set(${out} "${dir}" PARENT_SCOPE)
endfunction()

# _torchmcu_define_targets(<firmware dir> <public include dir>): the targets
# above, over the sources in <firmware dir> (firmware/ of the tree, or its
# installed copy). Defined once per build tree.
function(_torchmcu_define_targets fw include_dir)
  if(TARGET torchmcu::runtime)
    return()
  endif()
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if(NOT "C" IN_LIST languages OR NOT "CXX" IN_LIST languages)
    message(FATAL_ERROR "torchmcu: enable C and CXX before find_package(torchmcu), e.g. project(app C CXX)")
  endif()
  set_property(GLOBAL PROPERTY TORCHMCU_FIRMWARE_DIR "${fw}")

  file(GLOB core CONFIGURE_DEPENDS "${fw}/core/*.cc")
  file(GLOB_RECURSE portable CONFIGURE_DEPENDS "${fw}/kernels/portable/*.cc")
  add_library(torchmcu_runtime STATIC ${core} ${portable})
  add_library(torchmcu::runtime ALIAS torchmcu_runtime)
  target_include_directories(torchmcu_runtime PUBLIC "${include_dir}" "${fw}")
  _torchmcu_flags(torchmcu_runtime)
  # OFF: a runtime for trusted programs (core/program.h Verification::kMinimal),
  # without the verifier and the kernels' checks. PUBLIC: every file that
  # includes the runtime's headers must agree.
  if(DEFINED TORCHMCU_VERIFY AND NOT TORCHMCU_VERIFY)
    target_compile_definitions(torchmcu_runtime PUBLIC TORCHMCU_VERIFY=0)
  endif()

  file(GLOB app CONFIGURE_DEPENDS "${fw}/app/*.cc")
  list(FILTER app EXCLUDE REGEX "/main_firmware\\.cc$")  # `torchmcu build`'s entry point
  add_library(torchmcu_app STATIC ${app})
  add_library(torchmcu::app ALIAS torchmcu_app)
  target_link_libraries(torchmcu_app PUBLIC torchmcu_runtime)
  _torchmcu_flags(torchmcu_app)

  add_library(torchmcu_platform_host STATIC "${fw}/host/platform_host.cc")
  add_library(torchmcu::platform_host ALIAS torchmcu_platform_host)
  target_include_directories(torchmcu_platform_host PRIVATE "${fw}")
  _torchmcu_flags(torchmcu_platform_host)

  _torchmcu_find_cmsis_nn(nn)
  if(nn)
    # CMSIS-NN's integer kernels (its float API needs ARM_NN_ENABLE_F16/F32),
    # at -O2 as torchmcu build compiles them, its warnings its own.
    file(GLOB_RECURSE nn_sources "${nn}/Source/*.c")
    list(FILTER nn_sources EXCLUDE REGEX "_f(16|32)\\.c$")
    file(GLOB kernels CONFIGURE_DEPENDS "${fw}/kernels/cmsis_nn/*.cc")
    add_library(torchmcu_cmsis_nn STATIC ${kernels} ${nn_sources})
    add_library(torchmcu::cmsis_nn ALIAS torchmcu_cmsis_nn)
    target_include_directories(torchmcu_cmsis_nn SYSTEM PUBLIC "${nn}/Include")
    target_link_libraries(torchmcu_cmsis_nn PUBLIC torchmcu_runtime)
    _torchmcu_flags(torchmcu_cmsis_nn)
    set_source_files_properties(${nn_sources} PROPERTIES COMPILE_OPTIONS "-O2;-w")
    message(STATUS "torchmcu: CMSIS-NN from ${nn} (torchmcu::cmsis_nn)")
  endif()
endfunction()

function(torchmcu_add_model target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "DIR;KERNEL_TABLE" "")
  if(NOT arg_DIR)
    message(FATAL_ERROR "torchmcu_add_model(${target}): DIR <compiled model directory> is required")
  endif()
  get_filename_component(dir "${arg_DIR}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  set(table "${dir}/kernel_table.cc")
  if(arg_KERNEL_TABLE)
    get_filename_component(table "${arg_KERNEL_TABLE}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  endif()
  foreach(file "${dir}/model_pte.c" "${dir}/model_arenas.c" "${table}")
    if(NOT EXISTS "${file}")
      message(FATAL_ERROR "torchmcu_add_model(${target}): ${file} not found; compile the model first: "
                          "torchmcu compile model.py:make --board <board> -o ${dir}")
    endif()
  endforeach()
  target_sources(${target} PRIVATE "${dir}/model_pte.c" "${dir}/model_arenas.c" "${table}")
  # The model's C API (NAME.cc beside NAME.h: tmcu_NAME_init, _input, _invoke, _output, _reset).
  file(GLOB api_sources "${dir}/*.cc")
  list(FILTER api_sources EXCLUDE REGEX "/kernel_table[^/]*\\.cc$")
  target_sources(${target} PRIVATE ${api_sources})
  target_include_directories(${target} PRIVATE "${dir}")
  file(READ "${table}" table_text)
  if(table_text MATCHES "kernels/cmsis_nn/kernels\\.h")
    if(NOT TARGET torchmcu::cmsis_nn)
      message(FATAL_ERROR "torchmcu_add_model(${target}): ${table} uses CMSIS-NN kernels, and CMSIS-NN was "
                          "not found: set TORCHMCU_CMSIS_NN_DIR to a CMSIS-NN checkout, or run "
                          "`torchmcu deps cmsis-nn`")
    endif()
    target_link_libraries(${target} PRIVATE torchmcu::cmsis_nn)
  endif()
  target_link_libraries(${target} PRIVATE torchmcu::runtime)
endfunction()

function(torchmcu_target_board target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "BOARD;MODEL_DIR;PYTHON" "")
  if(NOT arg_BOARD)
    message(FATAL_ERROR "torchmcu_target_board(${target}): BOARD <name or .toml> is required")
  endif()
  set(python "${arg_PYTHON}")
  if(NOT python)
    set(python "${TORCHMCU_PYTHON}")
  endif()
  if(NOT python)
    find_package(Python3 COMPONENTS Interpreter)
    set(python "${Python3_EXECUTABLE}")
  endif()
  if(NOT python)
    message(FATAL_ERROR "torchmcu_target_board(${target}): no Python found; set TORCHMCU_PYTHON to a Python "
                        "that imports torchmcu")
  endif()
  get_property(cmake_dir GLOBAL PROPERTY TORCHMCU_CMAKE_DIR)
  get_property(fw GLOBAL PROPERTY TORCHMCU_FIRMWARE_DIR)
  set(out "${CMAKE_CURRENT_BINARY_DIR}/torchmcu_board_${target}")
  set(command "${python}" "${cmake_dir}/torchmcu_board.py" --board "${arg_BOARD}" --out "${out}")
  if(arg_MODEL_DIR)
    get_filename_component(model "${arg_MODEL_DIR}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND command --model "${model}")
  endif()
  execute_process(COMMAND ${command} RESULT_VARIABLE status ERROR_VARIABLE error)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "torchmcu_target_board(${target}): ${error}")
  endif()
  include("${out}/board.cmake")  # _tmcu_board_* (see torchmcu_board.py)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${_tmcu_board_depends})

  # One float ABI and core for every object of the image: the toolchain's flags must be the board's.
  separate_arguments(have UNIX_COMMAND "${CMAKE_C_FLAGS} ${CMAKE_CXX_FLAGS}")
  foreach(flag IN LISTS _tmcu_board_cflags)
    if(NOT flag IN_LIST have)
      list(JOIN _tmcu_board_cflags " " wanted)
      message(FATAL_ERROR "torchmcu_target_board(${target}): board ${_tmcu_board_name} needs ${flag} on every "
                          "compile; configure with -DTORCHMCU_CPU_FLAGS=\"${wanted}\" (arm-none-eabi.cmake)")
    endif()
  endforeach()

  # The board's startup and platform code, compiled with its -D macros.
  file(GLOB board_sources "${fw}/boards/*.c" "${fw}/boards/*.cc" "${fw}/boards/*.cpp" "${fw}/boards/*.S"
       "${fw}/boards/*.s")
  add_library(${target}_torchmcu_board OBJECT ${board_sources})
  target_compile_definitions(${target}_torchmcu_board PRIVATE ${_tmcu_board_defines})
  target_include_directories(${target}_torchmcu_board PRIVATE "${fw}")
  _torchmcu_flags(${target}_torchmcu_board)
  target_link_libraries(${target} PRIVATE ${target}_torchmcu_board)
  target_link_options(${target} PRIVATE ${_tmcu_board_link_options})
  target_link_libraries(${target} PRIVATE ${_tmcu_board_link_libraries})
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${out}/board.ld")
  set_property(TARGET ${target} PROPERTY TORCHMCU_QEMU_MACHINE "${_tmcu_board_qemu_machine}")
endfunction()
