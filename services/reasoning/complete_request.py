"""A Complete request checked field by field (every violation named) and turned into a completion plan."""

from __future__ import annotations

import re
from datetime import date, datetime
from zoneinfo import ZoneInfo

from mesh.reasoning.v1 import reasoning_pb2 as pb

from services.bootstrap.errors import Violation
from services.reasoning.completions import (
    EMPTY_PARAMETERS,
    MAX_TOOLS,
    TOOL_NAME,
    MessageIn,
    Plan,
    Role,
    ToolCallIn,
    ToolMode,
    ToolSpec,
    backend_messages,
    tool_choice_schema,
)
from services.reasoning.config import ReasoningSettings
from services.reasoning.schema_checks import check_schema

ROLES: dict[int, Role] = {pb.ROLE_USER: "user", pb.ROLE_ASSISTANT: "assistant", pb.ROLE_SYSTEM: "system",
                          pb.ROLE_TOOL: "tool"}
TOOL_MODES: dict[int, ToolMode] = {pb.TOOL_CHOICE_MODE_AUTO: "auto", pb.TOOL_CHOICE_MODE_NONE: "none",
                                   pb.TOOL_CHOICE_MODE_REQUIRED: "required", pb.TOOL_CHOICE_MODE_NAMED: "named"}


def check_text(field: str, value: str, violations: list[Violation], limit: int, required: bool = True) -> None:
    """A violation when ``value`` is empty (if ``required``) or longer than ``limit`` characters."""
    if required and not value.strip():
        violations.append(Violation(field, "empty"))
    if len(value) > limit:
        violations.append(Violation(field, f"{len(value)} characters is over {limit}"))


def _messages(request, s: ReasoningSettings, violations: list[Violation]) -> list[MessageIn]:
    if not request.messages:
        violations.append(Violation("messages", "at least one message is required"))
    if len(request.messages) > s.max_messages:
        violations.append(Violation("messages", f"{len(request.messages)} messages is over {s.max_messages}"))
        return []
    size = sum(len(m.content) + sum(len(c.arguments) for c in m.tool_calls) for m in request.messages)
    if size > s.max_conversation_chars:
        limit = s.max_conversation_chars
        violations.append(Violation("messages", f"{size} characters in all; at most {limit}"))
        return []
    out: list[MessageIn] = []
    called: set[str] = set()
    for i, m in enumerate(request.messages):
        role = ROLES.get(m.role)
        if role is None:
            violations.append(Violation(f"messages[{i}].role", "must be system, user, assistant or tool"))
            continue
        check_text(f"messages[{i}].content", m.content, violations, s.max_prompt_chars, required=False)
        if m.tool_calls and role != "assistant":
            violations.append(Violation(f"messages[{i}].tool_calls", "only an assistant message calls tools"))
        if role == "tool" and m.tool_call_id not in called:
            violations.append(Violation(f"messages[{i}].tool_call_id",
                                        "must name a tool call of an earlier assistant message"))
        if role in ("user", "system") and not m.content.strip():
            violations.append(Violation(f"messages[{i}].content", "empty"))
        called.update(c.id for c in m.tool_calls)
        out.append(MessageIn(role, m.content, tuple(ToolCallIn(c.id, c.name, c.arguments) for c in m.tool_calls),
                             m.tool_call_id, m.name))
    return out


def _tools(request, violations: list[Violation]) -> tuple[dict[str, ToolSpec], ToolMode]:
    tools: dict[str, ToolSpec] = {}
    if len(request.tools) > MAX_TOOLS:
        violations.append(Violation("tools", f"at most {MAX_TOOLS} tools"))
    for i, t in enumerate(request.tools):
        if not TOOL_NAME.match(t.name):
            violations.append(Violation(f"tools[{i}].name", "1..64 letters, digits, _ or -"))
        elif t.name in tools:
            violations.append(Violation(f"tools[{i}].name", f"{t.name!r} is given twice"))
        params = (check_schema(t.parameters_json, f"tools[{i}].parameters", violations, object_only=True)
                  if t.parameters_json else EMPTY_PARAMETERS)
        tools[t.name] = ToolSpec(t.name, t.description, params or EMPTY_PARAMETERS)
    choice = request.tool_choice
    mode: ToolMode = TOOL_MODES.get(choice.mode, "auto")
    if mode in ("required", "named") and not request.tools:
        violations.append(Violation("tool_choice", f"{mode} needs tools"))
    if mode == "named":
        if choice.name not in tools:
            violations.append(Violation("tool_choice.name", f"{choice.name!r} is not one of the tools"))
        else:
            tools = {choice.name: tools[choice.name]}
    return tools, mode


TODAY_IN_SYSTEM = re.compile(r"(?:오늘|today)[^0-9\n]{0,20}(\d{4})-(\d{2})-(\d{2})", re.IGNORECASE)


def reference_date(messages: list[MessageIn], zone: str) -> date:
    """Today in ``zone``, unless the caller's system message names today's date (YYYY-MM-DD): the caller's wins."""
    for m in messages:
        if m.role == "system" and (found := TODAY_IN_SYSTEM.search(m.content)):
            try:
                return date(int(found[1]), int(found[2]), int(found[3]))
            except ValueError:
                pass
    return datetime.now(ZoneInfo(zone)).date()


def complete_plan(request, s: ReasoningSettings, violations: list[Violation]) -> Plan:
    """A CompleteRequest validated (violations collected) and planned: messages, schema, tools."""
    messages = _messages(request, s, violations)
    tools, mode = _tools(request, violations)
    fmt = request.response_format
    answer_schema = None
    if fmt.type == pb.RESPONSE_FORMAT_TYPE_JSON_OBJECT:
        answer_schema = {"type": "object"}
    elif fmt.type == pb.RESPONSE_FORMAT_TYPE_JSON_SCHEMA:
        if not fmt.json_schema:
            violations.append(Violation("response_format.json_schema", "required for json_schema"))
        else:
            answer_schema = check_schema(fmt.json_schema, "response_format.json_schema", violations)
    if request.options.json_schema:
        violations.append(Violation("options.json_schema", "not used by Complete; give response_format"))
    today = reference_date(messages, s.time_zone)
    plan = Plan(backend_messages(messages, tools, mode, today, s.time_zone), tools=tools, tool_mode=mode,
                answer_schema=answer_schema,
                user_text=next((m.content for m in reversed(messages) if m.role == "user"), ""), today=today,
                said="\n".join(m.content for m in messages if m.role == "user"))
    if plan.decodes_tools:
        plan.schema = tool_choice_schema(tools, mode, answer_schema)
    else:
        plan.schema = answer_schema
    return plan
