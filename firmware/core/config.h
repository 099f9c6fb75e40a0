// Build switches of the runtime, with their defaults. Set them on the
// compiler's command line (-DTORCHMCU_VERIFY=0), the same for every file.
#ifndef TORCHMCU_CORE_CONFIG_H_
#define TORCHMCU_CORE_CONFIG_H_

// 1: programs can be fully verified when they are loaded (the flatbuffer
// verifier, the operand checks and every kernel's check are built in).
// 0: a runtime for trusted programs only (Verification::kMinimal, see
// core/program.h); that code is left out of the image.
#ifndef TORCHMCU_VERIFY
#define TORCHMCU_VERIFY 1
#endif

// 1: Program::load checks a program's CRC32 when it carries one (compile
// --crc), at every verification level: a CRC was asked for to catch a
// corrupted or half-flashed program, which kMinimal would not notice.
// 0: the CRC is ignored and its code left out (a program with one loads as
// one without).
#ifndef TORCHMCU_PROGRAM_CRC
#define TORCHMCU_PROGRAM_CRC 1
#endif

#endif  // TORCHMCU_CORE_CONFIG_H_
