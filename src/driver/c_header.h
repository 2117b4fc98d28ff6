// The C header of an object compiled for linking into a program of one's own (`kiln compile
// --emit obj --out NAME.o --header NAME.h`, docs/api.md): the entry points under the object's
// symbol prefix, each parameter's shape, the workspaces, the CPU the object needs, and a
// single-threaded PREFIX_run() that allocates the workspaces and runs every block.
// Expects the verified kernel and the report of the compile that produced the object with that
// prefix. Guarantees a self-contained C99 header (stdint.h and stdlib.h only), valid C++ too.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "ir/ir.h"
#include "plan/knobs.h"

namespace kiln::driver {

std::string cHeader(const ir::Kernel& kernel, const plan::Knobs& knobs, const std::string& symbol_prefix,
                    const nlohmann::json& report, const std::string& object_name);

}  // namespace kiln::driver
