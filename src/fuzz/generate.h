// Generator: random valid TileIR programs for the differential tester (`kiln fuzz`).
// Expects: a 64-bit seed. Guarantees: the same seed gives the same text on every machine (the
// fuzzer's own SplitMix64, src/fuzz/rng.h); every program parses and verifies (a program that
// does not is a generator bug, reported as such by generate()); programs of the root domain
// never read what another program writes (every stored view has the root domain as its
// leading dims and each program stores and reads back only its own slab); the work per
// program is bounded so that interpreting and compiling it takes milliseconds.
// Coverage (docs/fuzz.md): loads and stores with ragged views, out-of-range and runtime
// origins and fills; every unary and binary op, cmp/select, cast, iota, broadcast; reduce
// (add/max/min/mul, ordered and unordered_tree with and without P); mma (1 or 2 contracted
// dims, batch dims, K = 0, both policy flags); extract at constant and runtime indices;
// serial and pipeline loops with carried scalars and tiles, nested, with runtime bounds;
// per-program integers read from a view<i32>, and a runtime extent of the first root axis.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "ir/ir.h"

namespace kiln::fuzz {

struct Program {
  uint64_t seed = 0;
  std::string text;  // the kernel, as generated (parses to `kernel`)
  // The program may hold inf/nan literals and its inputs get zeros, denormals, ±inf and NaN
  // injected (specialInputs); such programs are never paired with fast_math.
  bool specials = false;
  std::unique_ptr<ir::Kernel> kernel;
};

// Which programs: `Any` (every construct above) or `Block`, programs of the GPU's block form
// (docs/gpu.md): a fixed set of row dims and column dims, every tile the rows in order with at
// most one column dim last, mmas whose results are [rows, column] over one contracted dim with
// loaded or computed [rows, column] operands, f32 reductions, serial loops (docs/fuzz.md).
enum class Family { Any, Block };
std::optional<Family> familyNamed(const std::string& name);  // "any" | "block"

// The generated text of `seed` (no parsing).
Program generateText(uint64_t seed, Family family = Family::Any);

// generateText, then parse and verify. Error: "generator bug: ..." with the diagnostics and
// the text (a generated program must always verify).
std::optional<std::string> generate(uint64_t seed, Program& out, Family family = Family::Any);

// The seed of program `index` of a run with seed `runSeed`.
uint64_t programSeed(uint64_t runSeed, uint64_t index);

}  // namespace kiln::fuzz
