# Every bad call raises a Python exception that names what is wrong and where; none crashes
# the interpreter, none writes an output.
import numpy as np
import pytest

import kiln
from conftest import SOURCE_DIR

TEXT = """
kernel @axpy(%x: view<f32>[4, 8], %a: f32, %n: i64 in [0, 4], %y: view<f32>[4, 8]) {
  parallel (%r) in (4) {
    %t = load %x[%r, 0] as [_, e:8] fill 0 : f32[e:8]
    %u = mul %t, %a : f32[e:8]
    %nf = cast %n : f32
    %v = add %u, %nf : f32[e:8]
    store %v, %y[%r, 0] as [_, e:8]
  }
}
"""


@pytest.fixture
def k():
    return kiln.Kernel.from_text(TEXT)


@pytest.fixture
def args():
    return np.ones((4, 8), np.float32), 2.0, 3, np.zeros((4, 8), np.float32)


def test_a_good_call(k, args):
    x, a, n, y = args
    k(x, a, n, y)
    assert np.all(y == 5.0)


@pytest.mark.parametrize(
    "change, error, pattern",
    [
        (lambda a: (a[0].astype(np.float64),) + a[1:], TypeError, r"argument 0 \(%x: f32\[4,8\]\): an array of float64 for a view of float32"),
        (lambda a: (a[0].astype(np.int32),) + a[1:], TypeError, r"%x.*int32 for a view of float32"),
        (lambda a: (a[0].astype(">f4"),) + a[1:], TypeError, r"%x.*big-endian"),
        (lambda a: (a[0].reshape(8, 4),) + a[1:], ValueError, r"%x.*shape \(8, 4\) for a view of shape \(4, 8\)"),
        (lambda a: (a[0].reshape(32),) + a[1:], ValueError, r"%x.*shape \(32,\)"),
        (lambda a: (np.ones((8, 4), np.float32).T,) + a[1:], ValueError, r"%x.*not C-contiguous"),
        (lambda a: (np.ones((4, 16), np.float32)[:, ::2],) + a[1:], ValueError, r"%x.*not C-contiguous"),
        (lambda a: ([[1.0] * 8] * 4,) + a[1:], TypeError, r"%x.*expected an array.*got a list"),
        (lambda a: (None,) + a[1:], TypeError, r"%x.*got a NoneType"),
        (lambda a: a[:1] + ("2",) + a[2:], TypeError, r"argument 1 \(%a: f32\): expected a number but got a str"),
        (lambda a: a[:1] + (True,) + a[2:], TypeError, r"%a.*got a bool"),
        (lambda a: a[:1] + (np.ones(1, np.float32),) + a[2:], TypeError, r"%a.*expected a number"),
        (lambda a: a[:2] + (2.5,) + a[3:], TypeError, r"argument 2 \(%n: i64\): expected an integer but got a float"),
        (lambda a: a[:2] + (5,) + a[3:], ValueError, r"%n.*5 is outside its stated range \[0, 4\]"),
        (lambda a: a[:2] + (2**70,) + a[3:], ValueError, r"%n.*does not fit an i64"),
        (lambda a: a[:3] + (np.zeros((4, 8), np.float32)[::-1],), ValueError, r"%y.*not C-contiguous"),
    ],
)
def test_bad_argument(k, args, change, error, pattern):
    bad = change(args)
    y = bad[3] if isinstance(bad[3], np.ndarray) else None
    with pytest.raises(error, match=pattern):
        k(*bad)
    if y is not None and y.flags.c_contiguous:
        assert np.all(y == 0)  # nothing was written


def test_read_only_output(k, args):
    x, a, n, y = args
    y.setflags(write=False)
    with pytest.raises(ValueError, match=r"argument 3 \(%y: f32\[4,8\]\): the kernel writes this parameter but the array is read-only"):
        k(x, a, n, y)
    ro = np.frombuffer(bytes(128), np.float32).reshape(4, 8)
    with pytest.raises(ValueError, match=r"%y.*read-only"):
        k(x, a, n, ro)
    x.setflags(write=False)
    k(x, a, n, np.zeros((4, 8), np.float32))  # a read-only input is fine


def test_argument_count_and_names(k, args):
    x, a, n, y = args
    with pytest.raises(TypeError, match=r"kernel @axpy takes 4 arguments but 2 were given; missing %n: i64$"):
        k(x, a)  # (the output %y may be omitted: it is made and returned)
    with pytest.raises(TypeError, match=r"takes 4 arguments \(x, a, n, y\) but 5 were given"):
        k(x, a, n, y, y)
    with pytest.raises(TypeError, match=r"has no parameter 'z'; its parameters are x, a, n, y"):
        k(x, a, n, z=y)
    with pytest.raises(TypeError, match=r"argument 0 \(%x: f32\[4,8\]\): given twice"):
        k(x, a, n, y, x=x)
    with pytest.raises(TypeError, match=r"missing %x: f32\[4,8\], %a: f32, %n: i64$"):
        k()
    with pytest.raises(TypeError, match=r"missing %x"):
        k(a=a, n=n, y=y)


def test_eval_and_check_take_the_same_checks(k, args):
    x, a, n, y = args
    with pytest.raises(TypeError, match=r"%x.*float64"):
        kiln.eval(k, x.astype(np.float64), a, n, y)
    with pytest.raises(ValueError, match=r'mode .f32.: must be "f64" or "strict-f32"'):
        kiln.eval(k, x, a, n, y, mode="f32")
    with pytest.raises(ValueError, match=r"%n.*outside its stated range"):
        kiln.eval(k, x, a, 9, y)
    with pytest.raises(ValueError, match=r'must be "bitexact" or "f64"'):
        kiln.check(k, x, a, n, y, mode="exact")
    assert kiln.check(k, x, a, n, y)
    assert np.all(y == 0)  # check works on copies


def test_compile_errors():
    with pytest.raises(kiln.KilnError, match=r"^mine\.tile:1:8: error: expected the kernel name"):
        kiln.Kernel.from_text("kernel oops", name="mine.tile")
    assert issubclass(kiln.KilnError, ValueError)
    with pytest.raises(kiln.KilnError, match=r"packet_width"):
        kiln.Kernel.from_text(TEXT, knobs={"packet_width": 5})
    with pytest.raises(kiln.KilnError, match=r"no_such_knob"):
        kiln.Kernel.from_text(TEXT, knobs={"no_such_knob": 1})
    with pytest.raises(TypeError, match=r"knobs must be a dict"):
        kiln.Kernel.from_text(TEXT, knobs=[("threads", 2)])
    with pytest.raises(kiln.KilnError, match=r"nosuch"):
        kiln.library("nosuch", shape=(1, 2))
    with pytest.raises(kiln.KilnError, match=r"--mask"):
        kiln.library("attention", shape=(1, 8, 2, 1, 64, 32, 32), mask="sideways")
    with pytest.raises(kiln.KilnError):
        kiln.library("attention", shape=(1, 8))
    with pytest.raises(FileNotFoundError):
        kiln.Kernel.from_file(SOURCE_DIR / "no" / "such.tile")


def test_a_length_outside_its_range_is_refused_by_the_launch():
    k = kiln.Kernel.from_file(SOURCE_DIR / "tests" / "ir" / "runtime_extents.tile")
    x, y = np.zeros((64, 40), np.float32), np.full((64, 40), 3.0, np.float32)
    lens = np.zeros(64, np.int32)
    lens[5] = 41
    with pytest.raises(kiln.KilnError, match=r"kernel @rows: parameter 'lens' \(#1\): element 5 is 41, outside its stated range \[0, 40\]"):
        k(x, lens, 8, y)
    assert np.all(y == 3.0)


def test_cu_seqlens_that_decrease_are_refused_by_the_launch():
    k = kiln.library("attention", shape=(2, 4, 2, 8, 32, 16, 16), kv_cache="dense", varlen=True)
    cu = [p for p in k.params if p.name == "cu_seqlens"][0]
    assert cu.range == (0, 8) and cu.ascending
    q, o = np.ones((8, 4, 16), np.float32), np.full((8, 4, 16), 3.0, np.float32)
    kv = np.ones((2, 2, 32, 16), np.float32)
    lens = np.array([20, 30], np.int32)
    with pytest.raises(kiln.KilnError, match=r"parameter 'cu_seqlens' \(#4\): element 2 is 2, below element 1 \(5\); its stated range is ascending"):
        k(q, kv, kv, lens, np.array([0, 5, 2], np.int32), o)
    assert np.all(o == 3.0)
    k(q, kv, kv, lens, np.array([0, 5, 8], np.int32), o)
    assert np.all(o == 1.0)
