"""What a task's input and result must be: checked against the task's schemas, with paths that name the field."""

from __future__ import annotations

import re

import jsonschema

from services.runtime.tasks import post as steps
from services.runtime.tasks.spec import Task


class TaskInputError(ValueError):
    """An input a task cannot take: a message and every bad field as (``input.<path>``, what is wrong)."""

    def __init__(self, message: str, violations: list[tuple[str, str]]) -> None:
        super().__init__(message)
        self.message = message
        self.violations = violations


def field_path(error: jsonschema.ValidationError, root: str) -> str:
    """``input.history[0].answer``: where a validation error is."""
    out = root
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def errors_of(validator: jsonschema.protocols.Validator, value: object, root: str) -> list[tuple[str, str]]:
    """Every validation error as (path, message), in path order (10 at most)."""
    found = sorted(validator.iter_errors(value), key=lambda e: list(map(str, e.absolute_path)))
    return [(field_path(e, root), describe(e)[:300]) for e in found[:10]]


def describe(error: jsonschema.ValidationError) -> str:
    """What is wrong, without the value itself when it is text (a résumé must not come back in an error)."""
    if error.validator in ("maxLength", "minLength") and isinstance(error.instance, str):
        bound = "at most" if error.validator == "maxLength" else "at least"
        return f"{len(error.instance)} characters; {bound} {error.validator_value}"
    return error.message


def first_error(validator: jsonschema.protocols.Validator, value: object, root: str) -> str | None:
    """The first validation error as ``path: message`` (None when ``value`` is valid)."""
    found = errors_of(validator, value, root)
    return f"{found[0][0]}: {found[0][1]}"[:300] if found else None


def bad_text(value: object, path: str) -> str | None:
    """The path of the first key or string holding a lone surrogate (JSON can escape one; UTF-8 cannot carry it)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path
    elif isinstance(value, dict):
        for key, item in value.items():
            found = bad_text(key, path) if isinstance(key, str) else None
            found = found or bad_text(item, f"{path}.{key}")
            if found:
                return found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = bad_text(item, f"{path}[{i}]")
            if found:
                return found
    return None


def checked_input(task: Task, value: object) -> dict:
    """The input with defaults filled; :class:`TaskInputError` naming ``input.<field>`` when it breaks the schema."""
    if not isinstance(value, dict):
        raise TaskInputError(f"{task.name}: the input must be a JSON object", [("input", "not an object")])
    where = bad_text(value, "input")
    if where is not None:
        message = "must be valid Unicode text (no lone surrogate code points)"
        raise TaskInputError(f"{where}: {message}", [(where, message)])
    violations = errors_of(task.input_validator, value, "input")
    if violations:
        raise TaskInputError(f"the input does not follow {task.name}'s input_schema: "
                             f"{violations[0][0]}: {violations[0][1]}"[:400], violations)
    full = task.with_defaults(value)
    check = steps.CHECKS.get(task.spec.post or "")
    if check is not None:
        try:
            check(full)
        except steps.PostError as err:
            raise TaskInputError(str(err), [(err.field, str(err))]) from None
    return full


def finish(task: Task, output: dict, value: dict) -> dict:
    """The post step's result, checked against ``result_schema`` (ValueError when the step broke it)."""
    result = task.post(output, value) if task.post is not None else output
    problem = first_error(task.result_validator, result, "result")
    if problem is not None:
        raise ValueError(f"{task.name}'s result broke its result_schema: {problem}")
    return result


def _strings(value: object, path: str):
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(item, f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _strings(item, f"{path}[{i}]")


def _letters(text: str) -> str:
    """Letters and digits only: "[네이버] 1차 면접" holds "네이버 1차 면접" (spaces and brackets aside)."""
    return re.sub(r"[\W_]+", "", text).lower()


def copied_example(task: Task, produced: object, value: dict, root: str = "output") -> str | None:
    """``<path>: …`` when a string of ``produced`` copies an example the task's instructions quote.

    Copied: the phrase is in the string and not in the input ("네이버 1차 면접" for a 카카오 notice). None when
    nothing was copied.
    """
    phrases = [(p, _letters(p)) for p in task.example_phrases]
    if not phrases:
        return None
    given = _letters(" ".join(text for _, text in _strings(value, "input")))
    for path, text in _strings(produced, root):
        flat = _letters(text)
        for phrase, letters in phrases:
            if letters and letters in flat and letters not in given:
                return f"{path}: copies the instructions' example {phrase!r}, which the input does not hold"
    return None
