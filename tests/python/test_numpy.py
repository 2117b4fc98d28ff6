# import kiln on NumPy arrays: kernels from text, files and the library; bits against the
# interpreter and `kiln run --input/--output`; runtime lengths; knobs; threads; the object cache.
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import kiln
from conftest import SOURCE_DIR, attention_f64

SCALE_TEXT = """
kernel @scale_add(%x: view<f32>[3, 50], %s: f32, %y: view<f32>[3, 50]) {
  parallel (%r) in (3) {
    %t = load %x[%r, 0] as [_, e:50] fill 0 : f32[e:50]
    %u = mul %t, %s : f32[e:50]
    %one = const 1 : f32
    %v = add %u, %one : f32[e:50]
    store %v, %y[%r, 0] as [_, e:50]
  }
}
"""


def test_module_describes_itself():
    assert kiln.__version__
    kernels = kiln.library_kernels()
    assert kernels["attention"] == "B,Hq,Hkv,Q,K,D,Dv"
    assert "rmsnorm" in kernels and "gemm" in kernels
    assert kiln.PYTHON and os.path.exists(kiln.PYTHON)


def test_text_kernel_params_report_and_call(rng):
    k = kiln.Kernel.from_text(SCALE_TEXT, name="scale.tile")
    assert k.name == "scale_add"
    assert [p.name for p in k.params] == ["x", "s", "y"]
    x, s, y = k.params
    assert (x.kind, x.dtype, x.shape, x.is_input, x.is_output) == ("view", "float32", (3, 50), True, False)
    assert (s.kind, s.dtype, s.shape) == ("f32", "float32", ())
    assert (y.is_input, y.is_output, y.type) == (False, True, "f32[3,50]")
    assert "kernel @scale_add(%x: view<f32>[3, 50]" in k.text
    report = k.report
    assert isinstance(report, dict) and "knobs" in report and "target" in report
    xs = rng.standard_normal((3, 50), dtype=np.float32)
    out = np.zeros((3, 50), np.float32)
    assert k(xs, 0.5, out) is out  # a call returns its outputs (here the one given)
    np.testing.assert_array_equal(out, xs * np.float32(0.5) + np.float32(1))
    out2 = np.zeros_like(out)
    k(y=out2, x=xs, s=0.5)  # by name, any order
    np.testing.assert_array_equal(out2, out)
    out3 = np.zeros_like(out)
    k(xs, np.float32(0.5), **{"%y": out3})  # a NumPy scalar; a name with '%'
    np.testing.assert_array_equal(out3, out)


def test_from_file_and_eval_modes(rng):
    k = kiln.Kernel.from_file(SOURCE_DIR / "examples" / "elementwise.tile")
    x = rng.uniform(-4, 4, 1000).astype(np.float32)
    y = np.empty(1000, np.float32)
    k(x, y)
    strict = np.empty_like(y)
    assert kiln.eval(k, x, strict, mode="strict-f32") is strict
    assert y.tobytes() == strict.tobytes()  # precise mode = strict FP32, bit for bit
    f64 = np.empty_like(y)
    doubles = kiln.eval(k, x=x, y=f64)
    assert doubles.dtype == np.float64 and doubles.shape == (1000,)
    np.testing.assert_array_equal(f64, doubles.astype(np.float32))
    assert kiln.eval(k, x, mode="strict-f32").tobytes() == y.tobytes()  # an omitted output is made
    xd = x.astype(np.float64)
    gelu = 0.5 * xd * (1 + np.tanh(0.7978846 * (xd + 0.044715 * xd**3)))
    np.testing.assert_allclose(y, gelu, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("mask", ["causal", "none"])
def test_library_attention_against_numpy(rng, mask):
    shape = (1, 4, 2, 3, 37, 16, 24)
    k = kiln.library("attention", shape=shape, mask=mask)
    b, hq, hkv, m, n, d, dv = shape
    q = rng.standard_normal((b, hq, m, d), dtype=np.float32)
    kk = rng.standard_normal((b, hkv, n, d), dtype=np.float32)
    v = rng.standard_normal((b, hkv, n, dv), dtype=np.float32)
    o = np.full((b, hq, m, dv), np.nan, np.float32)
    k(q, kk, v, o)
    np.testing.assert_allclose(o, attention_f64(q, kk, v, causal=(mask == "causal")), rtol=1e-5, atol=1e-5)
    assert kiln.check(k, q, kk, v, o)  # bit-exact against strict FP32
    assert kiln.check(k, q, kk, v, o, mode="f64")
    assert k.report["library"]["heads"] == "stacked"  # the library's choices are in the report


def test_bits_equal_kiln_run_input_output(tmp_path, kiln_bin, rng):
    shape = "1,8,2,1,129,32,32"
    q = rng.standard_normal((1, 8, 1, 32), dtype=np.float32)
    kk = rng.standard_normal((1, 2, 129, 32), dtype=np.float32)
    v = rng.standard_normal((1, 2, 129, 32), dtype=np.float32)
    for name, a in (("q", q), ("k", kk), ("v", v)):
        np.save(tmp_path / f"{name}.npy", a)
    subprocess.run(
        [kiln_bin, "run", "--kernel", "attention", "--shape", shape, "--mask", "none", "--check", "bitexact"]
        + [f"--input={n}={tmp_path / n}.npy" for n in "qkv"]
        + [f"--output=o={tmp_path / 'o.npy'}"],
        check=True,
        capture_output=True,
    )
    o = np.zeros((1, 8, 1, 32), np.float32)
    kiln.library("attention", shape=shape, mask="none")(q, kk, v, o)
    assert o.tobytes() == np.load(tmp_path / "o.npy").tobytes()


def test_knobs_change_the_code_not_the_bits(rng):
    x = rng.standard_normal((37, 200), dtype=np.float32)
    w = rng.standard_normal(200, dtype=np.float32)
    outs = []
    for knobs in (None, {"isa": "avx2", "threads": 2}, {"packet_width": 8}, {"threads": 3, "fuse_recipes": False}):
        k = kiln.library("rmsnorm", shape=(37, 200), knobs=knobs, eps=1e-5)
        y = np.empty_like(x)
        k(x, w, y)
        outs.append(y.tobytes())
        if knobs and "threads" in knobs:
            assert k.threads == knobs["threads"]
    assert all(o == outs[0] for o in outs)


def test_runtime_lengths(rng):
    k = kiln.Kernel.from_file(SOURCE_DIR / "tests" / "ir" / "runtime_extents.tile")
    n_param = k.params[2]
    assert (n_param.kind, n_param.range) == ("i64", (0, 64))
    assert k.params[1].range == (0, 40) and k.params[1].dtype == "int32"
    x = rng.standard_normal((64, 40), dtype=np.float32)
    for n in (0, 5, 17, 64):
        lens = rng.integers(0, 41, 64, dtype=np.int32)
        y = np.full((64, 40), -7.0, np.float32)
        ref = y.copy()
        k(x, lens, n, y)
        kiln.eval(k, x, lens, n, ref, mode="strict-f32")
        assert y.tobytes() == ref.tobytes()
        written = 8 * -(-n // 8)
        assert np.all(y[written:] == -7.0)


def test_threads_launch_one_kernel_at_once(rng):
    k = kiln.library("attention", shape=(1, 8, 2, 1, 300, 32, 32), mask="none", knobs={"threads": 2})
    q = rng.standard_normal((1, 8, 1, 32), dtype=np.float32)
    kk = rng.standard_normal((1, 2, 300, 32), dtype=np.float32)
    v = rng.standard_normal((1, 2, 300, 32), dtype=np.float32)
    want = np.zeros((1, 8, 1, 32), np.float32)
    k(q, kk, v, want)
    errors = []

    def work():
        try:
            for _ in range(20):
                o = np.zeros_like(want)
                k(q, kk, v, o)
                if o.tobytes() != want.tobytes():
                    errors.append("different bits")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_object_cache_across_processes(tmp_path):
    env = dict(os.environ, KILN_CACHE_DIR=str(tmp_path / "cache"))
    script = (
        "import json, kiln\n"
        "k = kiln.library('softmax', shape=(13, 333))\n"
        "print(json.dumps(k.report['cache']))\n"
    )
    first = json.loads(subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True, text=True).stdout)
    second = json.loads(subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True, text=True).stdout)
    assert first["status"] == "miss" and second["status"] == "hit"


def test_aliasing_and_in_place_output():
    # The same array for an input and the output (the kernel reads x before it stores y).
    k = kiln.Kernel.from_text(SCALE_TEXT)
    x = np.arange(150, dtype=np.float32).reshape(3, 50)
    before = x.copy()
    k(x, 2.0, x)
    np.testing.assert_array_equal(x, before * 2 + 1)


def test_any_buffer_protocol_object():
    import array

    k = kiln.library("softmax", shape=(1, 5))
    with pytest.raises(ValueError, match=r"shape \(5,\) for a view of shape \(1, 5\)"):
        k(array.array("f", [1, 2, 3, 4, 5]), np.empty((1, 5), np.float32))
    y = np.empty((1, 5), np.float32)
    k(memoryview(np.arange(5, dtype=np.float32).reshape(1, 5)), y)
    e = np.exp(np.arange(5) - 4.0)
    np.testing.assert_allclose(y[0], e / e.sum(), rtol=1e-6)
    with pytest.raises(ValueError, match=r"%y.*read-only"):
        k(y.copy(), memoryview(bytes(20)).cast("f", (1, 5)))


TWO_OUTPUTS = """
kernel @sum_and_count(%x: view<f32>[4, 16], %lens: view<i32>[4] in [0, 16], %s: view<f32>[4], %c: view<i64>[4]) {
  parallel (%p) in (4) {
    %len = load %lens[%p] as [_] fill 0
    %z = const 0 : f32
    %t = serial %i = 0 to %len step 1 iter(%a = %z) : f32 {
      %e = load %x[%p, %i] as [_, _] fill 0
      %b = add %a, %e
      yield %b
    }
    store %t, %s[%p] as [_]
    %m = mul %len, 3000000000
    store %m, %c[%p] as [_]
  }
}
"""


def test_omitted_outputs_are_made_and_returned(rng):
    k = kiln.Kernel.from_text(TWO_OUTPUTS)
    x = rng.standard_normal((4, 16), dtype=np.float32)
    lens = np.array([0, 3, 16, 7], np.int32)
    s, c = k(x, lens)  # both outputs omitted: new zero-filled NumPy arrays, returned in order
    assert (s.dtype, s.shape, c.dtype, c.shape) == (np.float32, (4,), np.int64, (4,))
    np.testing.assert_array_equal(c, 3000000000 * lens.astype(np.int64))
    ascending = np.float32(0)
    for v in x[2]:  # the serial loop's order, in float32
        ascending = np.float32(ascending + v)
    assert s[0] == 0 and s[2] == ascending
    given = np.full(4, 9.0, np.float32)
    s2, c2 = k(x, lens, s=given)  # one given, one made
    assert s2 is given and s2.tobytes() == s.tobytes() and c2.tobytes() == c.tobytes()
    s3, c3 = kiln.eval(k, x, lens, mode="strict-f32")
    assert s3.tobytes() == s.tobytes() and c3.tobytes() == c.tobytes()
    s64, c64 = kiln.eval(k, x, lens)  # f64 mode: float outputs as float64, integer ones as they are
    assert s64.dtype == np.float64 and c64.dtype == np.int64
    assert kiln.check(k, x, lens)


def test_half_views_on_numpy_and_kiln_run(tmp_path, kiln_bin, rng):
    k = kiln.Kernel.from_file(SOURCE_DIR / "tests" / "ir" / "half_views.tile")
    assert [p.dtype for p in k.params][:2] == ["float16", "bfloat16"]
    kk = rng.standard_normal((6, 37)).astype(np.float16)
    v32 = rng.standard_normal((6, 37)).astype(np.float32)
    vbits = (v32.view(np.uint32) >> 16).astype(np.uint16)  # bfloat16 as NumPy holds it: its bits
    q = rng.standard_normal(37).astype(np.float32)
    s, w, d, col = k(kk, vbits, q)
    assert (s.dtype, w.dtype) == (np.float16, np.uint16)
    with np.errstate(over="ignore"):
        assert s[:, :37].tobytes() == (kk.astype(np.float32) * np.float32(30000)).astype(np.float16).tobytes()
    for name, a in (("k", kk), ("v", vbits), ("q", q)):
        np.save(tmp_path / f"{name}.npy", a)
    subprocess.run(
        [kiln_bin, "run", str(SOURCE_DIR / "tests" / "ir" / "half_views.tile"), "--check", "bitexact"]
        + [f"--input={n}={tmp_path / n}.npy" for n in "kvq"]
        + [f"--output={n}={tmp_path / n}_out.npy" for n in ("s", "w", "d")],
        check=True,
        capture_output=True,
    )
    assert np.load(tmp_path / "s_out.npy").tobytes() == s.tobytes()
    assert np.load(tmp_path / "w_out.npy").tobytes() == w.tobytes()
    assert np.load(tmp_path / "d_out.npy").tobytes() == d.tobytes()
    with pytest.raises(TypeError, match=r"%k: f16\[6,37\]\): an array of float32 for a view of float16"):
        k(kk.astype(np.float32), vbits, q)
