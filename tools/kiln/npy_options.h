// `--input NAME=FILE.npy` and `--output NAME=FILE.npy` for kiln run (docs/cli.md, "Your data"):
// a parameter's values from a NumPy file instead of the deterministic generator, and an
// output's values after the native run written as one. Shapes and dtypes are checked against
// the parameter before anything runs; every problem names the option, the parameter and the file.
#pragma once

#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "host/data.h"
#include "host/npy.h"
#include "host/storage.h"
#include "ir/ir.h"
#include "ir/printer.h"
#include "jit/object_file.h"

namespace kiln::cli {

struct NpyOptions {
  std::vector<std::string> inputs, outputs;

  void add(CLI::App* app) {
    app->add_option("--input", inputs,
                    "NAME=FILE.npy: parameter NAME's values from a NumPy file (float32 for f32 views and f32 "
                    "scalars, float16 for view<f16>, bfloat16 bits as uint16 for view<bf16>, int32 for view<i32>, "
                    "int64 for view<i64> and i64 scalars; C order, the parameter's shape); repeatable. Others keep "
                    "the generated inputs");
    app->add_option("--output", outputs,
                    "NAME=FILE.npy: write output NAME (after the native run) as a NumPy file of its view's type "
                    "(float32, float16, uint16 bfloat16 bits, int32, int64); repeatable");
  }

  // Reads every --input into `views` (f32), `ints` (integer views) / `scalars`, and checks
  // every --output names an output. False after printing the error.
  bool load(const ir::Kernel& k, const char* cmd, std::map<std::string, std::vector<float>>& views,
            std::map<std::string, std::vector<int64_t>>& ints, std::map<std::string, std::string>& scalars) const {
    for (const std::string& spec : inputs) {
      std::string name, path;
      if (!split(spec, cmd, "--input", name, path)) return false;
      const ir::Value* p = param(k, name);
      if (!p) return fail(cmd, "--input " + spec + ": the kernel has no parameter %" + name + " (" + names(k) + ")");
      std::string bytes;
      if (auto e = jit::readFile(path, bytes)) return fail(cmd, "--input " + spec + ": " + *e);
      host::NpyArray a;
      if (auto e = host::parseNpy(bytes, a)) return fail(cmd, "--input " + spec + ": " + *e);
      const std::string want = ir::toString(p->type);
      if (p->type.isView()) {
        const std::string dtype = p->type.elem == ir::Elem::I32    ? "int32"
                                  : p->type.elem == ir::Elem::I64  ? "int64"
                                  : p->type.elem == ir::Elem::F16  ? "float16"
                                  : p->type.elem == ir::Elem::BF16 ? "uint16"
                                                                   : "float32";
        if (a.dtype != dtype)
          return fail(cmd, "--input " + spec + ": %" + name + " is " + want + " but the file holds " + a.dtype +
                               " data; a view<" + std::string(ir::elemName(p->type.elem)) + "> takes " + dtype);
        if (a.shape != p->type.shape())
          return fail(cmd, "--input " + spec + ": %" + name + " is " + want + " (shape " +
                               host::npyShapeText(p->type.shape()) + ") but the file holds " + dtype + " " +
                               host::npyShapeText(a.shape));
        if (dtype == "float32") {
          views[name] = std::move(a.f32);
        } else if (ir::isHalfStorage(p->type.elem)) {  // the values of the type, exactly, as f32
          std::vector<float>& v = views[name];
          for (uint16_t h : a.u16) v.push_back(p->type.elem == ir::Elem::F16 ? host::f16ToF32(h) : host::bf16ToF32(h));
        } else {
          ints[name] = std::move(a.i64);
        }
      } else {
        const bool i64 = p->type.elem == ir::Elem::I64;
        if (!a.shape.empty() || a.dtype != (i64 ? "int64" : "float32"))
          return fail(cmd, "--input " + spec + ": %" + name + " is a " + want + " scalar; the file must hold one " +
                               (i64 ? "int64" : "float32") + " of shape (), it holds " + a.dtype + " " +
                               host::npyShapeText(a.shape));
        char text[64];
        if (i64)
          std::snprintf(text, sizeof text, "%lld", static_cast<long long>(a.i64[0]));
        else
          std::snprintf(text, sizeof text, "%.9g", static_cast<double>(a.f32[0]));
        scalars[name] = text;
      }
    }
    for (const std::string& spec : outputs) {
      std::string name, path;
      if (!split(spec, cmd, "--output", name, path)) return false;
      bool written = false;
      std::string outs;
      for (const ir::Value* o : k.outputs()) {
        written = written || o->name == name;
        outs += (outs.empty() ? "%" : ", %") + o->name;
      }
      if (!written)
        return fail(cmd, "--output " + spec + ": %" + name + " is not an output of the kernel (" + outs + ")");
    }
    return true;
  }

  // Writes every --output from the parameters after the run. False after printing the error.
  bool store(const ir::Kernel& k, const char* cmd, const std::vector<host::ParamData>& params) const {
    for (const std::string& spec : outputs) {
      std::string name, path;
      if (!split(spec, cmd, "--output", name, path)) return false;
      const ir::Value* p = param(k, name);
      const host::ParamData& d = params.at(p->index);
      std::string bytes;
      if (ir::isIntegerStorage(p->type.elem)) {
        bytes = host::npyInts(p->type.shape(), d.ints, p->type.elem == ir::Elem::I32);
      } else if (ir::isHalfStorage(p->type.elem)) {
        const bool bf16 = p->type.elem == ir::Elem::BF16;
        std::vector<uint16_t> bits;
        for (float x : d.data) bits.push_back(bf16 ? host::f32ToBf16(x) : host::f32ToF16(x));
        bytes = host::npyHalves(p->type.shape(), bits, bf16);
      } else {
        bytes = host::npyF32(p->type.shape(), d.data);
      }
      if (auto e = jit::writeFile(path, bytes)) return fail(cmd, "--output " + spec + ": " + *e);
    }
    return true;
  }

 private:
  static bool fail(const char* cmd, const std::string& message) {
    std::cerr << "kiln " << cmd << ": error: " << message << '\n';
    return false;
  }
  static bool split(const std::string& spec, const char* cmd, const char* opt, std::string& name, std::string& path) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      return fail(cmd, std::string(opt) + " expects NAME=FILE.npy, got '" + spec + "'");
    name = spec.substr(0, eq);
    if (!name.empty() && name[0] == '%') name = name.substr(1);
    path = spec.substr(eq + 1);
    return true;
  }
  static const ir::Value* param(const ir::Kernel& k, const std::string& name) {
    for (const ir::Value* p : k.params)
      if (p->name == name) return p;
    return nullptr;
  }
  static std::string names(const ir::Kernel& k) {
    std::string s = "parameters:";
    for (const ir::Value* p : k.params) s += " %" + p->name;
    return s;
  }
};

}  // namespace kiln::cli
