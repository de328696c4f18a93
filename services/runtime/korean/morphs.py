"""Kiwi's morphological analysis, one analyser per process.

Read by the reasoning service (tool lemmas, services/reasoning/grounding.py) and the gateway (a
question's nouns, gateway/answers/question.py).

Kiwi loads in about 3 s: each process loads it at start, off its event loop. Its analysis is linear in
the text; callers cut the text first.
"""

from __future__ import annotations

import threading
import unicodedata
from typing import Any

_KIWI: Any = None
_LOCK = threading.Lock()


def tokens(text: str) -> list[Any]:
    """Kiwi's tokens of ``text`` (NFKC-normalised; ``form``, ``tag``, ``start``, ``len`` into that text)."""
    global _KIWI
    with _LOCK:
        if _KIWI is None:
            from kiwipiepy import Kiwi

            _KIWI = Kiwi()
        return _KIWI.tokenize(unicodedata.normalize("NFKC", text))
