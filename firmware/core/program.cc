#include "core/program.h"

#include "core/flatbuffer.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the CRC's word loop reads little-endian words");

namespace torchmcu {
namespace {

// The CRC table: entry b is the CRC register after shifting byte b through
// it, built by the compiler (C++17 constexpr) into 1 KiB of flash. QEMU
// -icount instructions a byte on the M55 (the DS-CNN of
// examples/mlperf_tiny.py, 31,840 B, issue #18): this table a word at a time
// 4.75, the same a byte at a time 8.0, a 16-entry (nibble) table 11.0, the
// bit loop 39.
struct CrcTable {
  uint32_t v[256] = {};
  constexpr CrcTable() {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
      v[b] = c;
    }
  }
};
constexpr CrcTable kCrcTable;

// Inlined: -Os would otherwise call it, 4 instructions of call a byte.
#if defined(__GNUC__)
__attribute__((always_inline))
#endif
inline uint32_t crc_byte(uint32_t c) { return kCrcTable.v[c & 0xFF] ^ (c >> 8); }

// Byte by byte up to a word boundary, then a word at a time: a word's four
// bytes shift through the register in the order they lie in memory, its
// low byte first on these little-endian cores (the flatbuffer reader
// assumes little-endian too). The word loop saves the per-byte load and
// loop overhead: 4.75 instructions a byte instead of 8.
uint32_t crc_update(uint32_t c, const uint8_t* p, size_t n) {
  for (; n > 0 && (reinterpret_cast<uintptr_t>(p) & 3) != 0; --n) c = crc_byte(c ^ *p++);
  for (; n >= 4; n -= 4, p += 4) {
    c ^= fb::load<uint32_t>(p);
    c = crc_byte(crc_byte(crc_byte(crc_byte(c))));
  }
  for (; n > 0; --n) c = crc_byte(c ^ *p++);
  return c;
}

#if TORCHMCU_PROGRAM_CRC
// Program.crc32 (program.fbs): where the CRC lives. A field of the root
// table, not a trailer after the program: a trailer is what a half-flashed
// program loses first (its tail is still erased flash, and an erased trailer
// reads as "no CRC"), while the builder writes the root table and its vtable
// first, right after the identifier. The field covers the whole buffer,
// counted as zero itself, weights and padding included. An older runtime
// skips a field it does not know, so the format stays version 4.
constexpr uint16_t kCrcSlot = 24;  // its vtable offset: schema::Program::crc32()

// The offset of Program.crc32 in buf, 0 when the program has none, or -1
// when the root table or its vtable lies outside the buffer (read before
// any verifier ran: every position is checked here).
int64_t crc_field(const uint8_t* buf, uint32_t size) {
  const uint32_t root = fb::load<uint32_t>(buf);
  if ((root & 3) != 0 || root > size - 4) return -1;
  const int64_t vt = int64_t(root) - fb::load<int32_t>(buf + root);
  if (vt < 0 || (vt & 1) != 0 || vt > int64_t(size) - 4) return -1;
  const uint32_t vsize = fb::load<uint16_t>(buf + vt);
  if (vsize > size - uint32_t(vt)) return -1;
  if (vsize < kCrcSlot + 2u) return 0;
  const uint32_t off = fb::load<uint16_t>(buf + vt + kCrcSlot);
  if (off == 0) return 0;
  return off + 4u > size - root ? -1 : int64_t(root) + off;
}

#endif  // TORCHMCU_PROGRAM_CRC

}  // namespace

uint32_t crc32(const void* data, size_t size, uint32_t crc) {
  return crc_update(crc ^ 0xFFFFFFFFu, static_cast<const uint8_t*>(data), size) ^ 0xFFFFFFFFu;
}

Result<Program> Program::load(const void* data, size_t size, Verification verification) {
  if (data == nullptr) return Error::InvalidArgument;
  if ((reinterpret_cast<uintptr_t>(data) & 15) != 0) return Error::MisalignedProgram;
  const auto* buf = static_cast<const uint8_t*>(data);
  if (size < 8 || size > 0x7fffffffu) return Error::InvalidProgram;
  if (fb::load<uint32_t>(buf + 4) != fb::load<uint32_t>(
                                         reinterpret_cast<const uint8_t*>(schema::kFileIdentifier))) {
    return Error::InvalidProgram;
  }
#if TORCHMCU_PROGRAM_CRC
  const int64_t at = crc_field(buf, uint32_t(size));
  if (at < 0) return Error::InvalidProgram;
  if (at > 0) {
    const uint8_t zero[4] = {0, 0, 0, 0};
    uint32_t crc = crc32(buf, size_t(at));
    crc = crc32(zero, 4, crc);
    crc = crc32(buf + at + 4, size - size_t(at) - 4, crc);
    if (crc != fb::load<uint32_t>(buf + at)) return Error::ChecksumMismatch;
  }
#endif
  Program p;
  p.verification_ = verification;
  if (verification == Verification::kFull) {
#if TORCHMCU_VERIFY
    fb::Verifier verifier(buf, size);
    p.root_ = verifier.root<schema::Program>(schema::kFileIdentifier);
    if (!verifier.table(p.root_)) return Error::InvalidProgram;
#else
    return Error::VerifierMissing;
#endif
  } else {
    // A trusted program: its tables are read as they are (the root offset
    // at least lands inside the buffer).
    const uint32_t root = fb::load<uint32_t>(buf);
    if (root > size - 4) return Error::InvalidProgram;
    p.root_ = schema::Program(buf + root);
  }
  if (p.root_.version() != kProgramVersion) return Error::UnsupportedVersion;
  const uint64_t seg = p.root_.constant_offset();
  const uint64_t seg_size = p.root_.constant_size();
  if ((seg & 15) != 0 || seg + seg_size > size) return Error::InvalidProgram;
  p.constants_ = buf + seg;
  p.constants_size_ = static_cast<uint32_t>(seg_size);
  return p;
}

}  // namespace torchmcu
