// The Python extension `kiln._kiln` (docs/python.md), over the public C++ API only
// (include/kiln/kernel.h): compile, describe, launch and evaluate kernels on the caller's arrays.
// Arrays are borrowed for the call, never copied: through the buffer protocol (NumPy arrays,
// memoryviews, array.array) or DLPack (`__dlpack__`: PyTorch CPU tensors). Every argument is
// checked before anything runs (kind, element type, shape, C-contiguity, writability of outputs);
// the error names the parameter in Kiln's words. The GIL is released while a kernel compiles,
// launches or is evaluated. The Python-facing conveniences (keyword names, report as a dict,
// check) are in python/kiln/__init__.py.
#include <dlpack/dlpack.h>
#include <fmt/format.h>
#include <kiln/kiln.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

// An error of Kiln's (compile failure, a launch refused): kiln.KilnError, a ValueError.
PyObject* kiln_error = nullptr;

[[noreturn]] void raiseKiln(const std::string& message) {
  PyErr_SetString(kiln_error, message.c_str());
  throw py::error_already_set();
}

// The element type of a buffer or DLPack tensor, named as NumPy names dtypes.
struct Elem {
  char kind = '?';  // 'f' float, 'i' signed integer, 'u' unsigned, 'b' bfloat, 'o' other
  int bits = 0;
  std::string other;  // kind 'o': what it is
  std::string name() const {
    switch (kind) {
      case 'f': return fmt::format("float{}", bits);
      case 'i': return fmt::format("int{}", bits);
      case 'u': return fmt::format("uint{}", bits);
      case 'b': return fmt::format("bfloat{}", bits);
      default: return other;
    }
  }
};

Elem wanted(const kiln::Param& p) {
  switch (p.elem) {
    case kiln::Param::Elem::F32: return {'f', 32, ""};
    case kiln::Param::Elem::I32: return {'i', 32, ""};
    case kiln::Param::Elem::I64: return {'i', 64, ""};
    case kiln::Param::Elem::F16: return {'f', 16, ""};
    case kiln::Param::Elem::BF16: return {'b', 16, ""};
  }
  return {};
}

// Whether an array of `got` may serve a view of `p`'s type: the same type, or for a view<bf16>
// NumPy's stand-in, uint16 bits (NumPy has no bfloat16 of its own).
bool accepts(const kiln::Param& p, const Elem& got) {
  const Elem want = wanted(p);
  if (got.kind == want.kind && got.bits == want.bits) return true;
  return p.elem == kiln::Param::Elem::BF16 && got.kind == 'u' && got.bits == 16;
}

// A buffer-protocol format string ("f", "<i", "=q", ...) with its item size, as an Elem.
Elem fromFormat(const char* format, Py_ssize_t itemsize) {
  std::string f = format ? format : "B";
  if (!f.empty() && (f[0] == '@' || f[0] == '=' || f[0] == '<')) f.erase(0, 1);
  if (!f.empty() && (f[0] == '>' || f[0] == '!')) return {'o', 0, "big-endian " + f.substr(1)};
  const int bits = static_cast<int>(itemsize * 8);
  if (f.size() == 1) {
    switch (f[0]) {
      case 'e':
      case 'f':
      case 'd':
      case 'g': return {'f', bits, ""};
      case 'b':
      case 'h':
      case 'i':
      case 'l':
      case 'q':
      case 'n': return {'i', bits, ""};
      case 'B':
      case 'H':
      case 'I':
      case 'L':
      case 'Q':
      case 'N': return {'u', bits, ""};
      case '?': return {'o', 0, "bool"};
      default: break;
    }
  }
  return {'o', 0, "buffer format '" + f + "'"};
}

Elem fromDLPack(DLDataType t) {
  if (t.lanes != 1) return {'o', 0, fmt::format("{}-lane vectors", t.lanes)};
  switch (t.code) {
    case kDLFloat: return {'f', t.bits, ""};
    case kDLInt: return {'i', t.bits, ""};
    case kDLUInt: return {'u', t.bits == 8 ? 8 : t.bits, ""};
    case kDLBfloat: return {'b', t.bits, ""};
    case kDLComplex: return {'o', 0, fmt::format("complex{}", t.bits)};
    default: return {'o', 0, fmt::format("DLPack type code {}", static_cast<int>(t.code))};
  }
}

std::string shapeText(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

// One argument's memory, borrowed from its Python object until the call returns.
struct Borrowed {
  Py_buffer view{};
  bool has_view = false;
  py::object capsule;  // DLPack: the capsule owns the tensor; its destructor calls the deleter
  void* data = nullptr;
  std::vector<int64_t> shape;
  Elem elem;
  bool readonly = false;
  bool contiguous = true;

  Borrowed() = default;
  Borrowed(const Borrowed&) = delete;
  Borrowed& operator=(const Borrowed&) = delete;
  ~Borrowed() {
    if (has_view) PyBuffer_Release(&view);
  }
};

// The parameter's place in messages: "kernel @NAME, argument I (%P: TYPE)", as the C++ API says it.
std::string where(const kiln::Kernel& k, size_t i) {
  const kiln::Param& p = k.params()[i];
  return fmt::format("kernel @{}, argument {} (%{}: {})", k.name(), i, p.name, p.type());
}

std::string typeName(const py::handle& obj) {
  return py::str(py::type::handle_of(obj).attr("__qualname__"));
}

// Borrows the memory of `obj` for view parameter `i`; raises TypeError/ValueError naming it.
void borrow(const kiln::Kernel& k, size_t i, const py::handle& obj, Borrowed& b) {
  const std::string at = where(k, i);
  if (PyObject_CheckBuffer(obj.ptr())) {
    if (PyObject_GetBuffer(obj.ptr(), &b.view, PyBUF_RECORDS_RO) != 0) {
      PyErr_Clear();
      throw py::value_error(fmt::format("{}: the {} does not give its memory as a strided buffer", at, typeName(obj)));
    }
    b.has_view = true;
    b.data = b.view.buf;
    b.readonly = b.view.readonly != 0;
    b.elem = fromFormat(b.view.format, b.view.itemsize);
    for (int d = 0; d < b.view.ndim; ++d) b.shape.push_back(b.view.shape[d]);
    b.contiguous = PyBuffer_IsContiguous(&b.view, 'C') != 0;
    return;
  }
  if (!py::hasattr(obj, "__dlpack__"))
    throw py::type_error(fmt::format(
        "{}: expected an array (a NumPy array, a buffer or a tensor with __dlpack__) but got a {}", at, typeName(obj)));
  if (py::hasattr(obj, "__dlpack_device__")) {
    py::tuple dev = obj.attr("__dlpack_device__")();
    const int type = dev[0].cast<int>();
    if (type != kDLCPU)
      throw py::type_error(
          fmt::format("{}: the {} is on device type {} (DLPack), but Kiln runs kernels on the CPU's "
                      "memory: pass a CPU tensor (.cpu())",
                      at, typeName(obj), type));
  }
  try {
    b.capsule = obj.attr("__dlpack__")();
  } catch (py::error_already_set& e) {
    const std::string why = fmt::format("{}: {}", py::str(e.type().attr("__name__")).cast<std::string>(),
                                        py::str(e.value()).cast<std::string>());
    throw py::type_error(
        fmt::format("{}: the {} refused to export its memory through DLPack: {}", at, typeName(obj), why));
  }
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(b.capsule.ptr(), "dltensor"));
  if (!managed) {
    PyErr_Clear();
    throw py::type_error(fmt::format("{}: __dlpack__ of the {} did not return a DLPack capsule", at, typeName(obj)));
  }
  const DLTensor& t = managed->dl_tensor;
  if (t.device.device_type != kDLCPU)
    throw py::type_error(fmt::format("{}: the {} is not in CPU memory (DLPack device type {}); pass a CPU tensor", at,
                                     typeName(obj), static_cast<int>(t.device.device_type)));
  b.data = static_cast<char*>(t.data) + t.byte_offset;
  b.elem = fromDLPack(t.dtype);
  b.shape.assign(t.shape, t.shape + t.ndim);
  // DLPack has no read-only flag (0.6); PyTorch's tensors are writable.
  b.readonly = false;
  if (t.strides) {
    int64_t expect = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
      if (t.shape[d] != 1 && t.strides[d] != expect) b.contiguous = false;
      expect *= t.shape[d];
    }
  }
}

// The launch arguments for one call: `args` bound to the kernel's parameters in order.
struct Bound {
  std::vector<std::unique_ptr<Borrowed>> borrowed;
  std::vector<kiln::Arg> args;
  std::vector<py::object> objects;  // the argument of each parameter (an omitted output: Kiln's new array)
};

// The outputs of a call, in parameter order: one object, or a tuple of them.
py::object results(const std::vector<py::object>& outs) {
  if (outs.size() == 1) return outs[0];
  py::tuple t(outs.size());
  for (size_t i = 0; i < outs.size(); ++i) t[i] = outs[i];
  return t;
}

// A zero-filled array for an omitted output: a torch tensor when a view argument is one, else NumPy.
py::object newOutput(const kiln::Param& p, bool torch) {
  const bool bf16 = p.elem == kiln::Param::Elem::BF16;
  const char* dtype = p.elem == kiln::Param::Elem::F32   ? "float32"
                      : p.elem == kiln::Param::Elem::I32 ? "int32"
                      : p.elem == kiln::Param::Elem::F16 ? "float16"
                      : bf16                             ? (torch ? "bfloat16" : "uint16")  // NumPy: the bits
                                                         : "int64";
  py::tuple shape = py::tuple(py::cast(p.shape));
  if (torch) {
    py::module_ t = py::module_::import("torch");
    return t.attr("zeros")(*shape, py::arg("dtype") = t.attr(dtype));
  }
  return py::module_::import("numpy").attr("zeros")(shape, py::arg("dtype") = dtype);
}

bool isTorchTensor(const py::handle& obj) {
  if (PyObject_CheckBuffer(obj.ptr()) || !py::hasattr(obj, "__dlpack__")) return false;
  const std::string module = py::str(py::type::handle_of(obj).attr("__module__"));
  return module.rfind("torch", 0) == 0;
}

void bindOne(const kiln::Kernel& k, size_t i, const py::handle& obj, Bound& out) {
  const kiln::Param& p = k.params()[i];
  const std::string at = where(k, i);
  const bool is_bool = PyBool_Check(obj.ptr());
  if (p.kind == kiln::Param::Kind::I64) {
    if (is_bool || !PyIndex_Check(obj.ptr()))
      throw py::type_error(fmt::format("{}: expected an integer but got a {}", at, typeName(obj)));
    int overflow = 0;
    py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(obj.ptr()));
    if (!index) throw py::error_already_set();
    const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
    if (overflow != 0)
      throw py::value_error(fmt::format("{}: {} does not fit an i64", at, py::str(obj).cast<std::string>()));
    if (p.range && (v < p.range->first || v > p.range->second))
      throw py::value_error(
          fmt::format("{}: {} is outside its stated range [{}, {}]", at, v, p.range->first, p.range->second));
    out.args.push_back(kiln::Arg::i64(v));
    return;
  }
  if (p.kind == kiln::Param::Kind::F32) {
    // A Python float or int, or a NumPy scalar (numpy.float32(...)); not a bool, a string or an array.
    // (leaked on purpose: a static py::object would be released after the interpreter is gone)
    static const py::handle numpy_number = py::object(py::module_::import("numpy").attr("number")).release();
    const bool number =
        PyFloat_Check(obj.ptr()) || (PyLong_Check(obj.ptr()) && !is_bool) || py::isinstance(obj, numpy_number);
    if (!number) throw py::type_error(fmt::format("{}: expected a number but got a {}", at, typeName(obj)));
    const double v = PyFloat_AsDouble(obj.ptr());
    if (v == -1.0 && PyErr_Occurred()) throw py::error_already_set();
    out.args.push_back(kiln::Arg::f32(static_cast<float>(v)));  // rounded to nearest f32
    return;
  }
  auto b = std::make_unique<Borrowed>();
  borrow(k, i, obj, *b);
  if (!accepts(p, b->elem))
    throw py::type_error(fmt::format("{}: an array of {} for a view of {}{}", at, b->elem.name(), wanted(p).name(),
                                     p.elem == kiln::Param::Elem::BF16 ? " (or its bits as uint16)" : ""));
  if (b->shape != p.shape)
    throw py::value_error(
        fmt::format("{}: an array of shape {} for a view of shape {}", at, shapeText(b->shape), shapeText(p.shape)));
  if (!b->contiguous)
    throw py::value_error(
        fmt::format("{}: the array is not C-contiguous (a transposed or sliced view); pass numpy.ascontiguousarray(x) "
                    "or x.contiguous()",
                    at));
  if (p.written && b->readonly)
    throw py::value_error(fmt::format("{}: the kernel writes this parameter but the array is read-only", at));
  if (!b->data && p.elements() > 0) throw py::value_error(at + ": the array has no memory");
  const size_t n = static_cast<size_t>(p.elements());
  switch (p.elem) {
    case kiln::Param::Elem::F32:
      out.args.push_back(p.written ? kiln::Arg::output(static_cast<float*>(b->data), n)
                                   : kiln::Arg::input(static_cast<const float*>(b->data), n));
      break;
    case kiln::Param::Elem::I32:
      out.args.push_back(p.written
                             ? kiln::Arg::output(std::span<int32_t>(static_cast<int32_t*>(b->data), n))
                             : kiln::Arg::input(std::span<const int32_t>(static_cast<const int32_t*>(b->data), n)));
      break;
    case kiln::Param::Elem::I64:
      out.args.push_back(p.written
                             ? kiln::Arg::output(std::span<int64_t>(static_cast<int64_t*>(b->data), n))
                             : kiln::Arg::input(std::span<const int64_t>(static_cast<const int64_t*>(b->data), n)));
      break;
    case kiln::Param::Elem::F16:
    case kiln::Param::Elem::BF16: {
      auto* bits = static_cast<uint16_t*>(b->data);
      const bool bf16 = p.elem == kiln::Param::Elem::BF16;
      out.args.push_back(p.written ? (bf16 ? kiln::Arg::outputBF16({bits, n}) : kiln::Arg::outputF16({bits, n}))
                                   : (bf16 ? kiln::Arg::inputBF16({bits, n}) : kiln::Arg::inputF16({bits, n})));
      break;
    }
  }
  out.borrowed.push_back(std::move(b));
}

std::string paramList(const kiln::Kernel& k) {
  std::vector<std::string> names;
  for (const kiln::Param& p : k.params()) names.push_back(p.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

// Positional arguments first, then keywords by parameter name (with or without '%').
void bind(const kiln::Kernel& k, const py::args& args, const py::kwargs& kwargs, Bound& out) {
  const std::vector<kiln::Param>& ps = k.params();
  if (args.size() > ps.size())
    throw py::type_error(fmt::format("kernel @{} takes {} arguments ({}) but {} were given", k.name(), ps.size(),
                                     paramList(k), args.size()));
  std::vector<py::handle> slots(ps.size());
  for (size_t i = 0; i < args.size(); ++i) slots[i] = args[i];
  for (auto [key, value] : kwargs) {
    std::string name = py::str(key);
    if (!name.empty() && name[0] == '%') name.erase(0, 1);
    size_t i = 0;
    while (i < ps.size() && ps[i].name != name) ++i;
    if (i == ps.size())
      throw py::type_error(
          fmt::format("kernel @{} has no parameter '{}'; its parameters are {}", k.name(), name, paramList(k)));
    if (slots[i]) throw py::type_error(fmt::format("{}: given twice (by position and by name)", where(k, i)));
    slots[i] = value;
  }
  // An omitted output (a view the kernel writes and does not read) is made here; anything else
  // omitted is an error.
  std::vector<std::string> missing;
  size_t given = 0;
  bool torch = false;
  for (size_t i = 0; i < ps.size(); ++i) {
    if (slots[i]) {
      ++given;
      torch = torch || (ps[i].kind == kiln::Param::Kind::View && isTorchTensor(slots[i]));
    } else if (ps[i].kind != kiln::Param::Kind::View || ps[i].read) {
      missing.push_back(fmt::format("%{}: {}", ps[i].name, ps[i].type()));
    }
  }
  if (!missing.empty())
    throw py::type_error(fmt::format("kernel @{} takes {} arguments but {} were given; missing {}", k.name(), ps.size(),
                                     given, fmt::join(missing, ", ")));
  for (size_t i = 0; i < ps.size(); ++i) {
    out.objects.push_back(slots[i] ? py::reinterpret_borrow<py::object>(slots[i]) : newOutput(ps[i], torch));
    bindOne(k, i, out.objects.back(), out);
  }
}

// The objects of the views the kernel writes, in parameter order.
std::vector<py::object> writtenViews(const kiln::Kernel& k, const Bound& b) {
  std::vector<py::object> outs;
  for (size_t i = 0; i < k.params().size(); ++i)
    if (k.params()[i].kind == kiln::Param::Kind::View && k.params()[i].written) outs.push_back(b.objects[i]);
  return outs;
}

kiln::Options knobsFrom(const py::object& knobs) {
  kiln::Options o;
  if (knobs.is_none()) return o;
  if (!py::isinstance<py::dict>(knobs))
    throw py::type_error(fmt::format("knobs must be a dict (name -> value), got a {}", typeName(knobs)));
  for (auto [key, value] : knobs.cast<py::dict>()) {
    std::string v;
    if (PyBool_Check(value.ptr()))
      v = value.ptr() == Py_True ? "on" : "off";
    else
      v = py::str(value);
    o.set(py::str(key), v);
  }
  return o;
}

kiln::Kernel take(kiln::Result<kiln::Kernel> r) {
  if (!r) raiseKiln(r.message());
  return std::move(r).value();
}

const char* kindText(kiln::Param::Kind k) {
  switch (k) {
    case kiln::Param::Kind::View: return "view";
    case kiln::Param::Kind::I64: return "i64";
    case kiln::Param::Kind::F32: return "f32";
  }
  return "view";
}

std::string dtypeText(const kiln::Param& p) {
  if (p.kind == kiln::Param::Kind::I64) return "int64";
  if (p.kind == kiln::Param::Kind::F32) return "float32";
  return wanted(p).name();
}

}  // namespace

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "Kiln's compiled core (import kiln, not this)";
  kiln_error = PyErr_NewExceptionWithDoc("kiln.KilnError",
                                         "An error of Kiln's: a kernel that does not compile, a launch it refused.",
                                         PyExc_ValueError, nullptr);
  m.add_object("KilnError", py::handle(kiln_error));
  m.attr("__version__") = kiln::version();

  py::class_<kiln::Param>(m, "Param", "One parameter of a kernel")
      .def_readonly("name", &kiln::Param::name)
      .def_property_readonly("kind", [](const kiln::Param& p) { return kindText(p.kind); })
      .def_property_readonly("dtype", &dtypeText, "the NumPy dtype an argument must have")
      .def_property_readonly("shape", [](const kiln::Param& p) { return py::tuple(py::cast(p.shape)); })
      .def_property_readonly("type", &kiln::Param::type, "as Kiln writes it: f32[512,4096], i32[8], i64")
      .def_readonly("is_input", &kiln::Param::read, "the kernel reads it")
      .def_readonly("is_output", &kiln::Param::written, "the kernel writes it")
      .def_readonly("range", &kiln::Param::range, "the stated range (lo, hi), inclusive, or None")
      .def_readonly("ascending", &kiln::Param::ascending,
                    "an integer view whose stated range is ascending: no element below the one before it")
      .def("__repr__", [](const kiln::Param& p) {
        const char* io = p.read && p.written ? "in/out" : p.written ? "out" : "in";
        return fmt::format("Param(%{}: {}, {})", p.name, p.type(), io);
      });

  py::class_<kiln::Kernel>(m, "Kernel", "A compiled kernel (see docs/python.md)")
      .def_static(
          "_from_text",
          [](const std::string& text, const py::object& knobs, const std::string& name) {
            kiln::Options o = knobsFrom(knobs);
            kiln::Result<kiln::Kernel> r = kiln::Error("");
            {
              py::gil_scoped_release nogil;
              r = kiln::Kernel::fromText(text, o, name);
            }
            return take(std::move(r));
          },
          py::arg("text"), py::arg("knobs") = py::none(), py::arg("name") = "<text>")
      .def_static("_library",
                  [](const std::string& name, const std::string& shape,
                     const std::map<std::string, std::string>& options, const py::object& knobs) {
                    kiln::Options o = knobsFrom(knobs);
                    kiln::Result<kiln::Kernel> r = kiln::Error("");
                    {
                      py::gil_scoped_release nogil;
                      r = kiln::Kernel::library(name, shape, options, o);
                    }
                    return take(std::move(r));
                  })
      .def_property_readonly("name", &kiln::Kernel::name)
      .def_property_readonly("params", &kiln::Kernel::params)
      .def_property_readonly("threads", &kiln::Kernel::threads)
      .def_property_readonly("text", &kiln::Kernel::text, "the kernel's canonical TileIR")
      .def_property_readonly("_report_json", &kiln::Kernel::report)
      .def("__call__",
           [](const kiln::Kernel& k, const py::args& args, const py::kwargs& kwargs) {
             Bound b;
             bind(k, args, kwargs, b);
             kiln::Status s;
             {
               py::gil_scoped_release nogil;
               s = k.launch(b.args);
             }
             if (!s) raiseKiln(s.message());
             return results(writtenViews(k, b));
           })
      .def("_evaluate",
           [](const kiln::Kernel& k, const std::string& mode, const py::args& args, const py::kwargs& kwargs) {
             kiln::EvalMode m;
             if (mode == "f64")
               m = kiln::EvalMode::F64;
             else if (mode == "strict-f32")
               m = kiln::EvalMode::StrictF32;
             else
               throw py::value_error(fmt::format("mode '{}': must be \"f64\" or \"strict-f32\"", mode));
             Bound b;
             bind(k, args, kwargs, b);
             std::vector<std::vector<double>> doubles;
             kiln::Status s;
             {
               py::gil_scoped_release nogil;
               s = k.evaluate(b.args, m, &doubles);
             }
             if (!s) raiseKiln(s.message());
             // The outputs as a call returns them; in f64 mode a float32 view's are its double results.
             std::vector<py::object> outs;
             for (size_t i = 0; i < k.params().size(); ++i) {
               const kiln::Param& p = k.params()[i];
               if (p.kind != kiln::Param::Kind::View || !p.written) continue;
               if (m == kiln::EvalMode::F64 && p.elem != kiln::Param::Elem::I32 && p.elem != kiln::Param::Elem::I64) {
                 py::array_t<double> a(p.shape);
                 std::memcpy(a.mutable_data(), doubles[i].data(), doubles[i].size() * sizeof(double));
                 outs.push_back(std::move(a));
               } else {
                 outs.push_back(b.objects[i]);
               }
             }
             return results(outs);
           })
      .def("__repr__", [](const kiln::Kernel& k) {
        std::vector<std::string> ps;
        for (const kiln::Param& p : k.params()) ps.push_back(fmt::format("%{}: {}", p.name, p.type()));
        return fmt::format("<kiln.Kernel @{}({})>", k.name(), fmt::join(ps, ", "));
      });

  m.def("_library_kernels", []() {
    py::dict out;
    for (const auto& [name, fields] : kiln::Kernel::libraryKernels()) out[py::str(name)] = fields;
    return out;
  });
  m.def(
      "use_object_cache",
      [](const std::string& dir, int64_t max_megabytes) {
        kiln::Status s = kiln::useObjectCache(dir, max_megabytes);
        if (!s) raiseKiln(s.message());
      },
      py::arg("dir") = "", py::arg("max_megabytes") = 512,
      "Turns on the on-disk object cache (docs/cache.md): dir '' takes it from the environment as the CLI does "
      "($KILN_CACHE_DIR, ...), 'off' turns it off.");
}
