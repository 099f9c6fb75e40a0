/* Public C declarations shared by applications and generated model files. */
#ifndef TORCHMCU_TORCHMCU_H_
#define TORCHMCU_TORCHMCU_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One planned memory region handed to the runtime: at least the planned
   size, 16-byte aligned, owned by the application. */
typedef struct {
  uint8_t* data;
  size_t size;
} tmcu_arena;

/* The runtime's error codes (torchmcu::Error in core/error.h, by the same
   values): what every tmcu_* call that can fail returns; 0 is success. The
   ranges say whose fault it was: 0x1x the caller's arguments, 0x2x the
   program, 0x3x this build or the memory given to it, 0x4x the hardware
   behind a delegate. */
#define TMCU_OK 0x00
#define TMCU_ERROR_INTERNAL 0x01
#define TMCU_ERROR_INVALID_ARGUMENT 0x10
#define TMCU_ERROR_INVALID_PROGRAM 0x20
#define TMCU_ERROR_UNSUPPORTED_VERSION 0x21
#define TMCU_ERROR_MISALIGNED_PROGRAM 0x22
#define TMCU_ERROR_INVALID_TENSOR 0x23
#define TMCU_ERROR_INVALID_OP 0x24
#define TMCU_ERROR_CHECKSUM_MISMATCH 0x25
#define TMCU_ERROR_KERNEL_MISSING 0x30
#define TMCU_ERROR_ARENA_TOO_SMALL 0x31
#define TMCU_ERROR_ARENA_MISMATCH 0x32
#define TMCU_ERROR_VERIFIER_MISSING 0x33
#define TMCU_ERROR_DELEGATE_FAILED 0x40

/* The name of an error code ("Ok", "InvalidProgram", ...; "Unknown" for a
   value that is none; "" in a runtime built with
   TORCHMCU_STRIP_ERROR_STRINGS=1). A static string. */
const char* tmcu_error_name(int err);

/* Element types of a model's inputs and outputs (TMCU_<NAME>_INPUTk_DTYPE in
   a generated model header), by torchmcu's dtype codes. */
#define TMCU_DTYPE_FLOAT32 0
#define TMCU_DTYPE_INT8 1
#define TMCU_DTYPE_INT16 2
#define TMCU_DTYPE_INT32 3

/* Runs `program` over the samples of an io blob (see firmware/app/app.h) and
   reports in the line protocol over tmcu_platform_write. Returns 0 or the
   runtime's error code. */
int tmcu_app_run(const uint8_t* program, size_t program_size, const tmcu_arena* arenas,
                 size_t num_arenas, const uint8_t* io, size_t io_size);

/* What a delegate measured on its hardware during its last call (the
   Ethos-U delegate: the NPU's PMU), e.g. for a profile. */
#define TMCU_DELEGATE_MAX_COUNTERS 4
typedef struct {
  uint32_t partition;    /* the call's partition number (report.json "ethos_u") */
  uint32_t num_counters; /* entries of counters and names in use */
  uint64_t cycles;       /* the accelerator's clock cycles over the call */
  uint32_t counters[TMCU_DELEGATE_MAX_COUNTERS];
  const char* names[TMCU_DELEGATE_MAX_COUNTERS]; /* e.g. "sram_rd_beats"; static strings */
} tmcu_delegate_sample;

/* The figures of the last delegate call, once: nonzero and *out filled when
   a call ended since the previous take, 0 otherwise. Defined by a delegate
   that measures; weak, so its address is null in firmware without one. */
int tmcu_delegate_take_sample(tmcu_delegate_sample* out) __attribute__((weak));

#ifdef __cplusplus
}
#endif

#endif /* TORCHMCU_TORCHMCU_H_ */
