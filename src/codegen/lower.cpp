// Module assembly: the masked packet body, the full-packet clone when the plan's rule admits
// it, and the ABI entry points (block traversal) of src/runtime/abi.h.
#include "codegen/lower.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include "codegen/emitter.h"
#include "codegen/lanes/lane_emitter.h"
#include "runtime/abi.h"

namespace kiln::codegen {
namespace {

int64_t countInstructions(const llvm::Function& f) {
  int64_t n = 0;
  for (const llvm::BasicBlock& bb : f) n += static_cast<int64_t>(bb.size());
  return n;
}

// What the emitted body realizes (instructions, loops, private arrays), for checking the plan.
void realized(const llvm::Function& body, Lowered& out) {
  out.body_instructions = countInstructions(body);
  for (const llvm::BasicBlock& bb : body) {
    if (bb.getName().starts_with(kLoopHeaderName)) ++out.realized_loops;
    for (const llvm::Instruction& i : bb)
      if (llvm::isa<llvm::AllocaInst>(i)) ++out.realized_allocas;
  }
}

// void kiln_blocks(ptr params, i64 begin, i64 end, ptr record)
// `masked` runs `w` programs from `first` (lanes past the domain masked); `full` (optional) the
// same with every lane active. The lane realization passes w = 1 and its program as `full`.
void emitBlocks(llvm::Module& m, const plan::Plan& p, llvm::Function* masked, llvm::Function* full, int64_t w) {
  llvm::LLVMContext& c = m.getContext();
  llvm::IRBuilder<> b(c);
  auto* i64 = b.getInt64Ty();
  auto* fty = llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy(), i64, i64, b.getPtrTy()}, false);
  auto* f = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, runtime::kBlocksSymbol, m);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  llvm::Value* params = f->getArg(0);
  llvm::Value* record = f->getArg(3);
  auto* entry = llvm::BasicBlock::Create(c, "entry", f);
  auto* blockHead = llvm::BasicBlock::Create(c, "block", f);
  auto* packetHead = llvm::BasicBlock::Create(c, "packet", f);
  auto* packetBody = llvm::BasicBlock::Create(c, "packet.run", f);
  auto* packetNext = llvm::BasicBlock::Create(c, "packet.next", f);
  auto* blockNext = llvm::BasicBlock::Create(c, "block.next", f);
  auto* done = llvm::BasicBlock::Create(c, "done", f);
  int64_t bs = p.knobs.block_size;

  b.SetInsertPoint(entry);
  b.CreateBr(blockHead);
  b.SetInsertPoint(blockHead);
  auto* blk = b.CreatePHI(i64, 2, "block");
  blk->addIncoming(f->getArg(1), entry);
  b.CreateCondBr(b.CreateICmpSLT(blk, f->getArg(2)), packetHead, done);

  b.SetInsertPoint(packetHead);
  auto* pk = b.CreatePHI(i64, 2, "packet");
  pk->addIncoming(b.getInt64(0), blockHead);
  llvm::Value* first = b.CreateAdd(b.CreateMul(blk, b.getInt64(bs)), b.CreateMul(pk, b.getInt64(w)), "first");
  llvm::Value* inDomain = b.CreateICmpSLT(first, b.getInt64(p.num_programs));
  llvm::Value* inBlock = b.CreateICmpSLT(pk, b.getInt64(bs / w));
  b.CreateCondBr(b.CreateAnd(inDomain, inBlock), packetBody, blockNext);

  b.SetInsertPoint(packetBody);
  llvm::Value* fullField = b.CreateConstInBoundsGEP1_64(i64, record, 0);
  llvm::Value* maskedField = b.CreateConstInBoundsGEP1_64(i64, record, 1);
  auto bump = [&](llvm::Value* field) { b.CreateStore(b.CreateAdd(b.CreateLoad(i64, field), b.getInt64(1)), field); };
  if (!masked) {
    b.CreateCall(full, {params, first});
    bump(fullField);
    b.CreateBr(packetNext);
  } else if (full) {
    auto* runFull = llvm::BasicBlock::Create(c, "packet.full", f);
    auto* runMasked = llvm::BasicBlock::Create(c, "packet.masked", f);
    llvm::Value* complete = b.CreateICmpSLE(b.CreateAdd(first, b.getInt64(w)), b.getInt64(p.num_programs));
    b.CreateCondBr(complete, runFull, runMasked);
    b.SetInsertPoint(runFull);
    b.CreateCall(full, {params, first});
    bump(fullField);
    b.CreateBr(packetNext);
    b.SetInsertPoint(runMasked);
  }
  if (masked) {
    b.CreateCall(masked, {params, first});
    bump(maskedField);
    b.CreateBr(packetNext);
  }

  b.SetInsertPoint(packetNext);
  pk->addIncoming(b.CreateAdd(pk, b.getInt64(1)), packetNext);
  b.CreateBr(packetHead);

  b.SetInsertPoint(blockNext);
  blk->addIncoming(b.CreateAdd(blk, b.getInt64(1)), blockNext);
  b.CreateBr(blockHead);

  b.SetInsertPoint(done);
  b.CreateRetVoid();

  // void kiln_launch(ptr params, ptr record): reset the record, run every block.
  auto* lty = llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy(), b.getPtrTy()}, false);
  auto* launch = llvm::Function::Create(lty, llvm::Function::ExternalLinkage, runtime::kLaunchSymbol, m);
  launch->addFnAttr(llvm::Attribute::NoUnwind);
  b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", launch));
  b.CreateStore(b.getInt64(0), b.CreateConstInBoundsGEP1_64(i64, launch->getArg(1), 0));
  b.CreateStore(b.getInt64(0), b.CreateConstInBoundsGEP1_64(i64, launch->getArg(1), 1));
  b.CreateCall(f, {launch->getArg(0), b.getInt64(0), b.getInt64(p.num_blocks), launch->getArg(1)});
  b.CreateRetVoid();

  auto global = [&](const char* name, int64_t v) {
    new llvm::GlobalVariable(m, i64, true, llvm::GlobalValue::ExternalLinkage, b.getInt64(v), name);
  };
  global(runtime::kNumBlocksSymbol, p.num_blocks);
  global(runtime::kAbiVersionSymbol, runtime::kKilnAbiVersion);
}

}  // namespace

std::optional<std::string> lower(const ir::Kernel& kernel, const plan::Plan& plan, llvm::LLVMContext& ctx,
                                 Lowered& out) {
  out = Lowered{};
  out.module = std::make_unique<llvm::Module>("kiln." + kernel.name, ctx);
  llvm::Module& m = *out.module;
  std::string error;

  if (plan.lanes_realization) {
    // One program per call over the W lanes: no lane mask, so no clone to make.
    LaneEmitter lanes(kernel, plan, m);
    llvm::Function* body = lanes.emitProgram("kiln_program", error);
    if (!body) return error;
    realized(*body, out);
    out.full_packet_decision = "not_applicable";
    emitBlocks(m, plan, nullptr, body, 1);
  } else {
    Emitter masked(kernel, plan, m, /*fullPacket=*/false);
    llvm::Function* body = masked.emitPacket("kiln_packet", error);
    if (!body) return error;
    realized(*body, out);

    // The full-packet rule (DESIGN.md, "Execution model"), applied to the measured body.
    llvm::Function* full = nullptr;
    const plan::Knobs& kn = plan.knobs;
    if (!kn.full_packet) {
      out.full_packet_decision = "not_requested";
    } else if (plan.num_programs < kn.packet_width) {
      out.full_packet_decision = "no_full_packet";
    } else if (out.body_instructions > kn.full_packet_budget) {
      out.full_packet_decision = "over_budget";
    } else {
      Emitter clone(kernel, plan, m, /*fullPacket=*/true);
      full = clone.emitPacket("kiln_packet_full", error);
      if (!full) return error;
      out.full_packet_decision = "selected";
      out.full_body_instructions = countInstructions(*full);
    }
    emitBlocks(m, plan, body, full, kn.packet_width);
  }

  for (const llvm::Function& f : m) {
    out.instructions_pre_opt += f.isDeclaration() ? 0 : countInstructions(f);
    out.basic_blocks_pre_opt += static_cast<int64_t>(f.size());
  }
  std::string verr;
  llvm::raw_string_ostream os(verr);
  if (llvm::verifyModule(m, &os)) return "internal error: the lowered module is invalid: " + os.str();
  return std::nullopt;
}

}  // namespace kiln::codegen
