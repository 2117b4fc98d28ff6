# The Llama example end to end (examples/llama, docs/llama.md): the small configuration on
# Kiln's kernels against the same model in NumPy float64, its kernels compiled once, the
# output tokens the same on every thread count and ISA, and the safetensors layout.
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import kiln
from conftest import SOURCE_DIR

sys.path.insert(0, str(SOURCE_DIR / "examples" / "llama"))
import kiln_model  # noqa: E402
import reference  # noqa: E402
import weights as W  # noqa: E402

# The sanitizer tree (tests/CMakeLists.txt) runs the C++ under ASan and UBSan: there one knob set
# beside the default exercises the same launches; every set, and so the bits on every thread
# count and ISA, is the release tree's.
SANITIZED = os.environ.get("KILN_SANITIZED") == "1"


def knob_sets(*sets):
    return sets[:2] if SANITIZED else sets


CONFIG = SOURCE_DIR / "examples" / "llama" / "configs" / "small.json"
TOL = 1e-4  # per step: max |kiln - ref| <= TOL * max(1, max |ref|); measured about 1.3e-6


@pytest.fixture(scope="module")
def cfg():
    return W.load_config(CONFIG)


@pytest.fixture(scope="module")
def weights(cfg):
    return W.generate(cfg, seed=3)


def prompts_of(cfg, lengths, seed=5):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, cfg["vocab"], n).tolist() for n in lengths]


def run_pair(model, ref, prompts, steps):
    """Kiln and the reference on the same prompts; the reference is fed Kiln's tokens, so the
    logits are compared at every step. Returns both logits [steps+1, B, vocab] and both
    greedy token sequences."""
    kl, rl = [model.prefill(prompts)], [ref.prefill(prompts)]
    kt, rt = [kl[0].argmax(-1)], [rl[0].argmax(-1)]
    for _ in range(steps):
        kl.append(model.decode(kt[-1]))
        rl.append(ref.decode(kt[-1]))
        kt.append(kl[-1].argmax(-1))
        rt.append(rl[-1].argmax(-1))
    return np.stack(kl), np.stack(rl), np.stack(kt, 1), np.stack(rt, 1)


def assert_close(kl, rl):
    for step in range(kl.shape[0]):
        err = np.abs(kl[step] - rl[step]).max()
        bound = TOL * max(1.0, np.abs(rl[step]).max())
        assert err <= bound, f"step {step}: logits differ by {err} (bound {bound})"


@pytest.fixture
def count_compiles(monkeypatch):
    """Counts the kernels compiled in this process from here on (kiln.library is how the model
    makes every kernel)."""
    made = []
    real = kiln.library

    def counting(name, shape, knobs=None, **options):
        made.append((name, tuple(shape), tuple(sorted((knobs or {}).items())), tuple(sorted(options.items()))))
        return real(name, shape, knobs, **options)

    monkeypatch.setattr(kiln_model.kiln, "library", counting)
    return made


def test_small_model_matches_float64_for_32_decode_steps_and_compiles_each_kernel_once(cfg, weights, count_compiles):
    # Three prompts of different lengths in one varlen batch, then 32 decode steps.
    model = kiln_model.KilnLlama(cfg, weights)
    built = len(count_compiles)
    assert built == len(model.kernels) == len(set(count_compiles)), "a kernel was compiled twice"
    ref = reference.Reference(cfg, weights, "numpy-f64")
    kl, rl, kt, rt = run_pair(model, ref, prompts_of(cfg, [12, 5, 30]), 32)
    assert len(count_compiles) == built, "a kernel was compiled while generating"
    assert_close(kl, rl)
    np.testing.assert_array_equal(kt, rt)
    assert len(set(kt[0].tolist())) > 1, "a degenerate model: one token over and over"
    # The same model serves a second batch of another shape without compiling.
    kl2, rl2, _, _ = run_pair(model, ref, prompts_of(cfg, [1, 64, 7, 40], seed=9), 4)
    assert_close(kl2, rl2)
    # One sequence alone decodes through the one-row GEMMs: the bits it has in the batch.
    kl3, _, kt3, _ = run_pair(model, ref, prompts_of(cfg, [12, 5, 30])[:1], 8)
    np.testing.assert_array_equal(kt3[0], kt[0][:9])
    assert np.array_equal(kl3[:, 0].view(np.uint32), kl[:9, 0].view(np.uint32)), "alone, other logit bits"
    assert len(count_compiles) == built


def test_bf16_weights_match_float64_on_the_rounded_weights(cfg, weights):
    model = kiln_model.KilnLlama(cfg, weights, weight_dtype="bf16")
    ref = reference.Reference(cfg, weights, "numpy-f64", weight_dtype="bf16")
    prompts = prompts_of(cfg, [9, 20])
    kl, rl, kt, rt = run_pair(model, ref, prompts, 16)
    assert_close(kl, rl)
    np.testing.assert_array_equal(kt, rt)
    # The weights really are bf16: the f32 model's logits are farther away than the tolerance.
    f32 = reference.Reference(cfg, weights, "numpy-f64").prefill(prompts)
    assert np.abs(kl[0] - f32).max() > 10 * TOL * max(1.0, np.abs(f32).max())


@pytest.mark.parametrize("order", ["bf16_dot", "bf16_pairs"])
def test_bf16_gemm_orders_match_float64_and_are_the_same_on_every_thread_count_and_isa(cfg, weights, order):
    # Every projection in the bf16 dot order (activations rounded to bf16, AMX's arithmetic), or
    # the bf16 pairs order (VDPBF16PS's, which AVX-512 code runs where the CPU has AVX512-BF16):
    # against float64 on the same bf16 activations, within bf16's precision (an activation whose
    # f32 and f64 values round to neighbouring bf16 values moves a logit by about 2^-9 of a
    # term: measured 3.7e-3 of max |logit|), the same greedy tokens; and the same bits at 1 and 2
    # threads and on AVX2 code, whose GEMMs run the order's steps on vectors with the weights
    # K x N, where an AMX host runs AMX tiles with them N x K (docs/llama.md).
    model = kiln_model.KilnLlama(cfg, weights, weight_dtype="bf16", gemm_order=order)
    prompts = prompts_of(cfg, [9, 20])
    ref = reference.Reference(cfg, weights, "numpy-f64", weight_dtype="bf16", gemm_order=order)
    kl, rl, kt, rt = run_pair(model, ref, prompts, 8)
    np.testing.assert_array_equal(kt, rt)
    for step in range(kl.shape[0]):
        assert np.abs(kl[step] - rl[step]).max() <= 2e-2 * max(1.0, np.abs(rl[step]).max()), f"step {step}"
    runs = {}
    for knobs in knob_sets({}, {"threads": 2}, {"isa": "avx2"}):
        m = kiln_model.KilnLlama(cfg, weights, weight_dtype="bf16", gemm_order=order, knobs=knobs)
        runs[str(knobs)] = kiln_model.generate(m, prompts, 6)
    base_tokens, base_logits = runs["{}"]
    for name, (tokens, logits) in runs.items():
        np.testing.assert_array_equal(tokens, base_tokens, err_msg=name)
        assert np.array_equal(logits.view(np.uint32), base_logits.view(np.uint32)), f"{name}: logits differ in bits"


def test_tokens_and_logits_are_the_same_on_every_thread_count_and_isa(cfg, weights):
    prompts = prompts_of(cfg, [17, 3])
    runs = {}
    for knobs in knob_sets({}, {"threads": 2}, {"isa": "avx2", "threads": 2}, {"isa": "avx2", "packet_width": 16}):
        tokens, logits = kiln_model.generate(kiln_model.KilnLlama(cfg, weights, knobs=knobs), prompts, 12)
        runs[str(knobs)] = (tokens, logits)
    base_tokens, base_logits = runs["{}"]
    for name, (tokens, logits) in runs.items():
        np.testing.assert_array_equal(tokens, base_tokens, err_msg=name)
        assert np.array_equal(logits.view(np.uint32), base_logits.view(np.uint32)), f"{name}: logits differ in bits"


def test_the_pytorch_model_is_the_same_model(cfg, weights):
    # The speed peer (PyTorch float32 eager) computes what the float64 reference does, so the
    # tokens/s of `run.py bench` compare the same model.
    pytest.importorskip("torch")
    prompts = prompts_of(cfg, [11, 4])
    ref = reference.Reference(cfg, weights, "numpy-f64")
    peer = reference.Reference(cfg, weights, "torch-f32", threads=1)
    rl, tl = [ref.prefill(prompts)], [peer.prefill(prompts)]
    tokens = rl[0].argmax(-1)
    for _ in range(4):
        rl.append(ref.decode(tokens))
        tl.append(peer.decode(tokens))
        tokens = rl[-1].argmax(-1)
    assert_close(np.stack(tl), np.stack(rl))


def test_weights_round_trip_through_safetensors(cfg, weights, tmp_path):
    path = tmp_path / "small.safetensors"
    W.write_safetensors(path, weights, metadata={"seed": 3})
    back, meta = W.read_safetensors(path)
    assert meta == {"seed": "3"}
    assert set(back) == set(weights)
    for name, a in weights.items():
        assert back[name].dtype == np.float32 and np.array_equal(back[name], a), name
    # bf16 as its bits, and a model built on the memory-mapped tensors generates what the
    # in-memory weights do.
    bits = {k: W.to_bf16_bits(v) for k, v in weights.items()}
    W.write_safetensors(tmp_path / "bf16.safetensors", bits)
    back16, _ = W.read_safetensors(tmp_path / "bf16.safetensors")
    assert all(np.array_equal(back16[k], bits[k]) for k in bits)
    prompts = prompts_of(cfg, [6])
    t_mem, _ = kiln_model.generate(kiln_model.KilnLlama(cfg, weights), prompts, 3)
    t_file, _ = kiln_model.generate(kiln_model.KilnLlama(cfg, back), prompts, 3)
    np.testing.assert_array_equal(t_mem, t_file)


def test_bf16_rounding_is_round_to_nearest_even():
    x = np.array([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-8, 1.0 + 2**-8 + 2**-20, -2.5, np.inf, 3.4e38], np.float32)
    got = W.from_bf16_bits(W.to_bf16_bits(x))
    want = np.array([1.0, 1.0, 1.0 + 2**-6, 1.0 + 2**-7, -2.5, np.inf, np.inf], np.float32)
    np.testing.assert_array_equal(got, want)
    assert np.isnan(W.from_bf16_bits(W.to_bf16_bits(np.array([np.nan], np.float32))))[0]


def test_bad_files_and_requests_are_refused_with_their_reason(cfg, weights, tmp_path):
    bad = tmp_path / "bad.safetensors"
    header = b'{"x":{"dtype":"F32","shape":[4],"data_offsets":[0,64]}}'
    bad.write_bytes(struct.pack("<Q", len(header)) + header + bytes(16))
    with pytest.raises(W.SafetensorsError, match="'x'.*data_offsets"):
        W.read_safetensors(bad)
    bad.write_bytes(struct.pack("<Q", 1000) + b"{}")
    with pytest.raises(W.SafetensorsError, match="header length 1000 exceeds"):
        W.read_safetensors(bad)
    short = dict(weights)
    short["model.norm.weight"] = short["model.norm.weight"][:-1]
    with pytest.raises(W.ConfigError, match="'model.norm.weight' has shape"):
        kiln_model.KilnLlama(cfg, short)
    model = kiln_model.KilnLlama(cfg, weights)
    with pytest.raises(ValueError, match="max_prefill_tokens"):
        model.prefill(prompts_of(cfg, [100, 100]))
    with pytest.raises(ValueError, match="token ids"):
        model.prefill([[cfg["vocab"]]])
    with pytest.raises(ValueError, match="2 tokens for a batch of 1"):
        model.prefill([[1, 2]])
        model.decode([1, 2])


def run_py(*args):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, str(SOURCE_DIR / "examples" / "llama" / "run.py"), *args],
                          capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.skipif(SANITIZED,
                    reason="run.py's command line is Python over the kernels the other tests run; "
                    "the release tree runs it, the sanitizer tree (48 s there) does not")
def test_the_command_line_checks_and_benchmarks(tmp_path):
    p = run_py("check", "--config", str(CONFIG), "--steps", "3", "--prompts", "4,9")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["passed"] is True
    p = run_py("bench", "--config", str(CONFIG), "--prompts", "9,4", "--steps", "2", "--threads", "1",
               "--rounds", "1", "--isas", "avx2", "--workdir", str(tmp_path), "--out", str(tmp_path / "b.json"))
    assert p.returncode == 0, p.stderr
    record = json.loads((tmp_path / "b.json").read_text())
    assert record["reproducible"] is True
    assert [(r["dtype"], r["gemm_order"], r["threads"]) for r in record["pairs"]] == [
        ("f32", "ascending", 1), ("bf16", "ascending", 1), ("bf16", "bf16_dot", 1), ("bf16", "bf16_pairs", 1)]
    assert "| f32 | 1 |" in p.stdout and "| bf16, bf16_dot | 1 |" in p.stdout and "| bf16, bf16_pairs | 1 |" in p.stdout
    assert "Identical at every thread count and ISA (per weights type and order): yes" in p.stdout
    p = run_py("bench", "--config", str(CONFIG), "--variants", "f32:descending")
    assert p.returncode == 2 and "expected f32 or bf16, optionally :ascending, :bf16_dot or :bf16_pairs" in p.stderr
    p = run_py("generate", "--config", str(CONFIG), "--prompts", "300")
    assert p.returncode == 1 and "prompt lengths [300] must be in [1, max_seq=256]" in p.stderr
