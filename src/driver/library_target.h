// What the library sizes its programs for, from the knobs a kernel is compiled with: the target
// knob's model (a GPU's multiprocessors, a CPU's L1 and bf16 instructions) and the thread count.
// The one place every front end (kiln run/compile, the C++ and Python API, kiln peers) takes it
// from.
#pragma once

#include "kernels/registry.h"
#include "plan/knobs.h"
#include "target/target.h"

namespace kiln::driver {

inline kernels::LibraryTarget libraryTarget(const plan::Knobs& knobs) {
  const target::Target& t = target::of(knobs.target);
  const target::Model& m = t.model(knobs.isa);
  return kernels::LibraryTarget{t.gpuEntries(), m.multiprocessors,           knobs.threads,
                                m.l1d_bytes,    plan::dpbf16Steps(knobs, m), plan::amxTiles(knobs, m)};
}

}  // namespace kiln::driver
