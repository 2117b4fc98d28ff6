// The GPU block realization (target nvptx; plan::BlockPlan, src/plan/block.cpp): one program
// per thread block. Each thread holds its register tile of every tile value (the plan's grid
// and groups), computes its elements with the element semantics every realization shares
// (codegen/elementwise.h), stages mma operands through shared memory with barriers, and walks
// each mma's K in ascending order for each of its accumulators: the IR's order, so the bits are
// the interpreter's and every other realization's.
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "codegen/program_emitter.h"
#include "ir/ir.h"
#include "plan/plan.h"

namespace kiln::codegen {

class BlockEmitter final : public ProgramEmitter {
 public:
  BlockEmitter(const ir::Kernel& kernel, const plan::Plan& plan, llvm::Module& module);
  // Emits `void NAME(ptr params, i64 program)`, run by every thread of one block of
  // BlockPlan::threads threads (all of them, since it holds barriers). nullptr and `error` set
  // on failure.
  llvm::Function* emitProgram(const std::string& name, std::string& error);

 private:
  using Tile = std::vector<llvm::Value*>;        // a thread's elements: micro rows x micro columns of the dims it has
  using Override = std::map<int, llvm::Value*>;  // value id -> its value at another loop trip

  // A tile's rows (any row dim) and its column dim (its last, when a column dim), plan.h.
  bool hasY(const ir::Value* v) const { return bp_.hasRows(v->type); }
  const plan::BlockDim* columnOf(const ir::Value* v) const { return bp_.columnOf(v->type); }
  int64_t rows(const ir::Value* v) const { return hasY(v) ? bp_.micro_y : 1; }
  int64_t cols(const ir::Value* v) const { return columnOf(v) ? columnOf(v)->micro : 1; }
  // Element (r, c) of the thread's grid position as seen by `v` (a side v lacks reads index 0).
  llvm::Value* at(const ir::Value* v, int64_t r, int64_t c);
  // The flattened row index of the thread's row r; the coordinate of its column c along x.
  llvm::Value* rowCoord(int64_t r);
  llvm::Value* colCoord(const plan::BlockDim& x, int64_t c);
  llvm::Value* coordOf(const std::string& dim, int64_t r, int64_t c);

  llvm::Type* sty(ir::Elem e);
  llvm::Value* scalar(const ir::Value* v);
  llvm::Value* indexValue(const ir::Index& ix, const Override* over = nullptr);
  llvm::Value* scalarAt(const ir::Value* v, const Override& over);
  llvm::Value* constant(const ir::Op* op);  // a Const op's scalar
  void define(const ir::Value* v, const std::function<llvm::Value*(int64_t r, int64_t c)>& gen);

  // A view element of a load or store at tile coordinates `coord(dim name)`: its pointer and
  // whether it lies inside the view.
  llvm::Value* elementPointer(const ir::Op* op, const std::function<llvm::Value*(const std::string&)>& coord,
                              const Override* over, llvm::Value*& inBounds);

  void emitOp(const ir::Op* op) override;
  void emitLoad(const ir::Op* op);
  void emitWhole(const ir::Op* op);
  // A plain load's tile at `over`'s trip: its elements read, then their in-bounds flags; and the
  // tile with the fill applied.
  Tile loadTile(const ir::Op* op, const Override& over);
  Tile filledTile(const ir::Op* op, const Tile& pending);
  void emitStore(const ir::Op* op);
  void emitMma(const ir::Op* op);
  void emitLoop(const ir::Op* op);
  void emitReduce(const ir::Op* op);
  void reduceByShuffles(const ir::Op* op);
  llvm::Value* scratchPointer(llvm::Value* floatIndex);

  // Stages: this thread's share of a staged load's elements read from global memory (`fetch`,
  // at the origin the indices give under `over`), written to shared memory (`put`, into buffer
  // `buffer`: 0, or the loop trip's parity).
  std::vector<llvm::Value*> fetch(const ir::Op* load, const Override& over);
  void put(const ir::Op* load, const std::vector<llvm::Value*>& regs, llvm::Value* buffer);
  std::pair<llvm::Value*, llvm::Value*> fetchOne(const ir::Op* load, const Override& over, llvm::Value* e,
                                                 bool partial);
  void putOne(const ir::Op* load, llvm::Value* v, llvm::Value* buffer, llvm::Value* e, bool partial);
  void copyStage(const ir::Op* load);  // a single-buffered stage, global to shared
  std::map<std::string, llvm::Value*> stagedCoords(const ir::Op* load, llvm::Value* e);
  llvm::Value* maskedValue(const ir::Op* load, const plan::BlockStage& s, llvm::Value* v,
                           const std::map<std::string, llvm::Value*>& coord, const Override& over);
  // A value of a masked load's select (the loaded element `v`) at `coord`, scalars at `over`.
  llvm::Value* atCoords(const ir::Op* load, const ir::Value* x, llvm::Value* v,
                        const std::map<std::string, llvm::Value*>& coord, const Override& over);
  llvm::Value* stageIndex(const ir::Op* load, const plan::BlockStage& s,
                          const std::map<std::string, llvm::Value*>& coord);
  void asyncCopy(const ir::Op* load, const Override& over, llvm::Value* buffer);
  struct CopySource {
    llvm::Value* src = nullptr;     // the element's address in the view
    llvm::Value* inb = nullptr;     // inside the view
    llvm::Value* copied = nullptr;  // inside and not masked away
    llvm::Value* global(BlockEmitter& e, const ir::Op* load) const;
  };
  CopySource copySource(const ir::Op* load, const std::map<std::string, llvm::Value*>& coord, const Override& over);
  void asyncCopyElements(const ir::Op* load, const Override& over, llvm::Value* buffer);
  void asyncCopyElement(const ir::Op* load, const Override& over, llvm::Value* buffer, llvm::Value* e, bool partial);
  void asyncCopyGroups(const ir::Op* load, const Override& over, llvm::Value* buffer);
  void firstCopies(const ir::Op* loop);
  std::vector<const ir::Op*> doubleBuffered(const ir::Op* loop, bool async) const;
  // A computed mma operand: this thread's register tile into its stage.
  void putRegisters(const ir::Value* v, const plan::BlockStage& s);
  llvm::Value* sharedPointer(llvm::Value* floatIndex);  // element floatIndex of the block's shared array
  llvm::Value* stagePointer(const plan::BlockStage& s, llvm::Value* buffer, llvm::Value* floatIndex);
  llvm::Value* bufferOf(const ir::Op* load);
  void barrier();

  const plan::BlockPlan& bp_;
  llvm::Value* tid_ = nullptr;
  llvm::Value* ty_ = nullptr;
  llvm::Value* tx_ = nullptr;
  llvm::GlobalVariable* shared_ = nullptr;
  std::map<int, llvm::Value*> scalars_;
  std::map<int, Tile> tiles_;
  // Double-buffered stages of the loop being emitted: this trip's fetched registers, the next
  // trip's, and the trip's parity; the loop's induction variable and step for the next origin.
  std::map<const ir::Op*, std::vector<llvm::Value*>> current_, next_;
  std::map<const ir::Op*, llvm::Value*> parity_;               // by loop
  std::map<const ir::Op*, Override> nextTrip_;                 // by loop: iv -> iv + step
  std::map<const ir::Op*, std::vector<const ir::Op*>> async_;  // by loop: its async stages, program order
  // A batch's plain loads of the trip being emitted (BlockPlan::load_prefetch), read at the
  // start of its batch (loadTile's form).
  std::map<const ir::Op*, Tile> batched_;
  bool pending_writes_ = false;  // shared stores since the last barrier
  bool pending_reads_ = false;   // shared reads of single-buffered stages since the last barrier
  bool scratch_busy_ = false;    // a reduction's scratch may still be read by other threads
  // Global memory between a program's statements (docs/ir.md: they run in order, a store is
  // visible to later loads): the block's threads share the program's views, so a load waits at
  // a barrier for earlier stores of its view, and a store for earlier loads and stores of its
  // view that may touch its elements by other threads. The stores and loads (of views the
  // phase stores to) since the last barrier, by view; in a loop, the body's
  // own from the trip before.
  std::map<const ir::Value*, std::vector<const ir::Op*>> stored_, loaded_;
  std::set<const ir::Value*> written_;  // views the phase stores to
  bool pendingStore(const ir::Value* view) const { return stored_.count(view) > 0; }
  void beforeLoad(const ir::Op* load);    // the barrier a load needs, then the load recorded
  void beforeStore(const ir::Op* store);  // the barrier a store needs, then the store recorded
  void pendTrip(const ir::Region* body);  // the body's accesses, as from the trip before
  bool mayOverlap(const ir::Op* a, const ir::Op* b) const;
};

}  // namespace kiln::codegen
