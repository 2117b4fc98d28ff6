// A peer in a child process, for settings a library reads only when it loads (OpenBLAS's
// OPENBLAS_CORETYPE). The parent starts `EXE peers --serve NAME --only-shapes --shape S
// --mask M --threads N --seed X` with extra environment variables, and drives it over two
// pipes with one command per line:
//   child, once ready:   "ready DETAIL" | "error MESSAGE"
//   "output"          -> "output N" then N little-endian f32 (one call's o)
//   "time REPS SAMPLES" -> "times T1 ... TS" (seconds per call, the child's steady clock)
//   "quit"            -> the child exits 0
// The child regenerates the inputs from the seed (bit-identical to the parent's), so only
// commands and results cross the pipe; timing is measured inside the child.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "peers/impl.h"

namespace kiln::peers {

// The client: an Impl whose calls run in the child. `serve` names the in-process peer the
// child runs; `env` is added to (or replaces in) the child's environment.
std::unique_ptr<Impl> makeRemote(std::string name, std::string serve, std::map<std::string, std::string> env,
                                 const ImplOptions& options);

struct ServeRequest {
  std::string impl;  // an in-process peer: openblas, native, ...
  Shape shape;
  bool causal = false;
  uint64_t seed = 0;
  int threads = 1;
};

// The child's side: prepares the peer and answers commands on stdin/stdout until "quit" or
// end of input (anything else the process prints goes to stderr). Returns the exit code.
int servePeer(const ServeRequest& request);

}  // namespace kiln::peers
