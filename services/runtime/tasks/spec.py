"""Declared tasks: one YAML file per task (name, version, schemas, prompt, route, sampling, deadline, cache).

A task file is validated whole at start-up — its fields, its three JSON schemas, its templates
(every variable an input field), its post-processing step — and a bad one stops the process (the
reasoning service or the gateway) with one line naming the file and the field (:class:`TaskFileError`).
Templates are Jinja2 in a sandbox with undefined variables an error; the rendered prompt is the
task's only user text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import jsonschema
import yaml
from jinja2 import StrictUndefined, TemplateSyntaxError, meta
from jinja2.sandbox import SandboxedEnvironment
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from services.runtime.tasks import post, sections

BUILTIN_DIR = Path(__file__).parent / "defs"
NAME = r"^[a-z][a-z0-9_]{0,47}$"
ENV = SandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=False, autoescape=False)
ENV.filters["tojson_ko"] = lambda v: json.dumps(v, ensure_ascii=False)  # Korean as written, not \uXXXX


class TaskFileError(Exception):
    """A task file that cannot be served: ``file: field: what is wrong`` in one line."""


class Sampling(BaseModel):
    """How the task's call samples: deterministic by default."""

    model_config = ConfigDict(extra="forbid")
    temperature: float = Field(0.0, ge=0, le=2)
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = Field(7, ge=0, description="a fixed seed (where the backend honours one); null: none")
    reproducible: bool = Field(False, description="the same output for the same input whatever ran before: the "
                                                  "prompt is read afresh, without the backend's prompt cache (slower "
                                                  "by the prompt's prefill; llama.cpp)")


class Cache(BaseModel):
    """Whether results are cached (by task version + canonical input + model route) and how long."""

    model_config = ConfigDict(extra="forbid")
    ttl_s: int = Field(ge=1, le=30 * 86400)


class TaskFile(BaseModel):
    """The fields of one task file."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=NAME)
    version: int = Field(ge=1)
    description: str = Field(min_length=1, max_length=500)
    route: str = Field("", max_length=64, description="a role --task-routes maps to a model route; "
                                                     "unmapped: --tasks-route, else the default route")
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    result_schema: dict[str, Any] | None = None
    post: str | None = None
    system: str = Field(min_length=1)
    prompt: str = Field(min_length=1)
    sampling: Sampling = Field(default_factory=Sampling)
    max_tokens: int = Field(512, ge=16, le=8192)
    deadline_s: float = Field(60.0, gt=0, le=600)
    cache: Cache | None = None
    sections: dict[str, Literal["resume", "resume_personal", "posting"]] = Field(
        default_factory=dict, description="string inputs cut to the sections the task reads before the prompt is "
                                          "rendered (services/runtime/tasks/sections.py); post steps see them whole")
    examples: list[dict[str, Any]] = Field(default_factory=list, max_length=5,
                                           description="inputs shown by GET /v1/tasks (each must validate)")


EXAMPLE_QUOTE = re.compile(r'"([^"\n]{2,60})"|“([^”\n]{2,60})”')


def squash(text: str) -> str:
    """``text`` without whitespace (how an example phrase and an output value are compared)."""
    return "".join(text.split())


@dataclass(frozen=True)
class Task:
    """A loaded task: its declaration, compiled templates and validators."""

    spec: TaskFile
    path: Path
    system: Any
    prompt: Any
    input_validator: jsonschema.protocols.Validator
    output_validator: jsonschema.protocols.Validator
    result_validator: jsonschema.protocols.Validator
    post: Callable[[dict, dict], dict] | None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def example_phrases(self) -> tuple[str, ...]:
        """The phrases the task's instructions quote as examples (``"네이버 1차 면접"``), spaces squashed.

        A model on a small budget copies them as its answer; an output value may hold one only when the
        input does too (:func:`services.runtime.tasks.checks.copied_example`).
        """
        found = [a or b for a, b in EXAMPLE_QUOTE.findall(self.spec.system + "\n" + self.spec.prompt)]
        return tuple(dict.fromkeys(squash(q) for q in found if len(squash(q)) >= 3 and "{{" not in q))

    def with_defaults(self, value: dict) -> dict:
        """``value`` with every declared input field present: its schema default, else None, where absent."""
        props = self.spec.input_schema.get("properties", {})
        filled = {name: prop.get("default") if isinstance(prop, dict) else None for name, prop in props.items()}
        return {**filled, **value}

    def render(self, value: dict, *, cut: bool = True) -> tuple[str, str]:
        """The system and user messages for one (valid) input; absent optional fields are their default or None.

        ``cut``: the inputs the task file names under ``sections`` reduced to the sections it reads.
        """
        full = self.with_defaults(value)
        if cut:
            full.update({name: sections.cut(full[name], kind) for name, kind in self.spec.sections.items()
                         if isinstance(full.get(name), str)})
        return self.system.render(**full), self.prompt.render(**full)


def _path(error: jsonschema.ValidationError | jsonschema.SchemaError) -> str:
    out = ""
    for part in error.absolute_path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _fail(path: Path, field: str, message: str) -> TaskFileError:
    return TaskFileError(f"{path.name}: {field}: {message}".replace("\n", " ")[:400])


def _validator(path: Path, field: str, schema: dict) -> jsonschema.protocols.Validator:
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as err:
        where = _path(err)
        raise _fail(path, f"{field}.{where}" if where else field, err.message) from None
    if schema.get("type") != "object":
        raise _fail(path, f"{field}.type", "must be 'object'")
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def _template(path: Path, field: str, source: str, inputs: set[str]) -> Any:
    try:
        variables = meta.find_undeclared_variables(ENV.parse(source))
        template = ENV.from_string(source)
    except TemplateSyntaxError as err:
        raise _fail(path, field, f"template line {err.lineno}: {err.message}") from None
    unknown = sorted(variables - inputs)
    if unknown:
        raise _fail(path, field, f"uses {unknown}, not fields of input_schema")
    return template


def load_file(path: Path) -> Task:
    """One task file, validated whole (:class:`TaskFileError` names the first thing wrong)."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise _fail(path, "(file)", str(err).splitlines()[0] if str(err) else type(err).__name__) from None
    if not isinstance(raw, dict):
        raise _fail(path, "(file)", "must be a mapping of the task's fields")
    try:
        spec = TaskFile.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        raise _fail(path, ".".join(str(p) for p in first["loc"]) or "(file)", first["msg"]) from None
    if spec.name != path.stem:
        raise _fail(path, "name", f"{spec.name!r} is not the file's name ({path.stem!r})")
    inputs_v = _validator(path, "input_schema", spec.input_schema)
    output_v = _validator(path, "output_schema", spec.output_schema)
    result_v = _validator(path, "result_schema", spec.result_schema) if spec.result_schema else output_v
    if spec.post is not None and spec.post not in post.STEPS:
        raise _fail(path, "post", f"{spec.post!r} is not a step (steps: {sorted(post.STEPS)})")
    if spec.result_schema is not None and spec.post is None:
        raise _fail(path, "result_schema", "only with a post step (otherwise the result is the output)")
    fields = set(spec.input_schema.get("properties", {}))
    for name in spec.sections:
        if (spec.input_schema.get("properties", {}).get(name) or {}).get("type") != "string":
            raise _fail(path, f"sections.{name}", "names no string input of input_schema")
    system = _template(path, "system", spec.system, fields)
    prompt = _template(path, "prompt", spec.prompt, fields)
    for i, example in enumerate(spec.examples):
        problem = next(iter(inputs_v.iter_errors(example)), None)
        if problem is not None:
            raise _fail(path, f"examples[{i}].{_path(problem)}".rstrip("."), problem.message)
    return Task(spec, path, system, prompt, inputs_v, output_v, result_v,
                post.STEPS[spec.post] if spec.post else None)


def load_tasks(directories: list[Path]) -> dict[str, Task]:
    """Every ``*.yaml`` task in ``directories`` (a later directory may not redeclare a name)."""
    tasks: dict[str, Task] = {}
    for directory in directories:
        if not directory.is_dir():
            raise TaskFileError(f"{directory}: (directory): not a directory of task files")
        for path in sorted(directory.glob("*.yaml")):
            task = load_file(path)
            if task.name in tasks:
                raise _fail(path, "name", f"{task.name!r} is declared twice (also in {tasks[task.name].path.name})")
            tasks[task.name] = task
    return tasks
