// The targets Kiln compiles for, as the `target` knob holds them (target.h has the interface).
#pragma once

namespace kiln::target {

enum class Kind { Cpu, Nvptx };

}  // namespace kiln::target
