// Built only in sanitized builds (TANDEM_SANITIZE / TANDEM_FUZZ). `sanitizer_canary ubsan`
// overflows a signed int, `sanitizer_canary asan` writes past a heap array; each prints
// "survived" only if the process went on after the report. The CTest entries expect the report
// and no "survived": they fail if the flags ever stop reaching the build or stop halting it.
#include <climits>
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  const char* kind = argc > 1 ? argv[1] : "";
  if (std::strcmp(kind, "ubsan") == 0) {
    volatile int big = INT_MAX;
    const int sum = big + argc;  // argc >= 1: always overflows
    std::printf("sum %d\n", sum);
  } else if (std::strcmp(kind, "asan") == 0) {
    int* a = new int[4];
    volatile int i = 2 + argc;  // argc == 2: one past the end
    a[i] = 1;
    std::printf("wrote a[%d]\n", static_cast<int>(i));
    delete[] a;
  } else {
    std::fprintf(stderr, "usage: %s ubsan|asan\n", argv[0]);
    return 2;
  }
  std::printf("survived\n");
  return 0;
}
