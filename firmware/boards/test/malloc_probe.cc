// Must NOT link: the board link flags make the heap unavailable, and the
// test checks that the linker error names malloc.
#include <stdlib.h>

#include "platform.h"

int main() {
  tmcu_platform_init();
  volatile char* p = static_cast<volatile char*>(malloc(16));
  p[0] = 1;
  return p[0];
}
