// The plain loops of plain_loops.cpp compiled as on an AVX2 machine: -O3 -march=native
// -mno-avx512f -ffp-contract=fast (CMakeLists.txt), in a namespace and table of their own.
#define KILN_PLAIN_NAMESPACE plain_avx2
#define KILN_PLAIN_TABLE plainAvx2
#define KILN_PLAIN_FLAGS "-O3 -march=native -mno-avx512f"
#include "peers/plain_loops.cpp"
