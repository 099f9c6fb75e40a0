#include "delegates/ethos_u/blob.h"

#include <initializer_list>
#include <utility>

#include "kernels/check.h"

#if !defined(TMCU_BOARD_NPU_ARCH) || !defined(TMCU_BOARD_NPU_MACS)
#error "compile the Ethos-U delegate with the board's -D flags (TMCU_BOARD_NPU_ARCH, TMCU_BOARD_NPU_MACS)"
#endif

namespace torchmcu {
namespace ethos_u {
namespace {

uint32_t u16(const uint8_t* p) { return uint32_t(p[0]) | uint32_t(p[1]) << 8; }
uint32_t u32(const uint8_t* p) { return u16(p) | u16(p + 2) << 16; }

// [offset, offset + n) lies in [lo, size) and starts on a kAlign boundary.
bool inside(uint32_t offset, uint32_t n, uint32_t lo, uint32_t size) {
  return offset % kAlign == 0 && offset >= lo && offset <= size && n <= size - offset;
}

// A scratch operand: absent when the blob needs none, else a U8 arena
// tensor of at least `need` bytes on a 16-byte boundary.
Error check_scratch(const schema::Operand& o, uint32_t need) {
  if (need == 0 && o.location == kLocAbsent) return Error::Ok;
  TMCU_CHECK(o.location >= kLocArena0 && o.dtype == schema::DType::U8 && o.rank == 1, Error::InvalidOp);
  TMCU_CHECK(o.nbytes >= need && o.offset % kAlign == 0, Error::InvalidTensor);
  return Error::Ok;
}

bool overlap(const schema::Operand& a, const schema::Operand& b) {
  return a.location == b.location && a.location != kLocAbsent && a.offset < b.offset + b.nbytes &&
         b.offset < a.offset + a.nbytes;
}

}  // namespace

Header decode_header(const uint8_t* b) {
  Header h;
  h.header_bytes = u16(b + 6);
  h.accelerator = b[8];
  h.flags = b[9];
  h.macs = u16(b + 10);
  h.command_offset = u32(b + 12);
  h.command_bytes = u32(b + 16);
  h.read_only_offset = u32(b + 20);
  h.read_only_bytes = u32(b + 24);
  h.scratch_bytes = u32(b + 28);
  h.fast_scratch_bytes = u32(b + 32);
  h.read_only_region = b[36];
  h.scratch_region = b[37];
  h.fast_scratch_region = b[38];
  h.num_inputs = u16(b + 40);
  h.num_outputs = u16(b + 42);
  return h;
}

IoEntry io_entry(const uint8_t* blob, uint32_t k) {
  const uint8_t* e = blob + kHeaderBytes + k * kIoEntryBytes;
  return IoEntry{e[0], u32(e + 4), u32(e + 8)};
}

Error validate(const uint8_t* blob, uint32_t nbytes, Header* header) {
  TMCU_CHECK(nbytes >= kHeaderBytes, Error::InvalidOp);
  TMCU_CHECK(u32(blob) == (uint32_t('T') | uint32_t('M') << 8 | uint32_t('E') << 16 | uint32_t('U') << 24) &&
                 u16(blob + 4) == kVersion,
             Error::InvalidOp);
  const Header h = decode_header(blob);
  const uint32_t io = h.num_inputs + h.num_outputs;  // each below 2^16: no overflow
  TMCU_CHECK(h.header_bytes % kAlign == 0 && h.header_bytes >= kHeaderBytes + io * kIoEntryBytes &&
                 h.header_bytes <= nbytes,
             Error::InvalidOp);
  TMCU_CHECK(inside(h.command_offset, h.command_bytes, h.header_bytes, nbytes) && h.command_bytes >= 4 &&
                 h.command_bytes % 4 == 0 && u32(blob + h.command_offset) == kPayloadMagic,
             Error::InvalidOp);
  TMCU_CHECK(inside(h.read_only_offset, h.read_only_bytes, h.header_bytes, nbytes), Error::InvalidOp);
  TMCU_CHECK(h.read_only_region < kMaxRegions && h.scratch_region < kMaxRegions &&
                 h.fast_scratch_region < kMaxRegions,
             Error::InvalidOp);
  for (uint32_t k = 0; k < io; ++k) TMCU_CHECK(io_entry(blob, k).region < kMaxRegions, Error::InvalidOp);
  *header = h;
  return Error::Ok;
}

Error check(const OpContext& ctx) {
  TMCU_CHECK(check::args<schema::EthosUArgs>(ctx, schema::OpParams::EthosUParams), Error::InvalidOp);
  TMCU_CHECK(ctx.num_inputs() >= kFirstIo && ctx.num_outputs() >= 1, Error::InvalidOp);
  const schema::Operand& b = ctx.input(0);
  // The constant segment starts on 16 bytes (Program::load), so the blob does.
  TMCU_CHECK(b.location == kLocConstant && b.dtype == schema::DType::U8 && b.rank == 1 && b.offset % kAlign == 0,
             Error::InvalidOp);
  const uint8_t* blob = ctx.in<const uint8_t>(0);
  Header h;
  TMCU_TRY(validate(blob, b.nbytes, &h));
  TMCU_CHECK(h.accelerator == uint32_t(TMCU_BOARD_NPU_ARCH) && h.macs == uint32_t(TMCU_BOARD_NPU_MACS),
             Error::InvalidOp);
  TMCU_CHECK(h.num_inputs + kFirstIo == ctx.num_inputs() && h.num_outputs == ctx.num_outputs(), Error::InvalidOp);
  const schema::Operand& scratch = ctx.input(1);
  const schema::Operand& fast = ctx.input(2);
  TMCU_TRY(check_scratch(scratch, h.scratch_bytes));
  TMCU_TRY(check_scratch(fast, h.fast_scratch_bytes));
  TMCU_CHECK(!overlap(scratch, fast), Error::InvalidOp);

  // Base-pointer regions: each used once (a scratch of no bytes uses none:
  // Vela then names region 0 for it).
  uint32_t used = 1u << h.read_only_region;
  const bool own = (h.flags & kFlagIoRegions) != 0;
  for (const auto& [region, bytes] : {std::pair<uint32_t, uint32_t>{h.scratch_region, h.scratch_bytes},
                                      std::pair<uint32_t, uint32_t>{h.fast_scratch_region, h.fast_scratch_bytes}}) {
    if (bytes == 0) continue;
    TMCU_CHECK((used >> region & 1) == 0, Error::InvalidOp);
    used |= 1u << region;
  }
  const uint32_t io = h.num_inputs + h.num_outputs;
  for (uint32_t k = 0; k < io; ++k) {
    const IoEntry e = io_entry(blob, k);
    const schema::Operand& o = k < h.num_inputs ? ctx.input(kFirstIo + k) : ctx.output(k - h.num_inputs);
    TMCU_CHECK(o.location >= kLocArena0 && o.location != kLocNoTensor, Error::InvalidOp);
    TMCU_CHECK(o.nbytes == e.nbytes, Error::InvalidTensor);
    TMCU_CHECK(!overlap(o, scratch) && !overlap(o, fast), Error::InvalidOp);
    if (own) {  // the NPU reads or writes the planned buffer itself
      TMCU_CHECK((used >> e.region & 1) == 0 && e.offset == 0 && o.offset % kAlign == 0, Error::InvalidOp);
      used |= 1u << e.region;
    } else {  // copied into or out of the scratch around the call
      TMCU_CHECK(e.region == h.scratch_region && e.offset <= h.scratch_bytes &&
                     e.nbytes <= h.scratch_bytes - e.offset,
                 Error::InvalidOp);
    }
  }
  return Error::Ok;
}

}  // namespace ethos_u
}  // namespace torchmcu
