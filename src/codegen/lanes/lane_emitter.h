// The lane realization (local_lanes = W): one program per call, its tile values laid out by
// the plan (src/plan/lanes.cpp) with the last dim along the W lanes. Element semantics come
// from codegen/elementwise.h, shared with the packets emitter (codegen/packets/); this emitter owns
// only how values are laid out and walked.
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "codegen/elementwise.h"
#include "codegen/loops.h"
#include "codegen/program_emitter.h"
#include "ir/ir.h"
#include "plan/plan.h"

namespace kiln::codegen {

class LaneEmitter final : public ProgramEmitter {
 public:
  LaneEmitter(const ir::Kernel& kernel, const plan::Plan& plan, llvm::Module& module);
  // Emits `void NAME(ptr params, i64 program)`. Returns nullptr and sets `error` on failure.
  llvm::Function* emitProgram(const std::string& name, std::string& error);

 private:
  using Coords = std::vector<Ix>;  // one per dim of a type
  using VecGen = std::function<llvm::Value*(Ix row, Ix chunk)>;

  // index arithmetic (add, mul, div, rem and val are ProgramEmitter's)
  Coords rowCoords(const ir::Type& t, Ix row);    // coords of the non-lane dims (lane entry = 0)
  Ix rowOf(const ir::Type& t, const Coords& cs);  // row index of coords (lane coord ignored)
  Coords mapCoords(const ir::Type& to, const ir::Type& from, const Coords& cs, const Coords* extra = nullptr,
                   const ir::Type* extraType = nullptr);

  // types
  llvm::Type* sty(ir::Elem e);
  llvm::VectorType* vty(ir::Elem e);
  llvm::Value* splat(llvm::Value* s) { return b_.CreateVectorSplat(w_, s); }
  llvm::Value* laneIota();
  llvm::Value* laneMask(int64_t valid);  // first `valid` lanes on

  // loops
  void forEach(int64_t n, bool runtime, const std::function<void(Ix)>& body);
  // Every vector of a layout, walked as the plan says (Layout::large, Layout::chunk_loop).
  void forEachVector(const plan::Layout& l, const std::function<void(Ix row, Ix chunk)>& body);

  // values
  llvm::Value* slotPtr(int slot, ir::Elem e, Ix vi);
  llvm::Value* vec(const ir::Value* v, Ix vi);
  llvm::Value* vec(const ir::Value* v, Ix row, Ix chunk);
  Ix vindex(const ir::Value* v, Ix row, Ix chunk);
  llvm::Value* scalar(const ir::Value* v);
  llvm::Value* elem(const ir::Value* v, const Coords& cs);
  llvm::Value* alongLane(const ir::Value* v, const ir::Type& ctxType, const Coords& ctx, int64_t chunkFirst, Ix chunk);
  void define(const ir::Value* v, const VecGen& gen);
  void definePairWords(const ir::Value* v, const VecGen& gen);  // a plan::Layout::pair_words panel
  llvm::Value* genVec(const ir::Op* op, Ix row, Ix chunk);
  llvm::Value* loadVector(const ir::Op* op, Ix row, Ix chunk);        // a tile load's vector
  llvm::Value* loadMemoryVector(const ir::Op* op, Ix row, Ix chunk);  // the same in the view's type
  llvm::Value* loadElement(const ir::Op* op, const Coords& cs);       // one element of it
  // W/2 32-bit words of a 16-bit tile inside its view: lane-dim elements of chunk `chunk` of a row.
  llvm::Value* loadWords(const ir::Op* op, Ix row, Ix chunk);
  void prefetchAhead(const ir::Op* op, llvm::Value* ptr, Ix first);  // the plan's LanePrefetch, if any
  // True when the whole tile of a load lies inside its view (a runtime i1).
  llvm::Value* tileInside(const ir::Op* load);
  llvm::Value* genScalar(const ir::Op* op, const Coords& cs);
  llvm::Value* indexValue(const ir::Index& ix);

  // ops
  void emitOp(const ir::Op* op) override;
  void afterOp(const ir::Op* op) override;  // the conversions hoisted after it
  void emitLoad(const ir::Op* op);
  void emitStore(const ir::Op* op);
  void emitReduce(const ir::Op* op);
  void emitMma(const ir::Op* op);
  void emitMmaTiles(const ir::Op* op);
  void emitMmaFusedTranspose(const ir::Op* op);                                  // LaneMma::fused_transpose
  void emitMmaDot(const ir::Op* op);                                             // form "dot"
  void emitMmaElements(const ir::Op* op);                                        // form "elements"
  void emitMmaAmx(const ir::Op* op);                                             // form "amx" (lane_amx.cpp)
  void emitMmaAmxBFirst(const ir::Op* op);                                       // form "amx", LaneMma::amx_b_first
  llvm::Value* amxBuffer(llvm::Type* t, int64_t n);                              // 64-byte aligned stack buffer
  llvm::Value* amxLoad(llvm::Value* ptr, llvm::Value* strideBytes);              // tileloadd, 16 x 64 bytes
  void amxStore(llvm::Value* ptr, llvm::Value* strideBytes, llvm::Value* tile);  // tilestored
  llvm::Value* amxDot(llvm::Value* c, llvm::Value* a, llvm::Value* b);           // TDPBF16PS
  void amxKGroups(int64_t Kp, const std::function<void(Ix, int64_t)>& body);     // K blocks in groups of 8
  llvm::Value* amxBits(const ir::Value* x, Ix row, Ix chunk);                    // a vector of x as bf16 bits
  llvm::Value* amxChunk(const ir::Value* x, Ix row, int64_t chunk, int64_t K);   // a K chunk of a row, 0 past K
  // 16 rows of x as transposed 32-bit words, a pair of K chunks at a time (row(i): none = zeros).
  void amxWordPairs(const ir::Value* x, const std::function<std::optional<Ix>(unsigned)>& row, int64_t K,
                    const std::function<void(const std::vector<llvm::Value*>&, Ix)>& store);
  // x's rows as TDPBF16PS's A operand: its bf16 view's own where possible, else copy() into buf.
  std::pair<llvm::Value*, llvm::Value*> amxRows(const ir::Value* x, int64_t rows, int64_t K, llvm::Value* buf,
                                                int64_t bufRowBytes, const std::function<void()>& copy);
  void requestTileState();                  // once per process: Linux's AMX tile state
  llvm::Value* bf16Vector(llvm::Value* v);  // W floats to bf16 bits for AMX (vcvtneps2bf16)
  // One output element (coords rc) of a partitioned mma, from the accumulator's element.
  llvm::Value* partitionedElement(const ir::Op* op, llvm::Value* acc, const Coords& rc);
  static bool exactBf16(const ir::Value* x);        // every element a bf16 value (a bf16 view's load)
  void requireFeature(const std::string& feature);  // +feature in the function's target-features
  llvm::Value* bf16DotChain(const ir::Op* op, llvm::Value* acc,
                            const std::function<std::pair<llvm::Value*, llvm::Value*>(Ix)>& term);
  Ix lanePosition(Ix chunk, unsigned j, int64_t extent);  // lane j of a chunk, clamped to extent - 1
  // An mma's contracted dims as a type (from operand a), and the coords of contraction index k
  // in it (row-major over the contracted dims in the order listed).
  ir::Type contractedType(const ir::Op* op);
  // An mma's operands a, b, acc, its result and its two plans, as the forms name them.
  struct MmaParts {
    const ir::Value* a;
    const ir::Value* b;
    const ir::Value* acc;
    const ir::Value* r;
    const plan::MmaPlan& mp;
    const plan::LaneMma& lm;
  };
  MmaParts mmaParts(const ir::Op* op) const;
  Coords contractionCoords(const ir::Type& ct, Ix k);
  void emitConversion(const plan::Conversion& c);
  void emitLoop(const ir::Op* op);
  llvm::Value* emitExtract(const ir::Op* op);
  llvm::Value* elementPointer(const ir::Op* op, const ir::Type& tt, const Coords& cs, Ix laneCoord,
                              llvm::Value*& inBounds);

  const plan::LanePlan& lp_;
  llvm::BasicBlock* entry_ = nullptr;
  std::vector<std::vector<llvm::Value*>> vecs_;  // by value id: Vectors rep
  std::vector<llvm::Value*> scalars_;            // by value id: Scalar rep
  // Register values copied to the stack for a loop that reads them at runtime rows (a rolled
  // mma): value id -> [vectors x <W x T>] alloca. Valid while that loop is emitted.
  std::map<int, llvm::Value*> spilled_;
  // n x n within each n-lane segment of n vectors (n = W: a W x W transpose), in place.
  void transposeInRegisters(std::vector<llvm::Value*>& vectors);
  std::vector<llvm::Value*> transposedBlock(const ir::Value* x, int li, Ix lb, Coords xcs, Ix xc);
  // The same from bf16 words (plan::Conversion::words): a whole chunk, inside the view.
  void storePairWords(const plan::Conversion& c, const ir::Value* x, const std::vector<llvm::Value*>& r, Ix first,
                      int64_t ext, Ix chunk);
  void emitBf16Words(const plan::Conversion& c);
  llvm::Value* packPairWords(const ir::Value* x, llvm::Value* lo, llvm::Value* hi);
  llvm::Value* aloneWords(llvm::Value* w, int i);
  llvm::Value* bf16Pairs(llvm::Value* words);
  llvm::Value* dpbf16(llvm::Value* c, llvm::Value* a, llvm::Value* b);
  llvm::Value* splatPair(const ir::Op* op, int i, const Coords& rc, const Coords& kc, bool two);
  std::vector<llvm::Value*> transposedWordBlock(const ir::Value* x, int li, Ix lb, Coords xcs, Ix xc, bool unpack);
  std::vector<llvm::Value*> transposeWords(const std::function<llvm::Value*(unsigned)>& words, bool unpack);
  void spill(const ir::Value* v);
  std::vector<const ir::Op*> inside_;  // loads known (by a branch) to lie inside their views
  bool isInside(const ir::Op* load) const { return std::find(inside_.begin(), inside_.end(), load) != inside_.end(); }
};

}  // namespace kiln::codegen
