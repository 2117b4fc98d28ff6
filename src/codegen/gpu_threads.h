// Target nvptx: the lane realization's program with its lane dim spread over GPU threads
// (docs/gpu.md, "Lanes over threads"). The CPU lane program computes on W-lane vectors; here
// lane l of every vector lives in thread l of a W-thread segment of a warp, so each W-lane
// operation becomes one scalar operation per thread and each cross-lane operation a warp
// shuffle, in the same order as the vector code: the same arithmetic, the same bits.
#pragma once

#include <cstdint>
#include <string>

namespace llvm {
class Function;
}

namespace kiln::codegen {

// Rewrites `program` (void (ptr params, i64 program), the lane emitter's, W = `w` lanes, w a
// power of two <= 32) in place of itself: the new body reads its lane from %tid.x mod w and
// expects the w threads of its segment (aligned in the warp) to run the same program. Returns
// the new function, or nullptr with `why` naming the first construct it cannot spread (the
// caller then keeps one program per thread). Calls to defined functions are inlined first.
llvm::Function* spreadLanesOverThreads(llvm::Function* program, int64_t w, std::string& why);

}  // namespace kiln::codegen
