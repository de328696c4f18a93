"""bench.second_encoder: the stacked vector's dot product is cos(e5) + alpha * cos(USE)."""

import numpy as np

from bench.second_encoder import _stack


def test_a_stacked_dot_product_adds_alpha_times_the_second_cosine():
    rng = np.random.default_rng(0)
    e5 = rng.normal(size=(2, 4)).astype(np.float32)
    use = rng.normal(size=(2, 3)).astype(np.float32)
    e5 /= np.linalg.norm(e5, axis=1, keepdims=True)
    use /= np.linalg.norm(use, axis=1, keepdims=True)
    s = _stack(e5, use, 0.1)
    assert s.shape == (2, 7)
    assert np.isclose(s[0] @ s[1], e5[0] @ e5[1] + 0.1 * (use[0] @ use[1]), atol=1e-6)
    assert _stack(e5, use, 0.0) is e5  # alpha 0: e5 alone, as the service searches today
