"""Tools with JSON-schema parameters and a registry that turns every call, even a failing one, into an observation."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from jaxseeker.tools.keys import redact, redact_value


class ToolError(Exception):
    """A tool failed in a way the agent should read about (bad argument, unreachable page, …)."""


@dataclasses.dataclass(frozen=True)
class Tool:
    """A named function the agent can call: `fn(arguments) -> observation`, arguments checked against `parameters`."""

    name: str
    description: str
    parameters: Mapping[str, Any]  # JSON schema of an object: {"type": "object", "properties": …, "required": […]}
    fn: Callable[[dict[str, Any]], str] = dataclasses.field(repr=False, compare=False)

    def schema(self) -> dict[str, Any]:
        """The OpenAI function schema: {"type": "function", "function": {name, description, parameters}}."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }


@dataclasses.dataclass(frozen=True)
class ToolResult:
    """What one call produced: the observation `text`, the `error` (None on success) and the wall time."""

    name: str
    arguments: Mapping[str, Any]
    text: str
    error: str | None
    latency_s: float


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


def _describe(spec: Mapping[str, Any]) -> str:
    kind = spec.get("type", "any")
    if kind == "array":
        return f"array of {spec.get('items', {}).get('type', 'any')}s"
    return str(kind)


def _coerce(name: str, value: Any, spec: Mapping[str, Any]) -> Any:
    kind = spec.get("type")
    if kind == "array" and isinstance(value, str):
        # Models often pass one string, or a JSON-encoded list, where the schema asks for a list.
        stripped = value.strip()
        if stripped.startswith("["):
            try:
                decoded = json.loads(stripped)
            except json.JSONDecodeError:
                decoded = None
            if isinstance(decoded, list):
                value = decoded
        if isinstance(value, str):
            value = [value]
    if kind == "integer" and isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if kind in _JSON_TYPES:
        bad_bool = isinstance(value, bool) and kind in ("integer", "number")
        if bad_bool or not isinstance(value, _JSON_TYPES[kind]):
            raise ToolError(f"argument '{name}' must be {_describe(spec)}, got {type(value).__name__}")
    if kind == "array":
        item_kind = spec.get("items", {}).get("type")
        if item_kind in _JSON_TYPES and not all(isinstance(v, _JSON_TYPES[item_kind]) for v in value):
            raise ToolError(f"argument '{name}' must be {_describe(spec)}")
        if len(value) < spec.get("minItems", 0):
            raise ToolError(f"argument '{name}' needs at least {spec['minItems']} item(s)")
    if "enum" in spec and value not in spec["enum"]:
        raise ToolError(f"argument '{name}' must be one of {list(spec['enum'])}, got {value!r}")
    return value


def check_arguments(parameters: Mapping[str, Any], arguments: Any) -> dict[str, Any]:
    """`arguments` checked against the object schema `parameters` (light coercion: str → [str]); raises ToolError."""
    if not isinstance(arguments, Mapping):
        raise ToolError(f"arguments must be a JSON object, got {type(arguments).__name__}")
    properties: Mapping[str, Any] = parameters.get("properties", {})
    unknown = sorted(set(arguments) - set(properties))
    if unknown:
        raise ToolError(f"unknown argument(s) {unknown}; known: {sorted(properties)}")
    for name in parameters.get("required", []):
        if name not in arguments:
            raise ToolError(f"missing required argument '{name}' ({_describe(properties.get(name, {}))})")
    return {name: _coerce(name, value, properties[name]) for name, value in arguments.items()}


def error_text(tool: str, message: str) -> str:
    """The observation an agent reads when a call fails."""
    return f"[tool error] {tool}: {message}"


class ToolRegistry:
    """Tools by name; `call` never raises: failures become ToolResults whose text names the problem."""

    def __init__(self, tools: Iterable[Tool] = ()):
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        """Add `tool`; a second tool with the same name is an error."""
        if tool.name in self._tools:
            raise ValueError(f"ToolRegistry: a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def extended(self, *tools: Tool) -> ToolRegistry:
        """A new registry with these tools added (e.g. a per-episode `answer_submit`); this one is unchanged."""
        return ToolRegistry([*self._tools.values(), *tools])

    @property
    def names(self) -> list[str]:
        """Registered tool names, in registration order."""
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __getitem__(self, name: str) -> Tool:
        return self._tools[name]

    def schemas(self) -> list[dict[str, Any]]:
        """OpenAI function schemas of every tool, for the system prompt."""
        return [tool.schema() for tool in self._tools.values()]

    def call(self, name: str, arguments: Any) -> ToolResult:
        """Run tool `name` on `arguments`; an unknown tool, a bad argument or an exception becomes an error result."""
        start = time.perf_counter()
        error: str | None = None
        tool = self._tools.get(name)
        if tool is None:
            error = f"unknown tool {name!r}; available tools: {', '.join(self._tools) or '(none)'}"
        else:
            try:
                text = tool.fn(check_arguments(tool.parameters, arguments))
                if not isinstance(text, str):
                    raise TypeError(f"tool returned {type(text).__name__}, not str")
            except ToolError as exc:
                error = str(exc)
            except Exception as exc:  # noqa: BLE001 - a failing tool must become an observation, never a crash
                error = f"{type(exc).__name__}: {exc}"
        if error is not None:
            error = redact(error)
            text = error_text(name, error)
        args = dict(arguments) if isinstance(arguments, Mapping) else {"_raw": arguments}
        return ToolResult(name, redact_value(args), redact(text), error, time.perf_counter() - start)

    def call_many(self, calls: Sequence[tuple[str, Any]], max_workers: int = 8) -> list[ToolResult]:
        """`call` for each (name, arguments) pair on a thread pool; results in the order of `calls`."""
        if not calls:
            return []
        with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(calls)))) as pool:
            return list(pool.map(lambda c: self.call(c[0], c[1]), calls))
