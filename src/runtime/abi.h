// The ABI between generated code and the runtime. Generated objects export:
//   void   kiln_blocks(void* const* params, int64_t block_begin, int64_t block_end,
//                      KilnLaunchRecord* record);   // run blocks [begin, end), add to record
//   void   kiln_launch(void* const* params, KilnLaunchRecord* record);
//                                                   // reset record, run every block
//   int64_t kiln_num_blocks;                        // global constant: blocks in the domain
//   int64_t kiln_abi_version;                       // global constant: kKilnAbiVersion
// params[i] points at parameter i: the first float of a view, or the int64_t / float value
// of a scalar. No LLVM types here: the runtime does not depend on LLVM.
#pragma once

#include <cstdint>

namespace kiln::runtime {

inline constexpr int64_t kKilnAbiVersion = 1;

struct KilnLaunchRecord {
  int64_t packets_full = 0;    // packets run by the full-packet clone (all W lanes active)
  int64_t packets_masked = 0;  // packets run by the masked body
};

using BlocksFn = void (*)(void* const* params, int64_t block_begin, int64_t block_end, KilnLaunchRecord* record);
using LaunchFn = void (*)(void* const* params, KilnLaunchRecord* record);

inline constexpr const char* kBlocksSymbol = "kiln_blocks";
inline constexpr const char* kLaunchSymbol = "kiln_launch";
inline constexpr const char* kNumBlocksSymbol = "kiln_num_blocks";
inline constexpr const char* kAbiVersionSymbol = "kiln_abi_version";

}  // namespace kiln::runtime
