"""The ``answer`` string of a JSON object as it streams in, decoded piece by piece (for ``delta`` events).

Used by the grounded answers' bench (the answer inside ``{"answerable", "answer", "evidence"}``) and by the
reasoning service, which streams a tool choice's direct reply (``{"tool": "reply_directly", "answer": …}``)
as the model writes it.
"""

from __future__ import annotations

import json
import re

KEY = re.compile(r'"answer"\s*:\s*"')


class AnswerText:
    """Feed the raw JSON text as generated; get the decoded characters of its ``answer`` string that are new."""

    def __init__(self) -> None:
        self.raw = ""
        self.start = -1  # where the string's characters begin in ``raw``
        self.used = 0  # raw characters of the string already decoded
        self.closed = False

    def feed(self, chunk: str) -> str:
        """The answer's characters this chunk completes ('' when none)."""
        self.raw += chunk
        if self.closed:
            return ""
        if self.start < 0:
            m = KEY.search(self.raw)
            if m is None:
                return ""
            self.start = m.end()
        body = self.raw[self.start + self.used:]
        out, i = [], 0
        while i < len(body):
            c = body[i]
            if c == '"':
                self.closed = True
                break
            if c == "\\":
                size = 6 if body[i + 1:i + 2] == "u" else 2
                if size == 6 and body[i + 2:i + 4].lower() in ("d8", "d9", "da", "db"):
                    size = 12  # a high surrogate: decoded with its low half, never alone
                if i + size > len(body):
                    break  # the escape is not complete yet
                try:
                    out.append(json.loads(f'"{body[i:i + size]}"'))
                except ValueError:
                    out.append(body[i:i + size])
                i += size
                continue
            out.append(c)
            i += 1
        self.used += i
        return "".join(out)
