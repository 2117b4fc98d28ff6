#include "host/isa.h"

#include <cstdlib>
#include <cstring>

namespace kiln::host {

bool pretendingNoAvx512() {
  static const bool pretend = [] {
    const char* v = std::getenv("KILN_HOST_WITHOUT_AVX512");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return pretend;
}

bool cpuHasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                          __builtin_cpu_supports("avx512vl");
  return has && !pretendingNoAvx512();
}

bool cpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

}  // namespace kiln::host
