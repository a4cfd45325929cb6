"""The generated parts of the documentation: a MkDocs hook (mkdocs.yml `hooks:`).

A page holds a marker, ``<!-- generated: NAME -->``, alone on a line; at build time the hook
puts in its place what the code says, so the page cannot drift from it:

- ``config-fields``: every field of `ContextConfig`, section by section (nested), with its
  default, the values it allows and its docstring (docs/configuration.md);
- ``cli-reference``: every command of ``agentscope-ctx`` and each of its arguments and
  options, from the argparse parser (docs/reference/cli.md);
- ``api``: a mkdocstrings block for every name in ``agentscope_ctx.__all__`` (of both
  AgentScope lines) and for every config section (docs/reference/api.md);
- ``events``: the spans, the pipeline span's attributes, the metrics and the 2.x notice
  event (docs/reference/events.md).

tests/edge/test_docs_reference.py renders the pages with `render` and checks them against the
model and the parser.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import itertools
import re
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import annotated_types
from pydantic import BaseModel

PACKAGE = Path(__file__).resolve().parent.parent / "agentscope_ctx"
MARKER = re.compile(r"^<!-- generated: ([a-z-]+) -->$", re.MULTILINE)


# -- the config ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Field:
    """One leaf field of the config: its dotted path and what the model says of it."""

    path: str
    annotation: Any
    default: object
    allowed: str
    doc: str


def _is_section(annotation: object) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def sections(
    model: type[BaseModel] | None = None, prefix: str = ""
) -> Iterator[tuple[str, type[BaseModel], str]]:
    """Every section of the config, nested ones too: its dotted path (``""`` for the top
    level), its model and its docstring (the field's in its parent)."""
    if model is None:
        from agentscope_ctx.core.config._config import ContextConfig

        model = ContextConfig
        yield "", model, ""
    for name, info in model.model_fields.items():
        section = info.annotation
        if isinstance(section, type) and issubclass(section, BaseModel):
            path = f"{prefix}{name}"
            yield path, section, info.description or ""
            yield from sections(section, f"{path}.")


def fields() -> list[Field]:
    """Every leaf field of `ContextConfig` (sections excluded), in the model's order."""
    found = []
    for path, model, _ in sections():
        for name, info in model.model_fields.items():
            if _is_section(info.annotation):
                continue
            default = info.get_default(call_default_factory=True)
            found.append(
                Field(
                    path=f"{path}.{name}" if path else name,
                    annotation=info.annotation,
                    default=default,
                    allowed=_allowed(info.annotation, info.metadata),
                    doc=" ".join((info.description or "").split()),
                )
            )
    return found


def _plain(value: object) -> str:
    """A value as YAML would write it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:,}" if isinstance(value, int) and value >= 1_000 else str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_plain(item) for item in value) + "]"
    return str(value)


def _bounds(metadata: list[Any]) -> list[str]:
    found = []
    for item in metadata:
        for cls, sign in (
            (annotated_types.Gt, ">"),
            (annotated_types.Ge, ">="),
            (annotated_types.Lt, "<"),
            (annotated_types.Le, "<="),
        ):
            if isinstance(item, cls):
                bound = getattr(item, {">": "gt", ">=": "ge", "<": "lt", "<=": "le"}[sign])
                found.append(f"{sign} {_plain(bound)}")
        if isinstance(item, annotated_types.MinLen) and item.min_length:
            found.append(f"at least {item.min_length} long")
    return found


def _allowed(annotation: object, metadata: list[Any]) -> str:
    """The values a field takes: its type, its choices or its bounds, and whether null is
    allowed."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    nullable = False
    if origin in (typing.Union, types.UnionType):
        nullable = type(None) in args
        rest = [arg for arg in args if arg is not type(None)]
        annotation = rest[0] if len(rest) == 1 else annotation
        origin = typing.get_origin(annotation)
        args = typing.get_args(annotation)
    extra: list[Any] = list(metadata)
    if origin is typing.Annotated:
        annotation, *more = args
        extra += more
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        text = " / ".join(f"`{value}`" for value in args)
    else:
        name = {int: "integer", float: "number", str: "text", bool: "`true` / `false`"}.get(
            annotation,  # type: ignore[call-overload]
            None,
        )
        if name is None:
            if origin is list:
                name = "list"
            elif isinstance(annotation, type) and issubclass(annotation, Path):
                name = "path"
            else:
                name = getattr(annotation, "__name__", str(annotation)).lower()
        text = name
        bounds = _bounds(extra)
        if bounds:
            text += " " + ", ".join(bounds)
    return text + (", or `null`" if nullable else "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def config_fields() -> str:
    """A table per section: field, default, allowed values, meaning."""
    by_section: dict[str, list[Field]] = {}
    for field in fields():
        by_section.setdefault(field.path.rpartition(".")[0], []).append(field)
    out: list[str] = []
    for path, _model, doc in sections():
        rows = by_section.get(path, [])
        if not rows:
            continue
        if path:
            out += [f"### `{path}`", "", " ".join(doc.split()), ""]
        else:
            out += ["### The top level", ""]
        out += ["| field | default | allowed | meaning |", "|---|---|---|---|"]
        for field in rows:
            out.append(
                f"| `{field.path}` | `{_cell(_plain(field.default))}` | {_cell(field.allowed)} "
                f"| {_cell(field.doc)} |"
            )
        out.append("")
    return "\n".join(out)


# -- the command line -----------------------------------------------------------------------


def parser() -> argparse.ArgumentParser:
    from agentscope_ctx.cli._parser import build_parser

    return build_parser()


def commands(root: argparse.ArgumentParser | None = None) -> dict[str, argparse.ArgumentParser]:
    """The parser's commands by name, in the order ``--help`` lists them."""
    root = root or parser()
    for action in root._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def arguments(command: argparse.ArgumentParser) -> list[argparse.Action]:
    """A command's arguments and options, ``--help`` left out."""
    return [a for a in command._actions if not isinstance(a, argparse._HelpAction)]


def _argument_name(action: argparse.Action) -> str:
    if not action.option_strings:
        return action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    names = ", ".join(action.option_strings)
    if action.nargs == 0:
        return names
    metavar = action.metavar if isinstance(action.metavar, str) else action.dest.upper()
    return f"{names} {metavar}"


def _help(action: argparse.Action) -> str:
    text = " ".join((action.help or "").split())
    if action.help and "%(" in action.help:
        text = text % {"default": action.default, "prog": ""}
    extras = []
    if action.option_strings and action.nargs != 0 and action.default not in (None, False):
        extras.append(f"default: `{action.default}`")
    if action.choices:
        extras.append("one of " + ", ".join(f"`{c}`" for c in action.choices))
    if action.nargs in ("?", "*") and not action.option_strings:
        extras.append("optional")
    if isinstance(action, argparse._AppendAction):
        extras.append("repeatable")
    return text + (f" ({'; '.join(extras)})" if extras else "")


def cli_reference() -> str:
    """Per command: its usage, its description and a table of its arguments and options."""
    root = parser()
    out = [
        "## `agentscope-ctx`",
        "",
        " ".join((root.description or "").split()),
        "",
        "```text",
        root.format_usage().strip(),
        "```",
        "",
    ]
    for name, command in commands(root).items():
        out += [
            f"## `{name}`",
            "",
            " ".join((command.description or "").split()),
            "",
            "```text",
            command.format_usage().strip(),
            "```",
            "",
        ]
        rows = arguments(command)
        if rows:
            out += ["| argument or option | meaning |", "|---|---|"]
            for action in rows:
                out.append(f"| `{_cell(_argument_name(action))}` | {_cell(_help(action))} |")
            out.append("")
        else:
            out += ["No arguments or options.", ""]
    return "\n".join(out)


# -- the Python API -------------------------------------------------------------------------


def public_names() -> dict[str, list[tuple[str, str]]]:
    """Every name of ``agentscope_ctx.__all__`` on either AgentScope line: the modules it
    comes from, each with the line it exists on (``""``: both). Read from the package's
    ``__init__``, the type checkers' imports; a name with one class per line, as
    `ContextManager`, has two."""
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    every: list[str] = []
    modules: dict[str, list[tuple[str, str]]] = {}

    def visit(nodes: list[ast.stmt], line: str) -> None:
        for node in nodes:
            if isinstance(node, ast.If):
                test = ast.unparse(node.test)
                if test.endswith("IS_1X"):
                    visit(node.body, "1.x")
                    visit(node.orelse, "2.x")
                else:
                    visit(node.body, line)
                    visit(node.orelse, line)
            elif isinstance(node, ast.ImportFrom) and node.level == 1:
                module = f"agentscope_ctx.{node.module}" if node.module else "agentscope_ctx"
                for alias in node.names:
                    modules.setdefault(alias.asname or alias.name, []).append((module, line))
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                if isinstance(node.value, ast.List) and not every:
                    every.extend(ast.literal_eval(e) for e in node.value.elts)

    visit(tree.body, "")
    return {
        name: modules.get(name, [("agentscope_ctx", "")]) for name in every if name != "__version__"
    }


API_GROUPS: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("Classes", lambda n: n[0].isupper() and not n.isupper()),
    ("Functions", lambda n: n[0].islower()),
    ("Configuration", lambda n: n.endswith("Config")),
    ("Reports", lambda n: n.endswith(("Report", "Result", "Usage", "Breakdown"))),
    ("Errors", lambda n: n.endswith("Error")),
    ("Constants", str.isupper),
)
"""The API page's sections in order, and which public names each takes: a name goes to the
last section that takes it (so "Classes" holds the classes no later section takes)."""


PUBLIC_MODULES = ("agentscope_ctx.testing",)
"""Public modules besides the package's own names, each documented whole (once it exists)."""


def api() -> str:
    """One mkdocstrings block per public name, by kind, then the config sections that are not
    exported by name."""
    names = public_names()
    home = {}
    for title, takes in API_GROUPS:
        home.update({name: title for name in names if takes(name)})
    out: list[str] = []
    for title, _ in API_GROUPS:
        group = sorted((n for n in names if home.get(n) == title), key=str.lower)
        if not group:
            continue
        out += [f"## {title}", ""]
        for name in group:
            for module, line in sorted(names[name], key=lambda m: m[1], reverse=True):
                on_line = f" (AgentScope {line})" if line else ""  # 2.x first: the default
                out += [
                    f"::: {module}.{name}",
                    "    options:",
                    f'      heading: "{name}{on_line}"',
                    "",
                ]
    left = sorted(set(names) - set(home))
    if left:
        raise ValueError(f"public names in no section of the API page: {left}")
    for module in PUBLIC_MODULES:
        if (PACKAGE.parent / module.replace(".", "/") / "__init__.py").is_file():
            out += [
                f"## `{module}`",
                "",
                f"::: {module}",
                "    options:",
                "      show_root_heading: false",
                "",
            ]
    extra = sorted(
        {(m.__module__, m.__name__) for _, m, _ in sections() if m.__name__ not in names},
        key=lambda m: m[1],
    )
    if extra:
        out += [
            "## The other config sections",
            "",
            "Sections of `ContextConfig` not exported by name: reach them as `config.store`, "
            "`config.cache`, ... (every field, with its default and range: "
            "[Configuration](../configuration.md)).",
            "",
        ]
        for module, name in extra:
            out += [f"::: {module}.{name}", ""]
    return "\n".join(out)


# -- events and spans -------------------------------------------------------------------------

FIGURE_MEANINGS = {
    "tokens_before": "the prompt's size before relief (calibrated estimate)",
    "tokens_after": "its size after the run: what the model is sent",
    "threshold": "the compaction trigger (`compact_trigger_ratio` x the budget)",
    "note": "why the summary is not the model's, or why nothing was compacted",
}
"""Meanings of the pipeline figures whose `PipelineReport` field has no docstring."""


def figures() -> dict[str, tuple[str, str]]:
    """The pipeline run's figures (`PipelineReport.figures`): name -> (type, meaning)."""
    from agentscope_ctx.core._pipeline import PipelineReport

    docs = _attribute_docs(PipelineReport)
    hints = typing.get_type_hints(PipelineReport)
    found = {}
    for name in PipelineReport().figures():
        hint = hints.get(name)
        kind = {int: "int", float: "float"}.get(hint, "string")  # type: ignore[arg-type]
        found[name] = (kind, docs.get(name) or FIGURE_MEANINGS.get(name, ""))
    return found


def _attribute_docs(cls: type) -> dict[str, str]:
    """A class's attribute docstrings (the string under each annotated name)."""
    import inspect

    tree = ast.parse(inspect.getsource(cls))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, following in itertools.pairwise(body):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[node.target.id] = " ".join(following.value.value.split())
    return docs


def events() -> str:
    from agentscope_ctx.telemetry._group import CONVERSATION_ID, SESSION_ID, USER_ID
    from agentscope_ctx.telemetry._otel import _INSTRUMENTS
    from agentscope_ctx.telemetry._spans import PIPELINE_SPAN, PREFIX
    from agentscope_ctx.telemetry._usage import USAGE_SPAN

    out = [
        "## Spans",
        "",
        "| span | what it is |",
        "|---|---|",
        f"| `{PIPELINE_SPAN}` | one pipeline run, a child of AgentScope's reply span |",
        f"| `chat <model> ({PREFIX}<role>)` | a helper model's run: `compactor`, "
        "`summarizer` or `consolidator` (GenAI attributes) |",
        f"| `{USAGE_SPAN}` | the provider's usage of one of the agent's model calls "
        "(`gen_ai.usage.*`) |",
        "",
        "Each of them (but the consolidation's, which works for no one session) also carries "
        f"the tenant it worked for, so that a backend groups one session's runs: `{SESSION_ID}` "
        f"and `{CONVERSATION_ID}` (the config's `recall.session`), `{USER_ID}` (`recall.user`); "
        "a part the config does not set is left out ([Observability](../observability.md)).",
        "",
        f"## `{PIPELINE_SPAN}` attributes and the 2.x notice event",
        "",
        "The figures of a run (`PipelineReport.figures()`) are the keys of the 2.x notice "
        'event\'s value (`CustomEvent(name="agentscope_ctx", value=...)`, beside its `text`) '
        f"and, each prefixed `{PREFIX}`, the pipeline span's attributes (`tokens_before` is "
        f"`{PREFIX}tokens_before`). A figure that is `null` is left off the span.",
        "",
        "| figure | type | meaning |",
        "|---|---|---|",
        "| `when` (the span only) | string | what the run precedes: `model_call`, "
        "`tool_result`, `reply`, `forced`, `compress_context`, `emergency` |",
    ]
    for name, (kind, meaning) in figures().items():
        out.append(f"| `{name}` | {kind} | {_cell(meaning)} |")
    out += [
        "| `freed` | mapping | tokens freed by each rung of the ladder that ran; on the span "
        f"one attribute per rung, `{PREFIX}freed.<rung>` (a space in its name is `_`) |",
        "| `rungs` (the span only) | string[] | the rungs that freed tokens, in order |",
        "| `compaction.helper_input_tokens`, `compaction.helper_output_tokens` (the span only) "
        "| int | the Compactor's model calls in the run, as the provider reported |",
        "",
        "## Metrics",
        "",
        "| instrument | kind | unit | what it counts |",
        "|---|---|---|---|",
    ]
    for kind, name, unit, text in _INSTRUMENTS.values():
        out.append(f"| `{name}` | {kind} | `{unit}` | {text} |")
    out.append("")
    return "\n".join(out)


# -- the hook -----------------------------------------------------------------------------------

GENERATORS: dict[str, Callable[[], str]] = {
    "config-fields": config_fields,
    "cli-reference": cli_reference,
    "api": api,
    "events": events,
}


def render(markdown: str) -> str:
    """A page's Markdown with each marker replaced by what it names."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(
                f"unknown generated part {name!r}; expected one of {sorted(GENERATORS)}"
            )
        return GENERATORS[name]()

    return MARKER.sub(replace, markdown)


def on_page_markdown(markdown: str, **_: object) -> str:
    """MkDocs: the page's Markdown, generated parts in."""
    return render(markdown)
