"""Kiln from Python: compile tile kernels and run them on NumPy arrays and PyTorch tensors.

    import numpy as np, kiln
    k = kiln.library("rmsnorm", shape=(37, 4096))
    x = np.random.rand(37, 4096).astype(np.float32)
    w = np.ones(4096, np.float32)
    y = np.empty_like(x)
    k(x, w, y)              # or k(x=x, w=w, y=y); y is written in place and returned
    y2 = k(x, w)            # an omitted output is made (NumPy, or torch for tensors)

Arrays are borrowed, never copied (buffer protocol or DLPack); every argument is checked
first and a bad one raises TypeError or ValueError naming the parameter. docs/python.md says
it all; this module was built for the Python in kiln.PYTHON.
"""

import json as _json
import os as _os
import warnings as _warnings

import sys as _sys

from ._build import PYTHON  # the interpreter the module was built for (CMake writes it)

try:
    from ._kiln import KilnError, Param, __version__, use_object_cache  # noqa: F401
    from ._kiln import Kernel as _Kernel
    from ._kiln import _library_kernels
except ImportError as _e:  # another Python (another ABI) than the build's
    raise ImportError(
        f"kiln: the extension was built for {PYTHON}, this is {_sys.executable} "
        f"(Python {_sys.version.split()[0]}): run it with {PYTHON}, or rebuild with "
        f"cmake -DPython_EXECUTABLE=... ({_e})"
    ) from _e

__all__ = [
    "Kernel",
    "KilnError",
    "Param",
    "CheckResult",
    "library",
    "library_kernels",
    "eval",
    "check",
    "use_object_cache",
    "__version__",
]


def _options(options):
    """Library options as the CLI takes them: kv_cache=... -> kv-cache; True -> 'true'."""
    out = {}
    for key, value in options.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (tuple, list)):
            value = ",".join(str(v) for v in value)
        out[key.replace("_", "-")] = str(value)
    return out


def _from_text(text, knobs=None, name="<text>"):
    """Compiles a kernel written in TileIR text (docs/ir.md). `knobs`: {"isa": "avx2",
    "threads": 2, ...} (docs/backend.md). Errors raise KilnError ("NAME:LINE:COL: error: ...")."""
    return _Kernel._from_text(text, knobs, name)


def _from_file(path, knobs=None):
    """Compiles the TileIR file at `path`; its diagnostics name the file."""
    path = _os.fspath(path)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return _Kernel._from_text(text, knobs, path)


# A compiled kernel. Call it with one argument per parameter (positionally in the kernel's
# order, or by name): arrays for views, Python numbers for scalars; outputs are written in
# place. Several threads may call one kernel at once (the GIL is released during a launch).
Kernel = _Kernel
Kernel.from_text = staticmethod(_from_text)
Kernel.from_file = staticmethod(_from_file)
Kernel.report = property(lambda self: _json.loads(self._report_json), doc="the realization report, as a dict")


def library(name, shape, knobs=None, **options):
    """A kernel of Kiln's library by name and shape, e.g.
    kiln.library("attention", shape=(1, 8, 2, 1, 2053, 80, 96), mask="causal", split=16).
    `shape`: a tuple of ints or "1,8,2,..."; options are the CLI's kernel options (kv_cache for
    --kv-cache); `knobs` as for Kernel.from_text. kiln.library_kernels() lists the kernels."""
    if not isinstance(shape, str):
        shape = ",".join(str(int(s)) for s in shape)
    return _Kernel._library(name, shape, _options(options), knobs)


Kernel.library = staticmethod(library)


def library_kernels():
    """{name: shape fields} of every kernel in Kiln's library."""
    return _library_kernels()


def eval(kernel, *args, mode="f64", **named):  # noqa: A001 - the name the docs give it
    """Runs `kernel`'s IR on Kiln's interpreter instead of the compiled code, with the same
    arguments and checks as a call (omitted outputs are made), and writes the outputs in
    place. mode "strict-f32": float arithmetic in exactly the IR's order (precise-mode compiled
    code gives the same bits); returns the outputs as a call does. "f64": every operation in
    double (the FP64 oracle); the outputs receive the results rounded to float32, and what is
    returned for each float32 output is a new float64 array of the double results."""
    return kernel._evaluate(mode, *args, **named)


class CheckResult:
    """What kiln.check found: `passed` (also bool(result)), `mode`, and per output
    `outputs[name]` = {"mismatches", "max_abs_err", "max_rel_err", "first_bad"}."""

    def __init__(self, mode, outputs):
        self.mode = mode
        self.outputs = outputs
        self.passed = all(o["mismatches"] == 0 for o in outputs.values())

    def __bool__(self):
        return self.passed

    def __repr__(self):
        parts = ", ".join(f"{n}: {o['mismatches']} mismatches" for n, o in self.outputs.items())
        return f"CheckResult({'pass' if self.passed else 'FAIL'}, {self.mode}; {parts})"


def _as_numpy(x):
    import numpy as np

    if isinstance(x, np.ndarray):
        return x
    if type(x).__module__.startswith("torch") and str(getattr(x, "dtype", "")) == "torch.bfloat16":
        import torch

        return x.detach().view(torch.int16).numpy().view(np.uint16)  # NumPy holds bfloat16 as its bits
    try:
        memoryview(x)
        return np.asarray(x)
    except TypeError:
        pass
    if hasattr(x, "__dlpack__"):
        return np.from_dlpack(x)
    return x


def check(kernel, *args, mode="bitexact", atol=5e-5, rtol=5e-5, **named):
    """Runs the compiled kernel and the interpreter on copies of the given arguments (yours are
    not touched; omitted outputs are made) and compares every output: mode "bitexact" against
    strict-FP32 (identical bits, any NaN equal to any NaN), "f64" against the FP64 oracle
    within atol + rtol*|ref|."""
    import numpy as np

    if mode not in ("bitexact", "f64"):
        raise ValueError(f'mode {mode!r}: must be "bitexact" or "f64"')
    if mode == "bitexact" and kernel.report.get("knobs", {}).get("fast_math") in ("on", True):
        raise ValueError(f"kernel @{kernel.name}: fast_math is on, so its bits are not the interpreter's: check with mode='f64'")

    def copy(a):  # scalars as they are; arrays and tensors as fresh NumPy arrays
        return a if isinstance(a, (int, float, np.generic)) else np.array(_as_numpy(a), copy=True)

    def copies():
        return [copy(a) for a in args], {k: copy(v) for k, v in named.items()}

    run_args, run_named = copies()
    got_out = kernel(*run_args, **run_named)
    ref_args, ref_named = copies()
    ref_out = eval(kernel, *ref_args, mode="strict-f32" if mode == "bitexact" else "f64", **ref_named)
    written = [p for p in kernel.params if p.kind == "view" and p.is_output]
    if len(written) == 1:
        got_out, ref_out = (got_out,), (ref_out,)
    outputs = {}
    for p, g, r in zip(written, got_out, ref_out):
        g = _as_numpy(g).reshape(-1)
        r = _as_numpy(r).reshape(-1)
        err = None
        floating = p.dtype in ("float32", "float16", "bfloat16")
        if mode == "bitexact" or not floating:
            if floating:
                gv, rv = _float_values(p.dtype, g), _float_values(p.dtype, r)
                bits = np.uint32 if p.dtype == "float32" else np.uint16
                same_bits = g.view(bits) == r.view(bits)
                bad = ~(same_bits | (np.isnan(gv) & np.isnan(rv)))
                with np.errstate(invalid="ignore"):
                    err = np.abs(gv.astype(np.float64) - rv.astype(np.float64))
            else:
                bad = g != r
        else:
            g64 = _float_values(p.dtype, g).astype(np.float64)
            finite = np.isfinite(r) & np.isfinite(g64)
            with np.errstate(invalid="ignore"):
                err = np.where(finite, np.abs(g64 - r), 0.0)
            ok_finite = finite & ((err <= atol + rtol * np.abs(r)) | (err <= _storage_ulp(p.dtype, r)))
            if p.dtype in ("float16", "bfloat16"):  # an overflow to inf that rounding the reference gives too
                with np.errstate(over="ignore", invalid="ignore"):
                    r32 = r.astype(np.float32)
                    if p.dtype == "float16":
                        rounded = r32.astype(np.float16).astype(np.float64)
                    else:
                        u = r32.view(np.uint32).astype(np.uint64)
                        rounded = _float_values("bfloat16", ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16))
                ok_finite |= np.isfinite(r) & np.isinf(g64) & (g64 == rounded)
            same_class = ~np.isfinite(r) & ((np.isnan(r) & np.isnan(g64)) | (r == g64))
            bad = ~(ok_finite | same_class)
        outputs[p.name] = {"mismatches": int(bad.sum()), "first_bad": int(np.argmax(bad)) if bad.any() else -1}
        outputs[p.name].update(_errors(err, r))
    return CheckResult(mode, outputs)


def _float_values(dtype, a):
    """An output's values as float32 (bfloat16 bits decoded; float16 widened, exactly)."""
    import numpy as np

    if dtype == "bfloat16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32)


def _storage_ulp(dtype, ref):
    """One unit in the last place of a 16-bit output's type at |ref| (0 for float32): the
    compiled value is the f32 result rounded to the type, as docs/python.md says."""
    import numpy as np

    if dtype not in ("float16", "bfloat16"):
        return np.zeros_like(ref)
    mant, emin = (10, -14) if dtype == "float16" else (7, -126)
    _, e = np.frexp(np.abs(ref))
    return np.ldexp(1.0, np.maximum(e - 1, emin) - mant)


def _errors(err, ref):
    import numpy as np

    if err is None:
        return {"max_abs_err": 0.0, "max_rel_err": 0.0}
    fin = np.isfinite(err)
    if not fin.any():
        return {"max_abs_err": 0.0, "max_rel_err": 0.0}
    scale = np.abs(ref.astype(np.float64))[fin]
    rel = err[fin][scale > 0] / scale[scale > 0]
    return {"max_abs_err": float(err[fin].max()), "max_rel_err": float(rel.max()) if rel.size else 0.0}


# The object cache (docs/cache.md) is on as in the CLI: $KILN_CACHE_DIR (off turns it off),
# $XDG_CACHE_HOME/kiln or ~/.cache/kiln. kiln.use_object_cache(dir) changes it.
try:
    use_object_cache("")
except KilnError as _e:  # pragma: no cover - an unusable cache directory
    _warnings.warn(f"kiln: the object cache is off: {_e}")
