// The ABI between generated code and the runtime. Generated objects export:
//   void   kiln_blocks(void* const* params, int64_t block_begin, int64_t block_end,
//                      KilnLaunchRecord* record);   // run blocks [begin, end), add to record
//   void   kiln_launch(void* const* params, KilnLaunchRecord* record);
//                                                   // reset record, run every block
//   int64_t kiln_num_blocks;                        // global constant: blocks in the domain
//                                                   // (every phase's, concatenated)
//   int64_t kiln_num_phases;                        // global constant: root domains (>= 1)
//   int64_t kiln_phase_ends[kiln_num_phases];       // global constant: end block of each phase
//                                                   // (the last = kiln_num_blocks)
//   int64_t kiln_abi_version;                       // global constant: kKilnAbiVersion
//   void   kiln_phase_blocks(void* const* params, int64_t* blocks);
//                                                   // blocks[i]: how many of phase i's blocks
//                                                   // these arguments run (a domain with runtime
//                                                   // extents runs fewer than its maximum)
// Phase i's blocks are numbered from kiln_phase_ends[i-1] (or 0); a launch runs the first
// kiln_phase_blocks(...)[i] of them (the rest would find no program in the runtime domain).
// Phase i's blocks run after every block of phase i-1 has returned (kiln_launch runs them in
// order; the runtime waits between phases). Objects without the two phase symbols have one phase.
// params[i] points at parameter i: the first element of a view, or the int64_t / float value
// of a scalar, then params[P + j] at workspace j (P parameters; the runtime allocates them).
// No LLVM types here: the runtime does not depend on LLVM.
#pragma once

#include <cstdint>

namespace kiln::runtime {

inline constexpr int64_t kKilnAbiVersion = 2;

struct KilnLaunchRecord {
  int64_t packets_full = 0;    // packets run by the full-packet clone (all W lanes active)
  int64_t packets_masked = 0;  // packets run by the masked body
};

using BlocksFn = void (*)(void* const* params, int64_t block_begin, int64_t block_end, KilnLaunchRecord* record);
using LaunchFn = void (*)(void* const* params, KilnLaunchRecord* record);
using PhaseBlocksFn = void (*)(void* const* params, int64_t* blocks);

inline constexpr const char* kBlocksSymbol = "kiln_blocks";
inline constexpr const char* kLaunchSymbol = "kiln_launch";
inline constexpr const char* kNumBlocksSymbol = "kiln_num_blocks";
inline constexpr const char* kAbiVersionSymbol = "kiln_abi_version";
inline constexpr const char* kNumPhasesSymbol = "kiln_num_phases";
inline constexpr const char* kPhaseEndsSymbol = "kiln_phase_ends";
inline constexpr const char* kPhaseBlocksSymbol = "kiln_phase_blocks";

}  // namespace kiln::runtime
