#include "target/target.h"

#include "target/targets.h"

namespace kiln::target {
namespace {

const CpuTarget kCpu;
const NvptxTarget kNvptx;

}  // namespace

const Target* byName(const std::string& name) {
  for (const Target* t : {static_cast<const Target*>(&kCpu), static_cast<const Target*>(&kNvptx)})
    if (name == t->name()) return t;
  return nullptr;
}

const Target& of(Kind kind) {
  return kind == Kind::Nvptx ? static_cast<const Target&>(kNvptx) : static_cast<const Target&>(kCpu);
}

const char* names() {
  return "cpu|nvptx";
}

}  // namespace kiln::target
