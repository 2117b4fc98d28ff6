// What this process's CPU can run, as every part of Kiln asks it (the planner's native register
// width, the JIT's host features, the launch's ISA check, the hand-written peer, the fuzz knob
// grid). One switch for tests: KILN_HOST_WITHOUT_AVX512=1 in the environment makes a host with
// AVX-512 answer as one without (no AVX-512 feature in `native`, isa=avx512 objects refused at
// load), so `make test` checks an AVX2-only machine's path on any machine. Compiling never asks.
#pragma once

namespace kiln::host {

// The CPU has x86-64-v4's AVX-512 (F, BW, CD, DQ, VL) and the switch is not set.
bool cpuHasAvx512();
// The CPU has AVX2 and FMA (x86-64-v3's vector part).
bool cpuHasAvx2();
// The CPU has AMX with bf16 (AMX-TILE, AMX-BF16), the OS granted this process the tile data state
// (Linux: arch_prctl ARCH_REQ_XCOMP_PERM, asked once here), and AVX-512 answers yes (the switch
// above turns AMX off too).
bool cpuHasAmxBf16();
// The CPU has AVX512-BF16 (VDPBF16PS) and AVX-512 answers yes.
bool cpuHasAvx512Bf16();
// KILN_HOST_WITHOUT_AVX512 is set to a non-empty value other than "0".
bool pretendingNoAvx512();

}  // namespace kiln::host
