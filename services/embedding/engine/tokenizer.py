"""e5 tokenisation: kind prefixes, truncation to the token limit, padding into a batch."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "
PAD_ID = 1
EOS_ID = 2


@dataclass(frozen=True)
class EncodedText:
    """Token ids of one text (special tokens included) and whether they were cut."""

    ids: np.ndarray
    full_length: int

    @property
    def truncated(self) -> bool:
        """True when the text had more tokens than were kept."""
        return self.full_length > len(self.ids)


@dataclass(frozen=True)
class TokenBatch:
    """Padded ``input_ids`` and ``attention_mask`` of a batch, int64 ``[n, max_len]``."""

    input_ids: np.ndarray
    attention_mask: np.ndarray

    @classmethod
    def pad(cls, items: list[EncodedText]) -> TokenBatch:
        """Right-pad every item to the longest one in the batch."""
        width = max(len(i.ids) for i in items)
        ids = np.full((len(items), width), PAD_ID, dtype=np.int64)
        mask = np.zeros((len(items), width), dtype=np.int64)
        for row, item in enumerate(items):
            ids[row, : len(item.ids)] = item.ids
            mask[row, : len(item.ids)] = 1
        return cls(ids, mask)


class E5Tokenizer:
    """The model's SentencePiece-unigram tokenizer (``tokenizer.json``) with e5's prefixes."""

    def __init__(self, tokenizer_json: Path, max_tokens: int) -> None:
        self._tok = Tokenizer.from_file(str(tokenizer_json))
        self._tok.no_truncation()
        self._tok.no_padding()
        self.max_tokens = max_tokens

    def encode(self, texts: list[str], query: bool) -> list[EncodedText]:
        """Encode texts with the kind's prefix; anything over the limit keeps its head and ``</s>``."""
        prefix = QUERY_PREFIX if query else PASSAGE_PREFIX
        out = []
        encodings = ([self._tok.encode(prefix + texts[0])] if len(texts) == 1
                     else self._tok.encode_batch([prefix + t for t in texts]))
        for enc in encodings:
            ids = np.asarray(enc.ids, dtype=np.int64)
            full = len(ids)
            if full > self.max_tokens:
                ids = np.concatenate([ids[: self.max_tokens - 1], np.array([EOS_ID], dtype=np.int64)])
            out.append(EncodedText(ids=ids, full_length=full))
        return out
