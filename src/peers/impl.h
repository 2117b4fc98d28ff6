// A peer: one way to compute the attention of a Problem (Kiln, a library, hand-written code),
// behind one interface so that the protocol can interleave them.
// Expects: prepare() once per problem before compute() or time(); the problem outlives the
// implementation. Guarantees: compute() leaves the output of one call in `out`; time() runs
// `samples` samples of `reps` calls each and gives seconds per call for each sample; with
// `cold`, the caches are emptied before each call (evictCaches, not timed) and each call is
// timed alone.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "peers/problem.h"

namespace kiln::peers {

class Impl {
 public:
  virtual ~Impl() = default;
  // Short, stable name (JSON "impl"): kiln, kiln-1t, kiln-untuned, kiln-lengths, kiln-set, kiln-seed, onednn,
  // openblas, openblas-coretype, native, plain.
  virtual std::string name() const = 0;
  // One line for humans: library version, ISA or core type, threads, knobs. Complete after
  // prepare().
  virtual std::string detail() const = 0;
  virtual int threads() const = 0;
  // The check against the FP64 reference: |got - ref| <= t + t * |ref|. 5e-5 for everything
  // that computes in f32; a peer that rounds intermediates to 16 bits says how far that goes.
  virtual double tolerance() const { return 5e-5; }
  // An implementation that rounds A to 16 bits (a 16-bit GEMM pipeline): its unit roundoff u,
  // so each element is also allowed u * (|A||B|)[i,j] (Problem::abs_product); 0 otherwise.
  virtual double roundsA() const { return 0.0; }
  // After a failed prepare(): the library has no implementation of this problem on this
  // machine (a fact to report, not a failure of the run).
  virtual bool unavailable() const { return false; }
  // Everything but the attention call: compile, create primitives, allocate.
  virtual std::optional<std::string> prepare(const Problem& problem) = 0;
  virtual std::optional<std::string> compute(std::vector<float>& out) = 0;
  virtual std::optional<std::string> time(int reps, int samples, std::vector<double>& seconds_per_call, bool cold) = 0;
};

// Empties this core's caches and the shared last-level cache of everything but its own buffer:
// reads a buffer of four times the last-level cache (the largest size /sys states for cpu0,
// 32 MiB when it states none), at least 64 MiB, a word per 64-byte line. Returns the bytes read.
// `kiln peers --caches cold` calls it before every timed call, so that a call finds its inputs
// in DRAM, as a model's decode step finds a layer's KV cache after the other layers ran.
std::size_t evictCaches();

// An implementation that runs in this process: time() wraps run() in a steady clock.
class LocalImpl : public Impl {
 public:
  std::optional<std::string> compute(std::vector<float>& out) override;
  std::optional<std::string> time(int reps, int samples, std::vector<double>& seconds_per_call, bool cold) override;

 protected:
  virtual void run() = 0;
  std::vector<float> out_;  // sized by prepare()
};

struct ImplOptions {
  int threads = 1;
  std::string block;                // Kiln default: block_q x block_k of the DSL kernel ("" = the library's choice)
  std::string split;                // Kiln default: the attention library's --split ("" = its choice)
  std::string native_isa = "auto";  // auto | avx512 | avx2
  std::string isa = "native";       // Kiln's isa knob (kiln peers --isa): native | avx2 | avx512
  // kiln peers --set NAME=VALUE: kiln-set's knobs over kiln's default or tuned ones (an isa
  // among them replaces isa for kiln-set; threads are --threads).
  std::vector<std::string> knob_sets;
  uint64_t seed = 0;     // for implementations in a child process
  std::string self_exe;  // this executable, for child processes
};

std::unique_ptr<Impl> makeKilnDefault(const ImplOptions& options);
// Kiln default on one thread whatever --threads says ("kiln-1t"): the same run's baseline for
// the thread speed-up (listed by default when --threads > 1).
std::unique_ptr<Impl> makeKilnOneThread(const ImplOptions& options);
// Kiln default without the tuning database ("kiln-untuned"; `kiln` uses a tuned choice when the
// database has one for the shape): listed by default when the tuning database has entries.
std::unique_ptr<Impl> makeKilnUntuned(const ImplOptions& options);
// The library's attention over a dense KV cache of capacity K (`--kv-cache dense`), launched
// with every sequence's length K: the runtime-length kernel at the static kernel's length
// ("kiln-lengths", untuned like kiln-untuned, so the pair isolates runtime lengths).
std::unique_ptr<Impl> makeKilnLengths(const ImplOptions& options);
// Kiln default with kiln peers' --set knobs over its default or tuned ones ("kiln-set"): listed
// by default when --set is given, so that a knob's effect is a ratio paired in the same rounds,
// on the same buffers.
std::unique_ptr<Impl> makeKilnSet(const ImplOptions& options);
// The seed preset: packet_width=8 block_size=32 local_lanes=1 max_unrolled_tile_elements=64
// max_unrolled_region_work=4096 full_packet_budget=4096 mma_output_block=4
// max_unrolled_mma_terms=8 full_packet=on mma_indexable_snapshot=off; block 4x16 for Q > 1
// (the seed's prefill), 1x16 otherwise.
std::unique_ptr<Impl> makeKilnSeed(const ImplOptions& options);
// With 16-bit K/V (`kiln peers --kv-dtype`): the same kernel reading f32 K/V of the same values
// ("kiln-f32"), the pair that shows what the 16-bit storage saves.
std::unique_ptr<Impl> makeKilnF32(const ImplOptions& options);
// GEMM with bf16 B (`--b-dtype bf16`): the library's GEMM in the bf16 dot order as a bf16 model
// runs it, A and B bf16, B as N x K ("kiln-bf16dot"); on AMX tiles only (else unavailable).
std::unique_ptr<Impl> makeKilnBf16Dot(const ImplOptions& options);
// The library's GEMM in the bf16 pairs order, A and B bf16, B as K x N ("kiln-bf16pairs"); on
// VDPBF16PS only (AVX-512 code on a CPU with AVX512-BF16; else unavailable).
std::unique_ptr<Impl> makeKilnBf16Pairs(const ImplOptions& options);
std::unique_ptr<Impl> makeOneDnn(const ImplOptions& options);
std::unique_ptr<Impl> makeOpenBlas(const ImplOptions& options);
// OpenBLAS in a child process started with OPENBLAS_CORETYPE=openblasFamily() (the variable
// is read when the library loads, so it cannot change in this process). Runs the same
// protocol commands over a pipe; see remote.h.
std::unique_ptr<Impl> makeOpenBlasCoretype(const ImplOptions& options);
std::unique_ptr<Impl> makeNative(const ImplOptions& options);
std::unique_ptr<Impl> makePlain(const ImplOptions& options);

// Every implementation name, in the order the table lists them.
const std::vector<std::string>& implNames();
// Those that compute the workload: attention, all; gemm: kiln, kiln-1t, onednn, openblas, plain.
const std::vector<std::string>& implNames(Workload w);
std::unique_ptr<Impl> makeImpl(const std::string& name, const ImplOptions& options);
// Whether the implementation reads K/V of a 16-bit type (the others refuse such a problem).
bool takesHalfKv(const std::string& name);
// Whether the GEMM implementation reads B of a 16-bit type (--b-dtype).
bool takesHalfB(const std::string& name);

// The OpenBLAS 0.3.21 DYNAMIC_ARCH core family for this CPU: Cooperlake (AVX-512 + BF16),
// SkylakeX (AVX-512), Haswell (AVX2), or "" when none applies.
std::string openblasFamily();
// OpenBLAS as this process loaded it: core name, library path, configuration.
std::string openblasDescription();

}  // namespace kiln::peers
