# CMake toolchain file: GNU Arm Embedded (arm-none-eabi-gcc) for bare-metal Cortex-M.
#
#   cmake -S app -B build -DCMAKE_TOOLCHAIN_FILE=<prefix>/lib/cmake/torchmcu/arm-none-eabi.cmake \
#         -DTORCHMCU_CPU_FLAGS="-mcpu=cortex-m55 -mthumb -mfloat-abi=hard" -DCMAKE_BUILD_TYPE=MinSizeRel
#
# TORCHMCU_CPU_FLAGS: the core's flags, given to every compile and link (the
#   linker picks the matching libc/libm/libgcc multilib from them). torchmcu's
#   boards print theirs: python -c "from torchmcu.boards import load_board;
#   print(' '.join(load_board('mps3-an547').cflags))". Default: a Cortex-M3,
#   whose code runs on every Armv7-M and Armv8-M Mainline core.
# TORCHMCU_TOOLCHAIN_DIR: the folder holding arm-none-eabi-gcc, when it is not on PATH.
# TORCHMCU_TOOLCHAIN_PREFIX: the tools' prefix (default arm-none-eabi-).
#
# Executables get the .elf suffix. Linking needs the application's startup and
# linker script (torchmcu_target_board() adds torchmcu's for its QEMU boards);
# the compiler checks build static libraries, so none is needed to configure.

set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)

set(TORCHMCU_CPU_FLAGS "-mcpu=cortex-m3 -mthumb -mfloat-abi=soft" CACHE STRING
    "Core flags for every compile and link, e.g. -mcpu=cortex-m55 -mthumb -mfloat-abi=hard")
set(TORCHMCU_TOOLCHAIN_PREFIX "arm-none-eabi-" CACHE STRING "Prefix of the GNU Arm tools")
set(TORCHMCU_TOOLCHAIN_DIR "" CACHE PATH "Folder holding arm-none-eabi-gcc when it is not on PATH")
# try_compile() projects re-read this file: hand them the same choices.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES TORCHMCU_CPU_FLAGS TORCHMCU_TOOLCHAIN_PREFIX
     TORCHMCU_TOOLCHAIN_DIR)

set(_tmcu_hints)
if(TORCHMCU_TOOLCHAIN_DIR)
  set(_tmcu_hints HINTS "${TORCHMCU_TOOLCHAIN_DIR}" "${TORCHMCU_TOOLCHAIN_DIR}/bin" NO_DEFAULT_PATH)
endif()
find_program(TORCHMCU_GCC "${TORCHMCU_TOOLCHAIN_PREFIX}gcc" ${_tmcu_hints})
find_program(TORCHMCU_GXX "${TORCHMCU_TOOLCHAIN_PREFIX}g++" ${_tmcu_hints})
if(NOT TORCHMCU_GCC OR NOT TORCHMCU_GXX)
  message(FATAL_ERROR "arm-none-eabi.cmake: ${TORCHMCU_TOOLCHAIN_PREFIX}gcc/g++ not found; install them "
                      "(Debian: gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib) "
                      "or set TORCHMCU_TOOLCHAIN_DIR to their folder")
endif()
set(CMAKE_C_COMPILER "${TORCHMCU_GCC}")
set(CMAKE_CXX_COMPILER "${TORCHMCU_GXX}")
set(CMAKE_ASM_COMPILER "${TORCHMCU_GCC}")

set(CMAKE_C_FLAGS_INIT "${TORCHMCU_CPU_FLAGS}")
set(CMAKE_CXX_FLAGS_INIT "${TORCHMCU_CPU_FLAGS}")
set(CMAKE_ASM_FLAGS_INIT "${TORCHMCU_CPU_FLAGS}")
set(CMAKE_EXE_LINKER_FLAGS_INIT "${TORCHMCU_CPU_FLAGS}")

# Nothing to run on the build machine, and no startup code to link a check with.
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(CMAKE_EXECUTABLE_SUFFIX_C ".elf")
set(CMAKE_EXECUTABLE_SUFFIX_CXX ".elf")
set(CMAKE_EXECUTABLE_SUFFIX_ASM ".elf")

# Headers and libraries of the target come from the toolchain and the project, never the host.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
