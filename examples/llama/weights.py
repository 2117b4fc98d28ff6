"""Configuration, weights and the safetensors file layout of the Llama example.

Weights carry Hugging Face Llama's names and layouts (a Linear's weight is [out, in]), so a
checkpoint of this architecture in safetensors form loads as it is:

    model.embed_tokens.weight                     [vocab, d_model]
    model.layers.{i}.input_layernorm.weight       [d_model]
    model.layers.{i}.self_attn.q_proj.weight      [n_heads * head_dim, d_model]
    model.layers.{i}.self_attn.k_proj.weight      [n_kv_heads * head_dim, d_model]
    model.layers.{i}.self_attn.v_proj.weight      [n_kv_heads * head_dim, d_model]
    model.layers.{i}.self_attn.o_proj.weight      [d_model, n_heads * head_dim]
    model.layers.{i}.post_attention_layernorm.weight [d_model]
    model.layers.{i}.mlp.gate_proj.weight         [d_ff, d_model]
    model.layers.{i}.mlp.up_proj.weight           [d_ff, d_model]
    model.layers.{i}.mlp.down_proj.weight         [d_model, d_ff]
    model.norm.weight                             [d_model]
    lm_head.weight                                [vocab, d_model]

q_proj and k_proj rows are in the order Hugging Face's conversion leaves them, which pairs
element j of a head with element j + head_dim/2 for RoPE (the "neox", rotate-half style).

The safetensors layout (read and written here with NumPy; no package for it is available on
these machines): 8 bytes, a little-endian u64 N; N bytes of UTF-8 JSON mapping each tensor's
name to {"dtype": "F32"|"F16"|"BF16"|..., "shape": [...], "data_offsets": [begin, end]}
(byte offsets into the data that follows the header, little-endian, C order), and an optional
"__metadata__" of strings; then the data.
"""

import json
import struct

import numpy as np

CONFIG_KEYS = {
    "n_layers": int,
    "d_model": int,
    "n_heads": int,
    "n_kv_heads": int,
    "head_dim": int,
    "d_ff": int,
    "vocab": int,
    "rope_base": float,
    "norm_eps": float,
    "max_seq": int,
    "max_batch": int,
    "max_prefill_tokens": int,
}


class ConfigError(ValueError):
    pass


def load_config(path):
    """A model configuration (configs/*.json): the architecture, and the capacities the
    kernels are compiled for (max_seq: KV cache positions per sequence; max_batch: sequences
    decoded together; max_prefill_tokens: prompt tokens of all sequences in one prefill)."""
    with open(path, encoding="utf-8") as f:
        raw = json.load(f)
    cfg = {"name": raw.get("name", str(path))}
    for key, kind in CONFIG_KEYS.items():
        if key not in raw:
            raise ConfigError(f"{path}: '{key}' is missing")
        value = raw[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and value != int(value)):
            raise ConfigError(f"{path}: '{key}' must be a {kind.__name__}, got {value!r}")
        if value <= 0:
            raise ConfigError(f"{path}: '{key}' must be positive, got {value!r}")
        cfg[key] = kind(value)
    unknown = set(raw) - set(CONFIG_KEYS) - {"name"}
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {sorted(unknown)}; known: {sorted(CONFIG_KEYS)}")
    if cfg["n_heads"] % cfg["n_kv_heads"]:
        raise ConfigError(f"{path}: n_heads={cfg['n_heads']} is not a multiple of n_kv_heads={cfg['n_kv_heads']}")
    if cfg["head_dim"] % 2:
        raise ConfigError(f"{path}: head_dim={cfg['head_dim']} must be even (RoPE pairs)")
    if cfg["max_prefill_tokens"] > cfg["max_batch"] * cfg["max_seq"]:
        raise ConfigError(f"{path}: max_prefill_tokens exceeds max_batch * max_seq")
    return cfg


def shapes(cfg):
    """Every tensor's name and shape, in a fixed order."""
    d, hd, f = cfg["d_model"], cfg["head_dim"], cfg["d_ff"]
    out = [("model.embed_tokens.weight", (cfg["vocab"], d))]
    for i in range(cfg["n_layers"]):
        p = f"model.layers.{i}."
        out += [
            (p + "input_layernorm.weight", (d,)),
            (p + "self_attn.q_proj.weight", (cfg["n_heads"] * hd, d)),
            (p + "self_attn.k_proj.weight", (cfg["n_kv_heads"] * hd, d)),
            (p + "self_attn.v_proj.weight", (cfg["n_kv_heads"] * hd, d)),
            (p + "self_attn.o_proj.weight", (d, cfg["n_heads"] * hd)),
            (p + "post_attention_layernorm.weight", (d,)),
            (p + "mlp.gate_proj.weight", (f, d)),
            (p + "mlp.up_proj.weight", (f, d)),
            (p + "mlp.down_proj.weight", (d, f)),
        ]
    out += [("model.norm.weight", (d,)), ("lm_head.weight", (cfg["vocab"], d))]
    return out


def generate(cfg, seed=0):
    """Float32 weights drawn from `seed`: Linear weights N(0, 1/in) (activations stay of order
    one through the layers, so logits are well separated), norm weights 1 + N(0, 0.1^2),
    embeddings N(0, 1). One generator per tensor (seeded by its index), so a tensor does not
    depend on the ones before it."""
    out = {}
    for index, (name, shape) in enumerate(shapes(cfg)):
        rng = np.random.default_rng([seed, index])
        if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
            w = 1.0 + 0.1 * rng.standard_normal(shape, dtype=np.float32)
        elif name == "model.embed_tokens.weight":
            w = rng.standard_normal(shape, dtype=np.float32)
        else:
            w = rng.standard_normal(shape, dtype=np.float32) * np.float32(1.0 / np.sqrt(shape[1]))
        out[name] = w.astype(np.float32)
    return out


def check_weights(cfg, weights):
    """Every tensor the configuration needs, of its shape; raises naming the first that is not."""
    for name, shape in shapes(cfg):
        if name not in weights:
            raise ConfigError(f"weights: '{name}' is missing")
        if tuple(weights[name].shape) != shape:
            raise ConfigError(f"weights: '{name}' has shape {tuple(weights[name].shape)}, the configuration needs {shape}")


# --- bfloat16 as NumPy uint16 bits --------------------------------------------------------


def to_bf16_bits(x):
    """float32 -> bfloat16 bits (uint16), rounded to nearest even; NaN stays a quiet NaN."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        rounded[nan] = ((u[nan] >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16)
    return rounded


def from_bf16_bits(b):
    """bfloat16 bits (uint16) -> float32, exactly."""
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


# --- safetensors ---------------------------------------------------------------------------

_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2"), "F64": np.dtype("<f8"),
           "I32": np.dtype("<i4"), "I64": np.dtype("<i8")}


class SafetensorsError(ValueError):
    pass


def write_safetensors(path, tensors, dtypes=None, metadata=None):
    """Writes `tensors` ({name: array}) to `path`. A uint16 array is written as BF16 (its bits)
    unless `dtypes` names another type for it; float32 as F32, float16 as F16."""
    header, offset, blobs = {}, 0, []
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        kind = (dtypes or {}).get(name)
        if kind is None:
            kind = {np.dtype(np.uint16): "BF16", np.dtype(np.float32): "F32", np.dtype(np.float16): "F16",
                    np.dtype(np.float64): "F64", np.dtype(np.int32): "I32", np.dtype(np.int64): "I64"}.get(a.dtype)
        if kind not in _DTYPES or _DTYPES[kind].itemsize != a.dtype.itemsize:
            raise SafetensorsError(f"{path}: cannot store '{name}' of {a.dtype} as {kind}")
        data = a.astype(_DTYPES[kind], copy=False).tobytes()
        header[name] = {"dtype": kind, "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)


def read_safetensors(path):
    """{name: array} from a safetensors file, memory-mapped (read-only arrays; BF16 as uint16
    bits) and the metadata. Every header entry is checked against the file's size."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise SafetensorsError(f"{path}: shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", head)
        f.seek(0, 2)
        size = f.tell()
        if n > size - 8:
            raise SafetensorsError(f"{path}: header length {n} exceeds the file ({size} bytes)")
        f.seek(8)
        try:
            header = json.loads(f.read(n))
        except ValueError as e:
            raise SafetensorsError(f"{path}: the header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: the header is not a JSON object")
    data_size = size - 8 - n
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n, shape=(data_size,)) if data_size else np.zeros(0, np.uint8)
    metadata = header.pop("__metadata__", {})
    out = {}
    for name, e in header.items():
        try:
            kind, shape, (begin, end) = e["dtype"], tuple(int(s) for s in e["shape"]), e["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise SafetensorsError(f"{path}: entry '{name}' lacks dtype, shape or data_offsets") from None
        if kind not in _DTYPES:
            raise SafetensorsError(f"{path}: '{name}' has dtype {kind}; this reader takes {sorted(_DTYPES)}")
        dt = _DTYPES[kind]
        count = int(np.prod(shape, dtype=np.int64))
        if not (0 <= begin <= end <= data_size) or end - begin != count * dt.itemsize:
            raise SafetensorsError(
                f"{path}: '{name}' ({kind}{list(shape)}) has data_offsets [{begin}, {end}], "
                f"which do not hold {count * dt.itemsize} bytes inside the {data_size} bytes of data")
        out[name] = raw[begin:end].view(dt).reshape(shape)
    return out, metadata
