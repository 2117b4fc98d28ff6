// Module assembly: the masked packet body, the full-packet clone when the plan's rule admits
// it, and the ABI entry points (block traversal) of src/runtime/abi.h.
#include "codegen/lower.h"

#include <functional>
#include <utility>

#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/Operator.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include "codegen/block/block_emitter.h"
#include "codegen/gpu_threads.h"
#include "codegen/lanes/lane_emitter.h"
#include "codegen/packets/packet_emitter.h"
#include "runtime/abi.h"
#include "target/target.h"

namespace kiln::codegen {
namespace {

int64_t countInstructions(const llvm::Function& f) {
  int64_t n = 0;
  for (const llvm::BasicBlock& bb : f) n += static_cast<int64_t>(bb.size());
  return n;
}

// What the emitted body realizes (instructions, loops, private arrays), for checking the plan.
void realized(const llvm::Function& body, LoweredPhase& out) {
  out.body_instructions = countInstructions(body);
  for (const llvm::BasicBlock& bb : body) {
    if (bb.getName().starts_with(kLoopHeaderName)) ++out.realized_loops;
    for (const llvm::Instruction& i : bb)
      if (llvm::isa<llvm::AllocaInst>(i)) ++out.realized_allocas;
  }
}

}  // namespace

plan::LaneCode realizedLaneCode(const llvm::Function& program, int64_t w) {
  plan::LaneCode n;
  // Lanes of a vector type (0 for scalars and one-lane vectors).
  auto lanes = [](const llvm::Type* t) -> int64_t {
    const auto* v = llvm::dyn_cast<llvm::FixedVectorType>(t);
    return v && v->getNumElements() > 1 ? v->getNumElements() : 0;
  };
  // View memory: an address not derived from a private array.
  auto view = [](const llvm::Value* ptr) {
    while (const auto* g = llvm::dyn_cast<llvm::GEPOperator>(ptr)) ptr = g->getPointerOperand();
    return !llvm::isa<llvm::AllocaInst>(ptr);
  };
  int64_t loadLanes = 0, storeLanes = 0, gatherLanes = 0, scatterLanes = 0;
  for (const llvm::BasicBlock& bb : program) {
    if (bb.getName().starts_with(kLoopHeaderName)) ++n.loops;
    for (const llvm::Instruction& i : bb) {
      if (llvm::isa<llvm::AllocaInst>(i)) ++n.allocas;
      if (const auto* l = llvm::dyn_cast<llvm::LoadInst>(&i)) {
        if (view(l->getPointerOperand())) loadLanes += lanes(l->getType());
      } else if (const auto* s = llvm::dyn_cast<llvm::StoreInst>(&i)) {
        if (view(s->getPointerOperand())) storeLanes += lanes(s->getValueOperand()->getType());
      } else if (const auto* sh = llvm::dyn_cast<llvm::ShuffleVectorInst>(&i)) {
        const bool twoSources =
            !llvm::isa<llvm::UndefValue>(sh->getOperand(0)) && !llvm::isa<llvm::UndefValue>(sh->getOperand(1));
        if (twoSources && lanes(sh->getType()) == w && lanes(sh->getOperand(0)->getType()) == w) ++n.shuffles;
      } else if (const auto* call = llvm::dyn_cast<llvm::IntrinsicInst>(&i)) {
        switch (call->getIntrinsicID()) {
          case llvm::Intrinsic::masked_load:
            if (view(call->getArgOperand(0))) loadLanes += lanes(call->getType());
            break;
          case llvm::Intrinsic::masked_store:
            if (view(call->getArgOperand(1))) storeLanes += lanes(call->getArgOperand(0)->getType());
            break;
          case llvm::Intrinsic::masked_gather: gatherLanes += lanes(call->getType()); break;
          case llvm::Intrinsic::masked_scatter: scatterLanes += lanes(call->getArgOperand(0)->getType()); break;
          case llvm::Intrinsic::fma:
            if (lanes(call->getType()) > 0) ++n.fmas;
            break;
          default: break;
        }
      }
    }
  }
  // W-lane vectors (a register-wide piece of a split load is a fraction of one; rounded up).
  auto vectors = [w](int64_t l) { return (l + w - 1) / w; };
  n.vector_loads = vectors(loadLanes);
  n.vector_stores = vectors(storeLanes);
  n.gathers = vectors(gatherLanes);
  n.scatters = vectors(scatterLanes);
  return n;
}

namespace {

// The blocks a launch's `programs` fill, ceil(programs / block_size); null when the count is a
// constant (every axis static: the plan's num_blocks).
llvm::Value* launchBlocks(llvm::IRBuilder<>& b, llvm::Value* programs, const plan::Plan& p) {
  if (llvm::isa<llvm::Constant>(programs)) return nullptr;
  const int64_t bs = p.knobs.block_size;
  return b.CreateUDiv(b.CreateAdd(programs, b.getInt64(bs - 1)), b.getInt64(bs), "launch.blocks");
}

// void NAME(ptr params, i64 begin, i64 end, ptr record): the blocks of one root domain.
// `masked` runs `w` programs from `first` (lanes past the domain masked); `full` (optional) the
// same with every lane active. The lane realization passes w = 1 and its program as `full`.
llvm::Function* emitBlocks(llvm::Module& m, const ir::Op& root, const plan::Plan& p, llvm::Function* masked,
                           llvm::Function* full, int64_t w, const std::string& name, bool exported) {
  llvm::LLVMContext& c = m.getContext();
  llvm::IRBuilder<> b(c);
  auto* i64 = b.getInt64Ty();
  auto* fty = llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy(), i64, i64, b.getPtrTy()}, false);
  auto* f = llvm::Function::Create(fty, exported ? llvm::Function::ExternalLinkage : llvm::Function::InternalLinkage,
                                   name, m);
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
  // The programs of this launch's domain (runtime extents), and the blocks they fill.
  llvm::Value* programs = domainPrograms(b, params, root);
  llvm::Value* end = f->getArg(2);
  if (llvm::Value* blocks = launchBlocks(b, programs, p))
    end = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, end, blocks);
  b.CreateBr(blockHead);
  b.SetInsertPoint(blockHead);
  auto* blk = b.CreatePHI(i64, 2, "block");
  blk->addIncoming(f->getArg(1), entry);
  b.CreateCondBr(b.CreateICmpSLT(blk, end), packetHead, done);

  b.SetInsertPoint(packetHead);
  auto* pk = b.CreatePHI(i64, 2, "packet");
  pk->addIncoming(b.getInt64(0), blockHead);
  llvm::Value* first = b.CreateAdd(b.CreateMul(blk, b.getInt64(bs)), b.CreateMul(pk, b.getInt64(w)), "first");
  llvm::Value* inDomain = b.CreateICmpSLT(first, programs);
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
    llvm::Value* complete = b.CreateICmpSLE(b.CreateAdd(first, b.getInt64(w)), programs);
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

  return f;
}

// Target nvptx: the PTX kernel `name`, void (ptr params). `where` (emitted in its entry, given
// the builder and the parameter array) returns whether this thread takes part and the program
// it starts `body` (void (ptr params, i64 program)) on. The body is inlined, so the entry's PTX
// (and the driver's register count) is the whole program's.
using GpuWhere = std::function<std::pair<llvm::Value*, llvm::Value*>(llvm::IRBuilder<>&, llvm::Value* params)>;
llvm::Function* emitGpuKernel(llvm::Module& m, llvm::Function* body, const std::string& name, const GpuWhere& where) {
  llvm::LLVMContext& c = m.getContext();
  llvm::IRBuilder<> b(c);
  auto* f = llvm::Function::Create(llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy()}, false),
                                   llvm::Function::ExternalLinkage, name, m);
  f->setCallingConv(llvm::CallingConv::PTX_Kernel);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  auto* entry = llvm::BasicBlock::Create(c, "entry", f);
  auto* run = llvm::BasicBlock::Create(c, "thread.run", f);
  auto* done = llvm::BasicBlock::Create(c, "done", f);
  b.SetInsertPoint(entry);
  auto [active, first] = where(b, f->getArg(0));
  b.CreateCondBr(active, run, done);
  b.SetInsertPoint(run);
  b.CreateCall(body, {f->getArg(0), first});
  b.CreateBr(done);
  b.SetInsertPoint(done);
  b.CreateRetVoid();
  body->setLinkage(llvm::Function::InternalLinkage);
  body->removeFnAttr(llvm::Attribute::NoInline);
  body->addFnAttr(llvm::Attribute::AlwaysInline);
  return f;
}

// Knob gpu_dependent_launch: phase i > 0 starts with griddepcontrol.wait (it returns once the
// phase before has finished and its memory is visible: every access after it sees what the
// phases before stored, as in stream order), and phase i < last with
// griddepcontrol.launch_dependents (the next phase's blocks may be scheduled once every block of
// this one has started or finished; they then wait). The launcher gives the later phases
// programmatic stream serialization (the manifest's `dependent` lines); launched without it, the
// wait returns at once and the trigger does nothing.
void dependOnThePhaseBefore(llvm::Module& m, std::vector<LoweredPhase>& phases) {
  for (size_t i = 0; i < phases.size(); ++i) {
    if (!phases[i].gpu_entry) continue;
    llvm::Function* f = m.getFunction(phases[i].gpu_entry->name);
    if (!f) continue;
    llvm::IRBuilder<> b(&*f->getEntryBlock().getFirstInsertionPt());
    if (i > 0) {
      b.CreateIntrinsic(llvm::Intrinsic::nvvm_griddepcontrol_wait, {});
      phases[i].gpu_entry->waits_for_previous = true;
    }
    if (i + 1 < phases.size()) {
      b.CreateIntrinsic(llvm::Intrinsic::nvvm_griddepcontrol_launch_dependents, {});
      phases[i].gpu_entry->triggers_next = true;
    }
  }
}

llvm::Value* specialRegister(llvm::IRBuilder<>& b, llvm::Intrinsic::ID id) {
  return b.CreateZExt(b.CreateIntrinsic(b.getInt32Ty(), id, llvm::ArrayRef<llvm::Value*>{}), b.getInt64Ty());
}

// The lane and packet realizations: GPU thread g = ctaid.x * ntid.x + tid.x takes part in call
// c = g / threads_per_program of `body`, on programs from c * programs_per_thread, when
// g < launch.threads. The body stays the CPU's (the lane program, or the masked packet body,
// which masks the programs past the domain itself); only the traversal differs.
llvm::Function* emitGpuEntry(llvm::Module& m, const ir::Op& root, const plan::Plan& p, llvm::Function* body,
                             const std::string& name, int64_t threadsPerProgram) {
  const plan::GpuLaunch launch = plan::gpuLaunch(p, threadsPerProgram);
  return emitGpuKernel(m, body, name, [&](llvm::IRBuilder<>& b, llvm::Value* params) {
    llvm::Value* g = b.CreateAdd(b.CreateMul(specialRegister(b, llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x),
                                             specialRegister(b, llvm::Intrinsic::nvvm_read_ptx_sreg_ntid_x)),
                                 specialRegister(b, llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x), "thread");
    // The W threads of a program's segment (aligned in the warp) leave or stay together.
    llvm::Value* call = b.CreateUDiv(g, b.getInt64(launch.threads_per_program), "call");
    llvm::Value* first = b.CreateMul(call, b.getInt64(launch.programs_per_thread), "first");
    llvm::Value* active = b.CreateICmpSLT(g, b.getInt64(launch.threads));
    // Runtime extents: the grid is the maximum's; calls past this launch's programs return (a
    // packet body masks its own lanes past them).
    llvm::Value* programs = domainPrograms(b, params, root);
    if (!llvm::isa<llvm::Constant>(programs)) active = b.CreateAnd(active, b.CreateICmpSLT(first, programs));
    return std::make_pair(active, first);
  });
}

// The block realization: thread block b runs program b of the domain on all its
// BlockPlan::threads threads (a block past this launch's programs returns as a whole: the body
// holds barriers).
llvm::Function* emitGpuBlockEntry(llvm::Module& m, const ir::Op& root, const plan::Plan& p, llvm::Function* body,
                                  const std::string& name) {
  llvm::Function* f = emitGpuKernel(m, body, name, [&](llvm::IRBuilder<>& b, llvm::Value* params) {
    llvm::Value* program = specialRegister(b, llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x);
    return std::make_pair(b.CreateICmpSLT(program, domainPrograms(b, params, root)), program);
  });
  f->addFnAttr("nvvm.maxntid", std::to_string(p.block.threads));
  if (p.block.registers > 0) f->addFnAttr("nvvm.maxnreg", std::to_string(p.block.registers));
  return f;
}

// Phase dispatch: void kiln_blocks(ptr params, i64 begin, i64 end, ptr record) over the
// concatenated block ranges of the phases; each phase's part of [begin, end) goes to its own
// block loop. The runtime never hands one call blocks of two phases at once when it runs
// threads (it waits between phases); one call over every block runs the phases in order.
llvm::Function* emitDispatch(llvm::Module& m, const std::vector<llvm::Function*>& phases,
                             const std::vector<int64_t>& ends) {
  llvm::LLVMContext& c = m.getContext();
  llvm::IRBuilder<> b(c);
  auto* i64 = b.getInt64Ty();
  auto* fty = llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy(), i64, i64, b.getPtrTy()}, false);
  auto* f = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, runtime::kBlocksSymbol, m);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", f));
  int64_t start = 0;
  for (size_t i = 0; i < phases.size(); ++i) {
    llvm::Value* lo = b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, f->getArg(1), b.getInt64(start));
    llvm::Value* hi = b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, f->getArg(2), b.getInt64(ends[i]));
    auto* run = llvm::BasicBlock::Create(c, "phase" + std::to_string(i), f);
    auto* next = llvm::BasicBlock::Create(c, "phase" + std::to_string(i) + ".next", f);
    b.CreateCondBr(b.CreateICmpSLT(lo, hi), run, next);
    b.SetInsertPoint(run);
    b.CreateCall(phases[i],
                 {f->getArg(0), b.CreateSub(lo, b.getInt64(start)), b.CreateSub(hi, b.getInt64(start)), f->getArg(3)});
    b.CreateBr(next);
    b.SetInsertPoint(next);
    start = ends[i];
  }
  b.CreateRetVoid();
  return f;
}

// void kiln_phase_blocks(ptr params, ptr blocks): phase i's blocks for these arguments,
// ceil(programs / block_size) (the plan's count when every axis of its domain is static).
void emitPhaseBlocks(llvm::Module& m, const std::vector<Phase>& phases) {
  llvm::LLVMContext& c = m.getContext();
  llvm::IRBuilder<> b(c);
  auto* fty = llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy(), b.getPtrTy()}, false);
  auto* f = llvm::Function::Create(fty, llvm::Function::ExternalLinkage, runtime::kPhaseBlocksSymbol, m);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", f));
  for (size_t i = 0; i < phases.size(); ++i) {
    const plan::Plan& p = *phases[i].plan;
    llvm::Value* n = launchBlocks(b, domainPrograms(b, f->getArg(0), *phases[i].kernel->root()), p);
    if (!n) n = b.getInt64(p.num_blocks);
    b.CreateStore(n, b.CreateConstInBoundsGEP1_64(b.getInt64Ty(), f->getArg(1), i));
  }
  b.CreateRetVoid();
}

// kiln_launch (reset the record, run every block: the phases in order), kiln_num_blocks,
// kiln_num_phases, kiln_phase_ends, kiln_abi_version.
void emitEntries(llvm::Module& m, llvm::Function* blocks, const std::vector<int64_t>& ends) {
  llvm::LLVMContext& c = m.getContext();
  llvm::IRBuilder<> b(c);
  auto* i64 = b.getInt64Ty();
  const int64_t total = ends.empty() ? 0 : ends.back();
  auto* lty = llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy(), b.getPtrTy()}, false);
  auto* launch = llvm::Function::Create(lty, llvm::Function::ExternalLinkage, runtime::kLaunchSymbol, m);
  launch->addFnAttr(llvm::Attribute::NoUnwind);
  b.SetInsertPoint(llvm::BasicBlock::Create(c, "entry", launch));
  b.CreateStore(b.getInt64(0), b.CreateConstInBoundsGEP1_64(i64, launch->getArg(1), 0));
  b.CreateStore(b.getInt64(0), b.CreateConstInBoundsGEP1_64(i64, launch->getArg(1), 1));
  b.CreateCall(blocks, {launch->getArg(0), b.getInt64(0), b.getInt64(total), launch->getArg(1)});
  b.CreateRetVoid();

  auto global = [&](const char* name, int64_t v) {
    new llvm::GlobalVariable(m, i64, true, llvm::GlobalValue::ExternalLinkage, b.getInt64(v), name);
  };
  global(runtime::kNumBlocksSymbol, total);
  global(runtime::kNumPhasesSymbol, static_cast<int64_t>(ends.size()));
  global(runtime::kAbiVersionSymbol, runtime::kKilnAbiVersion);
  auto* arrTy = llvm::ArrayType::get(i64, ends.size());
  std::vector<llvm::Constant*> values;
  for (int64_t e : ends) values.push_back(b.getInt64(e));
  new llvm::GlobalVariable(m, arrTy, true, llvm::GlobalValue::ExternalLinkage, llvm::ConstantArray::get(arrTy, values),
                           runtime::kPhaseEndsSymbol);
}

}  // namespace

namespace {

// One root domain into `m`: its program (or packet bodies) and its block loop `name`.
std::optional<std::string> lowerDomain(const ir::Kernel& kernel, const plan::Plan& plan, llvm::Module& m,
                                       const std::string& prefix, const std::string& name, bool exported,
                                       LoweredPhase& out, llvm::Function*& blocks) {
  std::string error;
  const bool gpu = target::of(plan.knobs.target).gpuEntries();
  if (plan.realization == plan::Realization::Block) {
    BlockEmitter block(kernel, plan, m);
    llvm::Function* body = block.emitProgram(prefix + "kiln_program", error);
    if (!body) return error;
    realized(*body, out);
    out.full_packet_decision = "not_applicable";
    blocks = emitGpuBlockEntry(m, *kernel.root(), plan, body, name);
    out.gpu_entry = LoweredPhase::GpuEntry{name, plan.block.threads, ""};
    return std::nullopt;
  }
  if (plan.realization == plan::Realization::Lanes) {
    // One program per call over the W lanes: no lane mask, so no clone to make.
    LaneEmitter lanes(kernel, plan, m);
    llvm::Function* body = lanes.emitProgram(prefix + "kiln_program", error);
    if (!body) return error;
    realized(*body, out);
    out.lanes = true;
    out.lane_code = realizedLaneCode(*body, plan.knobs.packet_width);
    out.full_packet_decision = "not_applicable";
    if (!gpu) {
      blocks = emitBlocks(m, *kernel.root(), plan, nullptr, body, 1, name, exported);
      return std::nullopt;
    }
    // The lanes over the threads of a warp segment, unless the knob or the code says otherwise.
    LoweredPhase::GpuEntry entry{name, 1, "gpu_lanes=registers"};
    if (plan.knobs.gpu_lanes == "threads") {
      entry.not_spread.clear();
      if (llvm::Function* spread = spreadLanesOverThreads(body, plan.knobs.packet_width, entry.not_spread)) {
        body = spread;
        entry.threads_per_program = plan.knobs.packet_width;
      }
    }
    blocks = emitGpuEntry(m, *kernel.root(), plan, body, name, entry.threads_per_program);
    out.gpu_entry = entry;
    return std::nullopt;
  }
  PacketEmitter masked(kernel, plan, m, /*fullPacket=*/false);
  llvm::Function* body = masked.emitPacket(prefix + "kiln_packet", error);
  if (!body) return error;
  realized(*body, out);

  // The full-packet rule (DESIGN.md, "Execution model"), applied to the measured body.
  llvm::Function* full = nullptr;
  const plan::Knobs& kn = plan.knobs;
  if (gpu) {
    out.full_packet_decision = "not_applicable";  // a GPU thread runs one packet; no clone
    blocks = emitGpuEntry(m, *kernel.root(), plan, body, name, 1);
    out.gpu_entry = LoweredPhase::GpuEntry{name, 1, "local_lanes=1: a thread runs a packet of W programs"};
    return std::nullopt;
  }
  if (!kn.full_packet) {
    out.full_packet_decision = "not_requested";
  } else if (plan.num_programs < kn.packet_width) {
    out.full_packet_decision = "no_full_packet";
  } else if (out.body_instructions > kn.full_packet_budget) {
    out.full_packet_decision = "over_budget";
  } else {
    PacketEmitter clone(kernel, plan, m, /*fullPacket=*/true);
    full = clone.emitPacket(prefix + "kiln_packet_full", error);
    if (!full) return error;
    out.full_packet_decision = "selected";
    out.full_body_instructions = countInstructions(*full);
  }
  blocks = emitBlocks(m, *kernel.root(), plan, body, full, kn.packet_width, name, exported);
  return std::nullopt;
}

std::optional<std::string> finish(llvm::Module& m, Lowered& out) {
  for (const llvm::Function& f : m) {
    out.instructions_pre_opt += f.isDeclaration() ? 0 : countInstructions(f);
    out.basic_blocks_pre_opt += static_cast<int64_t>(f.size());
  }
  std::string verr;
  llvm::raw_string_ostream os(verr);
  if (llvm::verifyModule(m, &os)) return "internal error: the lowered module is invalid: " + os.str();
  return std::nullopt;
}

}  // namespace

std::optional<std::string> lower(const ir::Kernel& kernel, const std::vector<Phase>& phases, llvm::LLVMContext& ctx,
                                 Lowered& out) {
  out = Lowered{};
  out.module = std::make_unique<llvm::Module>("kiln." + kernel.name, ctx);
  out.phases.resize(phases.size());
  const bool gpu = target::of(phases.at(0).plan->knobs.target).gpuEntries();
  const bool dispatched = kernel.phased();
  std::vector<llvm::Function*> fns;
  std::vector<int64_t> ends;
  for (size_t i = 0; i < phases.size(); ++i) {
    // Not phased: the domain's functions keep their plain names and its block loop is kiln_blocks.
    const std::string prefix = dispatched ? "kiln_phase" + std::to_string(i) + "_" : "";
    const std::string name = gpu          ? kGpuEntryPrefix + std::to_string(i)
                             : dispatched ? prefix + "blocks"
                                          : std::string(runtime::kBlocksSymbol);
    llvm::Function* blocks = nullptr;
    if (auto e = lowerDomain(*phases[i].kernel, *phases[i].plan, *out.module, prefix, name, !dispatched, out.phases[i],
                             blocks))
      return dispatched ? "phase " + std::to_string(i) + ": " + *e : *e;
    fns.push_back(blocks);
    ends.push_back((ends.empty() ? 0 : ends.back()) + phases[i].plan->num_blocks);
  }
  if (!gpu) {
    emitEntries(*out.module, dispatched ? emitDispatch(*out.module, fns, ends) : fns.at(0), ends);
    emitPhaseBlocks(*out.module, phases);
  } else if (phases.size() > 1 && phases.at(0).plan->knobs.gpu_dependent_launch) {
    dependOnThePhaseBefore(*out.module, out.phases);
  }
  return finish(*out.module, out);
}

}  // namespace kiln::codegen
