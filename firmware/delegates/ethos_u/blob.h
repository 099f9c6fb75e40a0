// The Ethos-U delegate's blob and its load-time check. The blob is what
// torchmcu.backends.ethos_u.blob writes for one NPU partition (the layout is
// documented there), read in place from the program's constant segment:
//
//   header (48 bytes): "TMEU", version, header bytes, accelerator, flags,
//     MACs, command stream (offset, bytes), read-only data (offset, bytes),
//     scratch and fast-scratch bytes, the base-pointer region of the
//     read-only data, the scratch and the fast scratch, input and output
//     counts; then one 16-byte entry per input and output (region, element
//     bytes, offset in the region, bytes);
//   the command stream: the driver's "Custom Operator Payload" ("COP1",
//     then its actions), 16-byte aligned;
//   the read-only data (encoded weights and biases), 16-byte aligned.
//
// Nothing here calls the driver: the check builds and runs on any host.
#ifndef TORCHMCU_DELEGATES_ETHOS_U_BLOB_H_
#define TORCHMCU_DELEGATES_ETHOS_U_BLOB_H_

#include <cstdint>

#include "core/error.h"
#include "core/kernel.h"

namespace torchmcu {
namespace ethos_u {

constexpr uint32_t kVersion = 1;
constexpr uint32_t kHeaderBytes = 48;
constexpr uint32_t kIoEntryBytes = 16;
constexpr uint32_t kAlign = 16;  // the NPU's base pointers and command stream
constexpr uint32_t kMaxRegions = 8;  // base pointers one command stream addresses
constexpr uint8_t kFlagIoRegions = 1;  // inputs and outputs have base pointers of their own
constexpr uint32_t kFirstIo = 3;  // operands: blob, scratch, fast scratch, then the inputs
constexpr uint32_t kPayloadMagic = 0x31504F43u;  // "COP1", the driver's payload fourcc

/// The header's fields (blob.py's table).
struct Header {
  uint32_t header_bytes;
  uint32_t accelerator;  // 0 Ethos-U55, 1 Ethos-U65, 2 Ethos-U85
  uint32_t flags;
  uint32_t macs;
  uint32_t command_offset;
  uint32_t command_bytes;
  uint32_t read_only_offset;
  uint32_t read_only_bytes;
  uint32_t scratch_bytes;
  uint32_t fast_scratch_bytes;
  uint32_t read_only_region;
  uint32_t scratch_region;
  uint32_t fast_scratch_region;
  uint32_t num_inputs;
  uint32_t num_outputs;
};

/// One input or output: where the command stream reads or writes it.
struct IoEntry {
  uint32_t region;
  uint32_t offset;  // in its region: 0 for one of its own, else into the scratch
  uint32_t nbytes;
};

/// The header of a blob of at least kHeaderBytes bytes, as it is.
Header decode_header(const uint8_t* blob);
/// Entry k (inputs first) of a blob whose header validate() accepted.
IoEntry io_entry(const uint8_t* blob, uint32_t k);

/// Whether `nbytes` bytes at `blob` are a well-formed blob: magic, version,
/// the I/O table inside the header, the command stream and read-only data
/// 16-byte aligned inside the blob, the payload's fourcc, regions below
/// kMaxRegions. Error::InvalidOp if not.
Error validate(const uint8_t* blob, uint32_t nbytes, Header* header);

/// The ETHOS_U kernel's load-time check: the blob (a U8 constant, 16-byte
/// aligned) is well formed and was compiled for this NPU (accelerator and
/// MACs: TMCU_BOARD_NPU_ARCH, TMCU_BOARD_NPU_MACS); the scratch operands
/// hold the blob's scratch bytes, 16-byte aligned, in arenas; the operand
/// counts match its inputs and outputs, each operand of the entry's bytes;
/// base-pointer regions are distinct; I/O tensors with regions of their own
/// start on 16 bytes, the others lie inside the scratch; no scratch shares a
/// byte with an input or output.
Error check(const OpContext& ctx);

}  // namespace ethos_u
}  // namespace torchmcu

#endif  // TORCHMCU_DELEGATES_ETHOS_U_BLOB_H_
