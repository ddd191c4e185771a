"""Settings: typed dataclasses read from YAML mappings and `key=value` overrides, all checked one way.

A settings class is a dataclass. Each field's annotation is its type; where the type says too little (a count, a
probability, a folder), the field carries a rule: `setting(default, accepts=..., meaning=...)`, or `choice(default,
choices)`. Rules that tie fields together are the class's `check()` method, which raises `ValueError`. A field
whose annotation is another settings class is a section, read by that class.

`read_settings(cls, mapping, where)` builds an instance from a mapping; `check_settings` checks a mapping against a
class it does not build (transformers' `TrainingArguments`, `HfAttnConfig`). Either refuses, as a `SettingsError`
that begins with `where` (the file, the section): an unknown key with the keys it may have meant, a value of the
wrong type with the type and the default, a value outside its rule with what the rule allows.
"""

from __future__ import annotations

import dataclasses
import difflib
import sys
import types
import typing
from collections.abc import Callable, Collection, Mapping
from typing import Any, Literal, TypeVar

from .configuration_hf_attn import is_number

SettingsClass = TypeVar("SettingsClass")
MOST_KEYS_LISTED = 30  # an unknown key with no close match lists the allowed keys when there are no more than this


class SettingsError(ValueError):
    """A mapping (a YAML file's section, overrides) that the settings class it feeds cannot accept."""


@dataclasses.dataclass(frozen=True)
class Rule:
    """What a field's value must be beyond its type: `accepts(value)` is true, said to the user as `meaning`."""

    accepts: Callable[[Any], bool]
    meaning: str

    def refusal(self, key: str, value: Any) -> str:
        """What is said of a value of `key` the rule does not accept."""
        return f"`{key}` must be {self.meaning}, got {value!r}."


def setting(default: Any = dataclasses.MISSING, *, accepts: Callable[[Any], bool] | None = None, meaning: str = "",
            default_factory: Any = dataclasses.MISSING) -> Any:
    """A dataclass field with an optional rule (`Rule`) that `read_settings` applies to a value read for it."""
    metadata = {"rule": Rule(accepts, meaning)} if accepts is not None else {}
    return dataclasses.field(default=default, default_factory=default_factory, metadata=metadata)


def choice(default: Any, choices: Collection[Any]) -> Any:
    """A field whose value is one of `choices`."""
    return setting(default, accepts=lambda value: value in choices, meaning=f"one of {sorted(choices)}")


def or_none(accepts: Callable[[Any], bool]) -> Callable[[Any], bool]:
    """`accepts`, and None too."""
    return lambda value: value is None or accepts(value)


def did_you_mean(key: str, known: Collection[str]) -> str:
    """" Did you mean a, b?" naming the known keys closest to `key` (by spelling, else containing it); with none
    close, the known keys when they are few enough to read."""
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
    close = close or [name for name in known if key.lower() in name.lower()]
    if close:
        return f" Did you mean {', '.join(close[:5])}?"
    return f" Allowed: {', '.join(sorted(known))}." if len(known) <= MOST_KEYS_LISTED else ""


def refuse_unknown_keys(values: Mapping[str, Any], known: Collection[str], where: str, owner: str,
                        error: type[SettingsError] = SettingsError) -> None:
    """An `error` for the first key of `values` that is not one of `known` (the keys of `owner`: a class, a
    section), with the keys it may have meant."""
    for key in values:
        if key not in known:
            raise error(f"{where}: unknown key `{key}` for {owner}.{did_you_mean(str(key), known)}")


def _field_hints(cls: type) -> dict[str, Any]:
    """Each field's annotation resolved, or None where it cannot be (a name only a type checker imports)."""
    try:
        return typing.get_type_hints(cls)
    except NameError:
        hints: dict[str, Any] = {}
        for owner in reversed(cls.__mro__):
            namespace = vars(sys.modules[owner.__module__])
            for name, annotation in vars(owner).get("__annotations__", {}).items():
                try:
                    hints[name] = eval(annotation, namespace) if isinstance(annotation, str) else annotation  # noqa: S307
                except Exception:  # noqa: BLE001 - an annotation that does not resolve: checked by its default
                    hints[name] = None
        return hints


def matches_type(value: Any, hint: Any) -> bool | None:
    """Whether `value` is of the type `hint` states (an int passes for a float, a bool for nothing but a bool); None
    when the hint is of a kind this reader does not judge (a class of its own, an enum), which any value passes."""
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        verdicts = [matches_type(value, argument) for argument in typing.get_args(hint)]
        return True if any(verdicts) else (None if None in verdicts else False)
    if origin is Literal:
        return None  # the choices are a rule's business (`choice`): it says what they are
    if hint is type(None):
        return value is None
    plain = origin or hint
    if plain is float:
        return is_number(value)
    if plain is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if plain in (bool, str, dict, list, tuple):
        return isinstance(value, (list, tuple) if plain in (list, tuple) else plain)
    return None


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def _check_value(key: str, value: Any, field: dataclasses.Field, hint: Any) -> None:
    """A ValueError unless `value` is of the field's type and passes its rule; a field with a rule says what the rule
    allows (a count, a folder), which says more than its type."""
    default = field.default
    fits = matches_type(value, hint) if hint is not None else None
    if fits is None and hint is None and default is not dataclasses.MISSING and default is not None:
        fits = value is None or matches_type(value, type(default))  # an unresolved annotation: judged by the default
    rule = field.metadata.get("rule")
    if rule is not None and (fits is False or not rule.accepts(value)):
        raise ValueError(rule.refusal(key, value))
    if fits is False:
        is_mapping = (typing.get_origin(hint) or hint) is dict
        expected = "a mapping" if is_mapping else f"of type {_type_name(hint or type(default))}"
        like = f" (like its default {default!r})" if default not in (dataclasses.MISSING, None) else ""
        raise ValueError(f"`{key}` must be {expected}{like}, got {value!r} ({type(value).__name__}).")


class Settings:
    """The base of a settings dataclass: built in any way (`read_settings`, a constructor, `dataclasses.replace`), it
    checks each field's type and rule, then its own `check()`."""

    def __post_init__(self) -> None:
        hints = _field_hints(type(self))
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            if not (isinstance(hints.get(field.name), type) and dataclasses.is_dataclass(hints[field.name])):
                _check_value(field.name, getattr(self, field.name), field, hints.get(field.name))
        self.check()

    def check(self) -> None:
        """The rules that tie fields together: a ValueError saying what to change."""


def check_settings(cls: type, values: Any, where: str) -> dict[str, Any]:
    """`values` checked against the fields of `cls` (keys, types, rules; sections by their own class), returned with
    each section built; nothing of `cls` itself is built."""
    if not isinstance(values, Mapping):
        raise SettingsError(f"{where}: must be a mapping of {cls.__name__} settings, got {values!r}.")
    fields = {field.name: field for field in dataclasses.fields(cls) if field.init}
    refuse_unknown_keys(values, fields, where, cls.__name__)
    hints = _field_hints(cls)
    checked = {}
    for key, value in values.items():
        hint = hints.get(key)
        if isinstance(hint, type) and dataclasses.is_dataclass(hint):
            if not isinstance(value, Mapping):
                raise SettingsError(f"{where}: `{key}` must be a mapping of {key} settings, got {value!r}.")
            value = read_settings(hint, value, f"{where} [{key}]")
        else:
            try:
                _check_value(key, value, fields[key], hint)
            except ValueError as error:
                raise SettingsError(f"{where}: {error}") from None
        checked[key] = value
    return checked


def read_settings(cls: type[SettingsClass], values: Any, where: str) -> SettingsClass:
    """An instance of the settings class `cls` (a `Settings` dataclass) from `values`: checked (`check_settings`),
    then built, which holds it to the class's cross-field rules (`check()`)."""
    checked = check_settings(cls, values, where)
    missing = [field.name for field in dataclasses.fields(cls)  # type: ignore[arg-type]
               if field.init and field.name not in checked and field.default is dataclasses.MISSING
               and field.default_factory is dataclasses.MISSING]
    if missing:
        raise SettingsError(f"{where}: {', '.join(f'`{key}`' for key in missing)} must be given ({cls.__name__} has no "
                            "default for it).")
    try:
        return cls(**checked)
    except ValueError as error:  # a cross-field rule, or a section of `check()`'s
        raise SettingsError(f"{where}: {error}") from None
