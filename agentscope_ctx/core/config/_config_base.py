"""`_Section`, the base of every config model, and how a pydantic error reads as a
`ConfigError`.

However a section is built (keywords, `model_validate`, `model_validate_json`,
`model_validate_strings`) or changed (attribute assignment), a bad value raises `ConfigError`
naming the field, with a short message ("invalid config field 'x.y': got ...; expected ..."),
never pydantic's `ValidationError`.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from .._errors import ConfigError, _short_repr

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["PlainName", "UsablePath", "did_you_mean"]

_MISSING = object()


class _Section(BaseModel):
    """Base of every config model: unknown fields are refused, assignments are validated, and
    every failure is a `ConfigError` naming the field.

    A failed assignment leaves the model as it was (pydantic keeps a value that a cross-field
    check then refuses). A sub-model changed on its own names its field without the section
    (``config.tool_result.recent_n = -1`` names ``'recent_n'``): it does not know its parent.
    """

    model_config = ConfigDict(
        extra="forbid", use_attribute_docstrings=True, validate_assignment=True
    )

    def __init__(self, /, **data: object) -> None:
        with _config_errors(type(self)):
            super().__init__(**data)

    # Marked as pydantic's own `__init__` (as `RootModel` does), so that a section validated
    # inside its parent is not built through it: the error then keeps its full path.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]

    # The `model_validate*` overrides pass pydantic's keyword options through unchanged (their
    # set grows with pydantic's version), hence `Any` as in pydantic's own signatures.
    @classmethod
    def model_validate(cls, obj: object, **options: Any) -> Self:
        """Validate a mapping (or a model instance); raises `ConfigError`."""
        with _config_errors(cls):
            return super().model_validate(obj, **options)

    @classmethod
    def model_validate_json(cls, json_data: str | bytes | bytearray, **options: Any) -> Self:
        """Validate a JSON document; raises `ConfigError`."""
        with _config_errors(cls):
            return super().model_validate_json(json_data, **options)

    @classmethod
    def model_validate_strings(cls, obj: object, **options: Any) -> Self:
        """Validate a mapping of strings; raises `ConfigError`."""
        with _config_errors(cls):
            return super().model_validate_strings(obj, **options)

    def __setattr__(self, name: str, value: object) -> None:
        if name not in type(self).model_fields and not name.startswith("_"):
            hint = did_you_mean(name, type(self).model_fields)
            raise ConfigError(f"unknown config field {_short_repr(name)}{hint}", field=name)
        previous = self.__dict__.get(name, _MISSING)
        fields_set = set(self.__pydantic_fields_set__)
        try:
            super().__setattr__(name, value)
        except ValidationError as exc:
            if previous is not _MISSING:
                self.__dict__[name] = previous
            object.__setattr__(self, "__pydantic_fields_set__", fields_set)
            raise _config_error(exc, type(self)) from None


@contextmanager
def _config_errors(model: type[BaseModel]) -> Iterator[None]:
    """What pydantic refuses inside, raised as the `ConfigError` naming the field of `model`."""
    try:
        yield
    except ValidationError as exc:
        raise _config_error(exc, model) from None


def _usable_path(path: Path) -> Path:
    """A path the file system can take, `~` expanded (POSIX allows any character but NUL)."""
    text = str(path)
    if "\x00" in text:
        raise ValueError("expected a path without NUL characters")
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        raise ValueError("expected a path of characters the file system can encode") from None
    try:
        return path.expanduser()
    except RuntimeError:  # "~name" of an unknown user, or no home directory
        raise ValueError("expected a '~' that names a known home directory") from None


UsablePath = Annotated[Path, AfterValidator(_usable_path)]


def _plain_name(name: str) -> str:
    """A name every store can hold as text: no NUL, no lone surrogate (PostgreSQL's text
    takes neither; UTF-8 cannot encode a surrogate)."""
    if "\x00" in name:
        raise ValueError("expected a name without NUL characters")
    if not name.isascii() and any("\ud800" <= c <= "\udfff" for c in name):
        raise ValueError("expected a name without lone surrogates (text UTF-8 can encode)")
    return name


PlainName = Annotated[str, AfterValidator(_plain_name)]
"""A session id or an agent name as a config gives it (names given at run time, as an agent's
own name, are stored safely instead: `stores.postgres._names`)."""


def did_you_mean(name: str, known: Iterable[str], prefix: Sequence[str] = ()) -> str:
    """``"; did you mean 'x'?"`` when a known name is close to `name` (difflib), else ``""``;
    `prefix`: the sections above it, named in the suggestion."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"; did you mean {'.'.join([*prefix, close[0]])!r}?" if close else ""


def _section_at(model: type[BaseModel] | None, path: Sequence[str]) -> type[BaseModel] | None:
    """The config model reached from `model` by the field names `path` (`None`: none)."""
    for part in path:
        field = model.model_fields.get(part) if model is not None else None
        if field is None:
            return None
        kinds = [field.annotation, *get_args(field.annotation)]  # `Section | None` too
        model = next((k for k in kinds if isinstance(k, type) and issubclass(k, BaseModel)), None)
    return model


def _config_error(exc: ValidationError, model: type[BaseModel] | None = None) -> ConfigError:
    """Turn pydantic's report into one `ConfigError` naming the first bad field and value;
    an unknown field of `model` (or of one of its sections) gets a "did you mean"."""
    error = exc.errors()[0]
    loc = [str(part) for part in error["loc"]]
    message = str(error["msg"]).removeprefix("Value error, ")
    # Cross-field checks name their field as "[name] ..." because pydantic gives them no loc.
    named = re.match(r"\[([\w.]+)\] (.*)", message, re.S)
    if named:
        loc.append(named[1])
        message = named[2]
    field = ".".join(loc)
    name = _short_repr(field)
    got = _short_repr(error.get("input"))
    if not field:
        return ConfigError(f"invalid config: got {got}; {message}")
    if named:
        return ConfigError(f"invalid config field {name}: {message}", field=field)
    if error["type"] == "extra_forbidden":
        section = _section_at(model, loc[:-1])
        hint = "" if section is None else did_you_mean(loc[-1], section.model_fields, loc[:-1])
        return ConfigError(f"unknown config field {name}{hint}", field=field)
    if error["type"] == "missing":
        return ConfigError(f"missing config field {name}", field=field)
    if error["type"] == "invalid_key":
        kind = type(error.get("input")).__name__
        return ConfigError(
            f"invalid config field {name}: got key {got} ({kind}); expected a field name "
            "(a string)",
            field=field,
        )
    return ConfigError(f"invalid config field {name}: got {got}; {message}", field=field)


def _under(section: str, error: ConfigError) -> ConfigError:
    """`error`, raised inside the config section `section`, with the field named from the
    top of the file (``'recent_n'`` -> ``'context.recent_n'``)."""
    if error.field is None:
        return ConfigError(f"{section}: {error}", field=section)
    field = f"{section}.{error.field}"
    message = str(error).replace(_short_repr(error.field), _short_repr(field), 1)
    message = message.replace("; did you mean '", f"; did you mean '{section}.", 1)
    return ConfigError(message, field=field)


S = TypeVar("S", bound=BaseModel)


def section_of(model: type[S], data: object, where: str) -> S:
    """The config section `where` read into `model`: `None` gives its defaults; data that is
    not a mapping, or an invalid field, raises a `ConfigError` naming the field from the top
    of the file (``'context.recent_n'``)."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"invalid config field {where!r}: got {_short_repr(data)}; expected a mapping of "
            f"{model.__name__} fields",
            field=where,
        )
    try:
        return model.model_validate(data)
    except ConfigError as exc:
        raise _under(where, exc) from None
