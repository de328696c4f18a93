"""Runs one completion :class:`~services.reasoning.completions.Plan`: stream, decode, regenerate once.

Events: text :class:`Delta` (free text and response formats stream as written; tool-choice answers and
buffered calls come as one delta once validated, except a direct reply under ``auto`` on an unbuffered
call, whose text streams as soon as the model has written ``{"tool": "reply_directly", "answer": "``: the
schema-constrained decoding leaves it nothing else to write but the string), or one :class:`ToolCalls`;
then exactly one
:class:`Finished` (``finish_reason`` ``stop``, ``length`` or ``tool_calls``) or :class:`Failed`.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

from services.reasoning.backends.base import GenerationParams
from services.reasoning.completions import (
    REPLY_TOOL,
    Decoded,
    Plan,
    ToolCallOut,
    Ungrounded,
    cut_reply,
    regeneration_note,
    reply_as_tool,
)
from services.reasoning.generation import Delta, Failed, Finished, Generator, Timeouts, Usage, add_usage
from services.reasoning.schema_checks import AnswerInvalid
from services.runtime.jsonstream import AnswerText

MIN_REGENERATION_S = 1.0  # less than this left of the total deadline: no second answer is tried


@dataclass(frozen=True)
class ToolCalls:
    """The tool calls of the answer."""

    calls: tuple[ToolCallOut, ...]


CompletionEvent = Delta | ToolCalls | Finished | Failed


class DirectReply:
    """The reply of a tool-choice answer as it is written, once the answer is known to be the direct reply."""

    CHOICE = re.compile(r'(?<!\s)\s*+\{\s*+"tool"\s*+:\s*+"([^"\\]*+)"')

    def __init__(self) -> None:
        self.raw = ""
        self.text = AnswerText()
        self.decided: bool | None = None

    def feed(self, chunk: str) -> str:
        """The reply's characters this chunk completes ('' while the choice is unknown or is a tool)."""
        if self.decided is False:
            return ""
        if self.decided:
            return self.text.feed(chunk)
        self.raw += chunk
        m = self.CHOICE.match(self.raw)
        if m is not None:
            self.decided = m.group(1) == REPLY_TOOL
            return self.text.feed(self.raw) if self.decided else ""
        if len(self.raw) > 64:
            self.decided = False  # not the form of a choice: read whole, as before
        return ""


class Completer:
    """Completions over a :class:`Generator`."""

    def __init__(self, generator: Generator) -> None:
        self.generator = generator

    async def run(self, plan: Plan, params: GenerationParams, timeouts: Timeouts, *,
                  buffered: bool) -> AsyncIterator[CompletionEvent]:
        """Stream the answer (see the module doc)."""
        start = time.perf_counter()
        total = Usage(llm_calls=0)
        hold = buffered or plan.decodes_tools  # what must validate before any of it is sent
        messages = list(plan.messages)
        call = dataclasses.replace(params, json_schema=plan.schema)
        attempt_timeouts: Timeouts | None = timeouts
        error = ""
        streams_reply = not buffered and plan.tool_mode == "auto" and reply_as_tool(plan.tools, plan.tool_mode)
        streamed = False  # some of a direct reply went out: it cannot be asked for again
        while attempt_timeouts is not None:
            final: Finished | Failed | None = None
            reply = DirectReply() if streams_reply else None
            async for event in self.generator.stream(messages, call, attempt_timeouts):
                if isinstance(event, Delta):
                    if not hold:
                        yield event
                    elif reply is not None and (piece := reply.feed(event.text)):
                        streamed = True
                        yield Delta(piece)
                else:
                    final = event
            assert final is not None, "a generator stream always ends with Finished or Failed"
            total.llm_calls += 1
            add_usage(total, final.usage)
            if isinstance(final, Failed):
                yield dataclasses.replace(final, usage=total)
                return
            cut = cut_reply(final.text) if final.finish_reason == "length" and plan.decodes_tools else None
            if cut is not None and plan.tool_mode == "auto":
                # A direct reply cut at max_tokens: returned cut, finish_reason "length", as a plain answer is.
                if cut and not streamed:
                    yield Delta(cut)
                yield Finished("length", total, cut)
                return
            if final.finish_reason == "length" and (plan.schema is not None):
                error = f"the answer was cut at max_tokens ({params.max_tokens}) before its JSON closed"
            else:
                try:
                    decoded = plan.decode(final.text)
                except Ungrounded as err:
                    # A call nobody asked for: the second answer may only reply (never a 502 for it).
                    error = str(err)
                    call = dataclasses.replace(call, json_schema=plan.reply_schema())
                except AnswerInvalid as err:
                    error = str(err)
                else:
                    for out in self._deliver(decoded, hold and not streamed):
                        yield out
                    reason = "tool_calls" if decoded.tool_calls else final.finish_reason
                    yield Finished(reason, total, decoded.content)
                    return
            # A streamed answer cannot be taken back: only a held one is tried again.
            attempt_timeouts = self._again(timeouts, start) if hold and not streamed and total.llm_calls == 1 else None
            messages = [*plan.messages, {"role": "assistant", "content": final.text}, regeneration_note(error, plan)]
        yield Failed("schema_violation", error, total.completion_tokens, total)

    @staticmethod
    def _deliver(decoded: Decoded, held: bool) -> list[CompletionEvent]:
        if decoded.tool_calls:
            return [ToolCalls(decoded.tool_calls)]
        return [Delta(decoded.content)] if held and decoded.content else []

    @staticmethod
    def _again(timeouts: Timeouts, start: float) -> Timeouts | None:
        left = timeouts.total_s - (time.perf_counter() - start)
        if left < MIN_REGENERATION_S:
            return None
        return Timeouts(min(timeouts.first_token_s, left), min(timeouts.generation_s, left), left)
