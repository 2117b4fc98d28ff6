#include "host/isa.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

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

bool cpuHasAmxBf16() {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    const bool tile = edx & (1u << 24), bf16 = edx & (1u << 22);
    // ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18): granted once for the process.
    return tile && bf16 && syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  }();
  return has && cpuHasAvx512();
}

bool cpuHasAvx512Bf16() {
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 5));
  }();
  return has && cpuHasAvx512();
}

}  // namespace kiln::host
