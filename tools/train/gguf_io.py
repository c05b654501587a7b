"""Minimal GGUF v3 reader and writer, numpy only. The reader maps the file and
gives F32/F16 tensors as arrays (gguf_dequant.py decodes the quantized types)
and any tensor's raw bytes; the writer takes arrays or raw bytes of any type.

Layout (GGUF v3, little-endian): magic "GGUF", u32 version, u64 tensor count,
u64 metadata count, metadata key/values, tensor infos (name, n_dims, ne[],
ggml type, offset relative to the data section), padding to the alignment
(general.alignment, default 32), tensor data each at an aligned offset.
ne[0] is the fastest-varying dimension (the row length).
"""
import mmap
import struct

import numpy as np

# metadata value types
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
_SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
           BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}
# tensor types
GGML_F32, GGML_F16 = 0, 1
ALIGN = 32


class Reader:
    def __init__(self, path):
        with open(path, "rb") as f:
            self.buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        self.off = 0
        if self._raw(4) != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        self.version = self._scalar(U32)
        n_tensors = self._scalar(U64)
        n_kv = self._scalar(U64)
        self.meta = {}
        self.meta_types = {}
        for _ in range(n_kv):
            key = self._string()
            vt = self._scalar(U32)
            if vt == ARRAY:
                et = self._scalar(U32)
                n = self._scalar(U64)
                self.meta[key] = [self._value(et) for _ in range(n)]
                self.meta_types[key] = (ARRAY, et)
            else:
                self.meta[key] = self._value(vt)
                self.meta_types[key] = (vt,)
        self.tensors = []
        for _ in range(n_tensors):
            name = self._string()
            nd = self._scalar(U32)
            ne = [self._scalar(U64) for _ in range(nd)]
            tt = self._scalar(U32)
            off = self._scalar(U64)
            self.tensors.append((name, ne, tt, off))
        self.align = self.meta.get("general.alignment", ALIGN)
        self.data_start = (self.off + self.align - 1) // self.align * self.align

    def _raw(self, n):
        b = self.buf[self.off:self.off + n]
        self.off += n
        return b

    def _scalar(self, t):
        fmt = _SCALAR[t]
        v = struct.unpack_from(fmt, self.buf, self.off)[0]
        self.off += struct.calcsize(fmt)
        return v

    def _string(self):
        n = self._scalar(U64)
        return self._raw(n).decode("utf-8")

    def _value(self, t):
        return self._string() if t == STRING else self._scalar(t)

    def info(self, name):
        """(ne, ggml type, absolute offset) of a tensor; KeyError when absent."""
        for n, ne, tt, off in self.tensors:
            if n == name:
                return ne, tt, self.data_start + off
        raise KeyError(name)

    def raw(self, name, nbytes):
        """The first nbytes of a tensor's data, as a read-only buffer."""
        _, _, off = self.info(name)
        return memoryview(self.buf)[off:off + nbytes]

    def tensor(self, name):
        ne, tt, off = self.info(name)
        dt = {GGML_F32: np.float32, GGML_F16: np.float16}[tt]
        count = int(np.prod(ne))
        a = np.frombuffer(self.buf, dtype=dt, count=count, offset=off)
        return a.reshape(list(reversed(ne))).astype(np.float32)


class Writer:
    def __init__(self, align=ALIGN):
        self.kv = []       # (key, type, value, elem_type)
        self.tensors = []  # (name, ne, ggml type, bytes-like data)
        self.align = align  # a value other than 32 must also be in general.alignment (add it)

    def add(self, key, vtype, value):
        self.kv.append((key, vtype, value, None))

    def add_array(self, key, etype, values):
        self.kv.append((key, ARRAY, list(values), etype))

    def add_tensor(self, name, arr, ttype=GGML_F32):
        dt = np.float32 if ttype == GGML_F32 else np.float16
        a = np.ascontiguousarray(arr, dtype=dt)
        self.tensors.append((name, list(reversed(a.shape)), ttype, a.tobytes()))  # ne[0] = row length

    def add_raw_tensor(self, name, ne, ttype, data):
        """A tensor of any type given as its bytes (copied from a Reader)."""
        self.tensors.append((name, list(ne), ttype, data))

    @staticmethod
    def _s(s):
        b = s.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    def _val(self, t, v):
        return self._s(v) if t == STRING else struct.pack(_SCALAR[t], v)

    def write(self, path):
        out = bytearray(b"GGUF")
        out += struct.pack("<IQQ", 3, len(self.tensors), len(self.kv))
        for key, t, v, et in self.kv:
            out += self._s(key) + struct.pack("<I", t)
            if t == ARRAY:
                out += struct.pack("<IQ", et, len(v))
                for x in v:
                    out += self._val(et, x)
            else:
                out += self._val(t, v)
        al = self.align
        off = 0
        for name, ne, tt, data in self.tensors:
            out += self._s(name) + struct.pack("<I", len(ne))
            out += b"".join(struct.pack("<Q", n) for n in ne)
            out += struct.pack("<IQ", tt, off)
            off += (len(data) + al - 1) // al * al
        out += b"\0" * ((-len(out)) % al)
        with open(path, "wb") as f:
            f.write(out)
            for name, ne, tt, data in self.tensors:
                f.write(data)
                f.write(b"\0" * ((-len(data)) % al))
