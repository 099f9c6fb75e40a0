// Host runner: tmcu_host PROGRAM.pte IO.bin
// Loads the program into an exactly sized buffer (so the sanitizers see any
// read past its end), gives it the arenas it asks for, and runs the app.
#include <cstdio>
#include <new>
#include <vector>

#include "core/program.h"
#include "torchmcu/torchmcu.h"

namespace {

struct Buffer {
  uint8_t* data = nullptr;
  size_t size = 0;
  ~Buffer() { operator delete[](data, std::align_val_t(16)); }
};

bool read_file(const char* path, Buffer& out) {
  std::FILE* f = std::fopen(path, "rb");
  if (f == nullptr) return false;
  std::fseek(f, 0, SEEK_END);
  const long n = std::ftell(f);
  std::fseek(f, 0, SEEK_SET);
  out.size = size_t(n);
  out.data = static_cast<uint8_t*>(operator new[](out.size ? out.size : 1, std::align_val_t(16)));
  const bool ok = std::fread(out.data, 1, out.size, f) == out.size;
  std::fclose(f);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s PROGRAM.pte IO.bin\n", argv[0]);
    return 2;
  }
  Buffer program, io;
  if (!read_file(argv[1], program) || !read_file(argv[2], io)) {
    std::fprintf(stderr, "cannot read %s or %s\n", argv[1], argv[2]);
    return 2;
  }
  // Arena sizes come from the program itself; a program that does not load
  // gets no arenas and the app reports its error.
  std::vector<std::vector<uint8_t>> storage;
  std::vector<tmcu_arena> arenas;
  const auto p = torchmcu::Program::load(program.data, program.size);
  if (p.ok()) {
    const auto specs = p.get().root().arenas();
    for (uint32_t i = 0; i < specs.size(); ++i) {
      // +15 so the arena can start on a 16-byte boundary.
      storage.emplace_back(size_t(specs[i].size()) + 15);
      auto* raw = storage.back().data();
      auto* aligned = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(raw) + 15) & ~uintptr_t(15));
      arenas.push_back(tmcu_arena{aligned, specs[i].size()});
    }
  }
  const int status = tmcu_app_run(program.data, program.size, arenas.data(), arenas.size(),
                                  io.data, io.size);
  std::fflush(stdout);
  return status > 255 ? 255 : status;
}
