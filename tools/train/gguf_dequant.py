"""Decoding GGUF tensors of the common weight types to float32, numpy only.

Types (ggml ids): F32 0, F16 1, Q4_0 2, Q4_1 3, Q5_0 6, Q5_1 7, Q8_0 8,
Q4_K 12, Q5_K 13, Q6_K 14, BF16 30. Block layouts follow ggml's
(ggml-common.h): each block decodes to 32 (legacy types) or 256 (k-quants)
values, every block independently, so the decoders below work on all the
blocks of a tensor at once. Checked against llama.cpp's logits in
check_gguf_forward.py.
"""
import numpy as np

import gguf_io as g

F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, BF16 = 0, 1, 2, 3, 6, 7, 8, 12, 13, 14, 30
# type -> (values per block, bytes per block, name)
TYPES = {
    F32: (1, 4, "F32"), F16: (1, 2, "F16"), BF16: (1, 2, "BF16"),
    Q4_0: (32, 18, "Q4_0"), Q4_1: (32, 20, "Q4_1"), Q5_0: (32, 22, "Q5_0"), Q5_1: (32, 24, "Q5_1"),
    Q8_0: (32, 34, "Q8_0"), Q4_K: (256, 144, "Q4_K"), Q5_K: (256, 176, "Q5_K"), Q6_K: (256, 210, "Q6_K"),
}


def type_name(t):
    return TYPES[t][2] if t in TYPES else f"type {t}"


def nbytes(t, n):
    """Bytes of n values of type t (n a multiple of the block size)."""
    bs, bb, _ = TYPES[t]
    if n % bs:
        raise ValueError(f"{n} values are not whole {type_name(t)} blocks of {bs}")
    return n // bs * bb


def _f16(b, lo):
    """The f16 at byte offset lo of every block (rows of b) as float32 (n, 1)."""
    return b[:, lo:lo + 2].copy().view(np.float16).astype(np.float32)


def _nibbles(qs):
    """Low nibbles then high nibbles of each row: (n, 2 * qs.shape[1])."""
    return np.concatenate([qs & 0xF, qs >> 4], axis=1).astype(np.float32)


def _qh_bits(qh, count):
    """Bit j of the little-endian bit field qh (n, count / 8 bytes), j < count, as (n, count) 0/1."""
    return np.unpackbits(qh, axis=1, count=count, bitorder="little").astype(np.float32)


def _scale_min_k4(sc):
    """The 8 six-bit scales and mins of a k-quant block's 12 scale bytes (ggml's get_scale_min_k4)."""
    sc = sc.astype(np.int32)
    d = np.empty((sc.shape[0], 8), np.float32)
    m = np.empty((sc.shape[0], 8), np.float32)
    for j in range(8):
        if j < 4:
            d[:, j] = sc[:, j] & 63
            m[:, j] = sc[:, j + 4] & 63
        else:
            d[:, j] = (sc[:, j + 4] & 0xF) | ((sc[:, j - 4] >> 6) << 4)
            m[:, j] = (sc[:, j + 4] >> 4) | ((sc[:, j] >> 6) << 4)
    return d, m


def _blocks(t, data, n):
    bs, bb, _ = TYPES[t]
    return np.frombuffer(data, np.uint8, count=nbytes(t, n)).reshape(n // bs, bb)


def dequantize(t, data, n):
    """n values of type t from the bytes data (at least nbytes(t, n)) as a float32 vector."""
    if t not in TYPES:
        raise ValueError(f"tensor type {t} is not supported (supported: "
                         + ", ".join(v[2] for v in TYPES.values()) + ")")
    if t == F32:
        return np.frombuffer(data, np.float32, count=n).copy()
    if t == F16:
        return np.frombuffer(data, np.float16, count=n).astype(np.float32)
    if t == BF16:
        return (np.frombuffer(data, np.uint16, count=n).astype(np.uint32) << 16).view(np.float32)
    b = _blocks(t, data, n)
    if t == Q8_0:
        return (_f16(b, 0) * b[:, 2:].view(np.int8).astype(np.float32)).reshape(-1)
    if t == Q4_0:
        return (_f16(b, 0) * (_nibbles(b[:, 2:]) - 8)).reshape(-1)
    if t == Q4_1:
        return (_f16(b, 0) * _nibbles(b[:, 4:]) + _f16(b, 2)).reshape(-1)
    if t == Q5_0:
        q = _nibbles(b[:, 6:]) + 16 * _qh_bits(b[:, 2:6], 32)
        return (_f16(b, 0) * (q - 16)).reshape(-1)
    if t == Q5_1:
        q = _nibbles(b[:, 8:]) + 16 * _qh_bits(b[:, 4:8], 32)
        return (_f16(b, 0) * q + _f16(b, 2)).reshape(-1)
    if t == Q4_K:  # d, dmin, scales[12], qs[128]: 4 chunks of 64 = low nibbles of 32 bytes, then high
        d, dmin = _f16(b, 0), _f16(b, 2)
        sc, mn = _scale_min_k4(b[:, 4:16])
        qs = b[:, 16:144].reshape(-1, 4, 32)
        q = np.concatenate([qs & 0xF, qs >> 4], axis=2).astype(np.float32).reshape(-1, 8, 32)
        return (d[:, :, None] * sc[:, :, None] * q - dmin[:, :, None] * mn[:, :, None]).reshape(-1)
    if t == Q5_K:  # d, dmin, scales[12], qh[32], qs[128]; sub-block k takes bit k of each qh byte
        d, dmin = _f16(b, 0), _f16(b, 2)
        sc, mn = _scale_min_k4(b[:, 4:16])
        qh = b[:, 16:48]
        qs = b[:, 48:176].reshape(-1, 4, 32)
        q = np.concatenate([qs & 0xF, qs >> 4], axis=2).astype(np.float32).reshape(-1, 8, 32)
        hi = np.stack([(qh >> k) & 1 for k in range(8)], axis=1).astype(np.float32)  # (n, 8, 32)
        q = q + 16 * hi
        return (d[:, :, None] * sc[:, :, None] * q - dmin[:, :, None] * mn[:, :, None]).reshape(-1)
    if t == Q6_K:  # ql[128], qh[64], scales[16] (int8), d; two halves of 128 values
        ql, qh = b[:, 0:128].reshape(-1, 2, 64), b[:, 128:192].reshape(-1, 2, 32)
        sc = b[:, 192:208].view(np.int8).astype(np.float32).reshape(-1, 2, 8)
        d = _f16(b, 208)
        lo = np.concatenate([ql[:, :, :32] & 0xF, ql[:, :, 32:] & 0xF, ql[:, :, :32] >> 4, ql[:, :, 32:] >> 4],
                            axis=2)  # (n, 2, 128): value groups of 32 in order
        hi = np.concatenate([(qh >> s) & 3 for s in (0, 2, 4, 6)], axis=2)
        q = (lo.astype(np.int32) | (hi.astype(np.int32) << 4)) - 32  # (n, 2, 128)
        scale = np.repeat(sc, 16, axis=2)  # 16 values per scale
        return (d[:, :, None] * scale * q.astype(np.float32)).reshape(-1)
    raise AssertionError(t)


def tensor(reader, name):
    """A GGUF tensor of any supported type as a float32 array shaped (ne[n-1], ..., ne[0])."""
    ne, t, _ = reader.info(name)
    n = int(np.prod(ne))
    if t not in TYPES:
        raise ValueError(f"tensor '{name}' has type {t}, which this tool cannot decode")
    return dequantize(t, reader.raw(name, nbytes(t, n)), n).reshape(list(reversed(ne)))


def tensor_bytes(reader, name):
    """The raw bytes of a tensor (for copying it unchanged)."""
    ne, t, _ = reader.info(name)
    n = int(np.prod(ne))
    if t not in TYPES:
        raise ValueError(f"tensor '{name}' has type {t}, which this tool cannot copy")
    return bytes(reader.raw(name, nbytes(t, n)))


__all__ = ["dequantize", "tensor", "tensor_bytes", "nbytes", "type_name", "TYPES", "g"]
