# Shared fixtures of the Python module's tests (docs/python.md). Run by ctest (tests/CMakeLists.txt)
# with PYTHONPATH=<build>/python and KILN_BIN=<build>/bin/kiln.
import os
import pathlib

import numpy as np
import pytest

SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def kiln_bin():
    path = os.environ.get("KILN_BIN")
    if not path or not os.path.exists(path):
        pytest.fail("KILN_BIN must name the kiln executable (ctest sets it)")
    return path


@pytest.fixture
def rng():
    return np.random.default_rng(20261202)


def attention_f64(q, k, v, causal=False):
    """NumPy float64 attention with grouped KV heads: q [B,H,M,D], k [B,KH,N,D], v [B,KH,N,E]."""
    b, h, m, d = q.shape
    kh = k.shape[1]
    out = np.empty((b, h, m, v.shape[3]))
    for bi in range(b):
        for hi in range(h):
            s = q[bi, hi].astype(np.float64) @ k[bi, hi // (h // kh)].astype(np.float64).T / np.sqrt(d)
            if causal:
                n = k.shape[2]
                s = np.where(np.arange(n)[None, :] <= np.arange(m)[:, None] + (n - m), s, -np.inf)
            s = np.exp(s - s.max(axis=1, keepdims=True))
            out[bi, hi] = (s / s.sum(axis=1, keepdims=True)) @ v[bi, hi // (h // kh)].astype(np.float64)
    return out
