# import kiln on PyTorch CPU tensors (DLPack, zero-copy): outputs land in the tensor's own
# storage; bits equal the NumPy path; tensors Kiln cannot take are refused by name.
import numpy as np
import pytest

import kiln
from conftest import attention_f64

torch = pytest.importorskip("torch")


def test_attention_on_tensors_writes_the_tensor_storage():
    g = torch.Generator().manual_seed(7)
    shape = (2, 4, 2, 5, 70, 32, 16)
    b, hq, hkv, m, n, d, dv = shape
    q = torch.randn(b, hq, m, d, generator=g)
    k_ = torch.randn(b, hkv, n, d, generator=g)
    v = torch.randn(b, hkv, n, dv, generator=g)
    o = torch.zeros(b, hq, m, dv)
    storage = o.data_ptr()
    alias = o.numpy()  # shares o's memory
    kern = kiln.library("attention", shape=shape)
    assert kern(q, k_, v, o) is o
    assert o.data_ptr() == storage
    assert np.any(alias != 0)  # written in place: the NumPy view of o's storage sees it
    ref = attention_f64(q.numpy(), k_.numpy(), v.numpy(), causal=True)
    np.testing.assert_allclose(o.numpy(), ref, rtol=1e-5, atol=1e-5)
    # the same bits as NumPy arrays of the same data
    o_np = np.zeros((b, hq, m, dv), np.float32)
    kern(q.numpy(), k_.numpy(), v.numpy(), o_np)
    assert o_np.tobytes() == o.numpy().tobytes()
    # and as PyTorch's own attention (float32) within tolerance
    mask = torch.ones(m, n, dtype=torch.bool).tril(diagonal=n - m)
    kv = lambda t: t.repeat_interleave(hq // hkv, dim=1)  # noqa: E731
    s = (q @ kv(k_).transpose(-1, -2)) / d**0.5
    want = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1) @ kv(v)
    torch.testing.assert_close(o, want, rtol=1e-4, atol=1e-5)


def test_mixed_numpy_and_torch_and_integer_tensors():
    k = kiln.library("rmsnorm", shape=(7, 64))
    x = torch.randn(7, 64)
    w = np.ones(64, np.float32)
    y = torch.empty(7, 64)
    k(x, w, y)
    ref = x.double() / torch.sqrt((x.double() ** 2).mean(dim=1, keepdim=True) + 1e-6)
    torch.testing.assert_close(y.double(), ref, rtol=1e-5, atol=1e-6)
    assert kiln.check(k, x, w, y)


def test_tensor_errors_name_the_parameter():
    k = kiln.library("rmsnorm", shape=(7, 64))
    x, w, y = torch.randn(7, 64), torch.ones(64), torch.empty(7, 64)
    with pytest.raises(TypeError, match=r"argument 0 \(%x: f32\[7,64\]\): an array of float64 for a view of float32"):
        k(x.double(), w, y)
    with pytest.raises(TypeError, match=r"%w.*bfloat16"):
        k(x, w.bfloat16(), y)
    with pytest.raises(ValueError, match=r"%x.*shape \(64, 7\) for a view of shape \(7, 64\)"):
        k(torch.randn(64, 7), w, y)
    with pytest.raises(ValueError, match=r"%x.*not C-contiguous"):
        k(torch.randn(64, 7).t(), w, y)
    with pytest.raises(ValueError, match=r"%y.*not C-contiguous"):
        k(x, w, torch.empty(64, 7).t())
    with pytest.raises(TypeError, match=r"%x.*refused to export its memory through DLPack: RuntimeError: .*gradient"):
        k(torch.randn(7, 64, requires_grad=True), w, y)
    # a contiguous slice of a bigger tensor is fine (byte offset), a strided one is not
    big = torch.randn(10, 64)
    k(big[2:9], w, y)
    ref = torch.empty(7, 64)
    k(big[2:9].clone(), w, ref)
    assert torch.equal(y, ref)
    with pytest.raises(ValueError, match=r"not C-contiguous"):
        k(torch.randn(7, 128)[:, ::2], w, y)


def test_an_omitted_output_is_a_tensor_when_the_inputs_are():
    k = kiln.library("softmax", shape=(3, 40))
    x = torch.randn(3, 40)
    y = k(x)
    assert isinstance(y, torch.Tensor) and y.dtype == torch.float32 and y.shape == (3, 40)
    torch.testing.assert_close(y, torch.softmax(x, dim=1), rtol=1e-6, atol=1e-7)
    assert isinstance(k(x.numpy()), np.ndarray)


def test_half_views_take_float16_and_bfloat16_tensors():
    from conftest import SOURCE_DIR

    k = kiln.Kernel.from_file(SOURCE_DIR / "tests" / "ir" / "half_views.tile")
    kk = torch.randn(6, 37).half()
    v = torch.randn(6, 37).bfloat16()
    q = torch.randn(37)
    s, w, d, col = k(kk, v, q)  # omitted outputs: tensors of the views' types
    assert (s.dtype, w.dtype, d.dtype, col.dtype) == (torch.float16, torch.bfloat16, torch.float32, torch.float16)
    # f16 stores round like PyTorch's float32 -> float16 cast (nearest even, overflow to inf)
    want = (kk.float() * 30000).half()
    assert torch.equal(s[:, :37].view(torch.int16), want.view(torch.int16))
    assert torch.equal(w[:, :37].view(torch.int16), (kk.float() * v.float()).bfloat16().view(torch.int16))
    assert kiln.check(k, kk, v, q) and kiln.check(k, kk, v, q, mode="f64")
    with pytest.raises(TypeError, match=r"%v: bf16\[6,37\]\): an array of float16 for a view of bfloat16"):
        k(kk, v.half(), q)


@pytest.mark.parametrize("kv_dtype", ["bfloat16", "float16"])
def test_library_attention_with_16bit_kv_cache_is_the_f32_kernel_on_the_same_values(kv_dtype):
    # kv_dtype= is the library's --kv-dtype: K and V as torch 16-bit tensors, lengths at launch;
    # the result has the bits of the f32 kernel on the same values, and matches torch's own.
    g = torch.Generator().manual_seed(3)
    shape = (2, 8, 2, 1, 300, 64, 64)
    b, hq, hkv, m, n, d, dv = shape
    t = getattr(torch, kv_dtype)
    q = torch.randn(b, hq, m, d, generator=g)
    kc = torch.randn(b, hkv, n, d, generator=g).to(t)
    vc = torch.randn(b, hkv, n, dv, generator=g).to(t)
    lens = torch.tensor([300, 117], dtype=torch.int32)
    short = {"bfloat16": "bf16", "float16": "f16"}[kv_dtype]
    half = kiln.library("attention", shape=shape, kv_cache="dense", kv_dtype=short)
    assert [p.dtype for p in half.params][1:3] == [kv_dtype, kv_dtype]
    full = kiln.library("attention", shape=shape, kv_cache="dense")
    o16 = half(q, kc, vc, lens)
    o32 = full(q, kc.float(), vc.float(), lens)
    assert torch.equal(o16.view(torch.int32), o32.view(torch.int32))
    for i, ln in enumerate(lens.tolist()):
        kf = kc[i, :, :ln].float().repeat_interleave(hq // hkv, dim=0)
        vf = vc[i, :, :ln].float().repeat_interleave(hq // hkv, dim=0)
        p = torch.softmax(q[i] @ kf.transpose(1, 2) / d**0.5, dim=-1)
        torch.testing.assert_close(o16[i], p @ vf, rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match=r"%k"):
        half(q, kc.float(), vc, lens)
