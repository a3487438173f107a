"""The map the unknown-field walk follows: a job model's pydantic core schema compiled to
what the walk needs at each place of a job (apportion.unknown_fields).

The check follows models, TypedDicts and dataclasses; lists, maps, unions and tagged
unions (such as the policy modules), so it covers every kind, a deployment's own kinds
and every nested object without a list to keep in step. A place whose insides are not
fields (a string, a number, a value a plain function checks) compiles to None: nothing
to walk into.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

# Free-form maps whose keys a kind reads by name, by (model class name, field name).
NamedMaps = Mapping[tuple[str, str], tuple[str, ...]]
# Keys of a model (by class name) known and ignored quietly.
Ignored = Mapping[str, frozenset[str]]


def field_keys(name: str, field: Mapping[str, Any]) -> list[str]:
    """The keys a user may write for field ``name`` of a core schema: the name, then the
    first key of each of its validation aliases: what the unknown-field walk knows, and
    what an error's location is matched against (apportion.contracts.base.written_loc)."""
    alias = field.get("validation_alias")
    if isinstance(alias, str):
        return [name, alias]
    keys = [name]
    for path in alias or ():
        first = path[0] if isinstance(path, list | tuple) and path else path
        if isinstance(first, str):
            keys.append(first)
    return keys


@dataclass(eq=False)
class Object:
    """An object with fields: the keys it accepts, and the places its fields lead to."""

    name: str
    known: frozenset[str]  # every accepted key: field names and their aliases
    candidates: tuple[str, ...]  # the names suggested ("did you mean")
    nested: list[tuple[str, Any]] = field(default_factory=list)  # (key, child node)
    open: bool = False  # extra keys are kept on purpose: warn only for near misses
    ignored: frozenset[str] = frozenset()


@dataclass(eq=False)
class Seq:
    """An array: every item at place ``item``."""

    item: Any


@dataclass(eq=False)
class Map:
    """An object of free keys: every value at place ``value``."""

    value: Any


@dataclass(eq=False)
class Choice:
    """A union: each value at the member it most likely meant (apportion.unknown_fields)."""

    options: tuple[Any, ...]


@dataclass(eq=False)
class Tagged:
    """A tagged union: each value at the member its ``key`` names."""

    key: str
    options: dict[str, Any]


@dataclass(eq=False)
class Names:
    """A free-form map whose keys a kind reads by name (a pool's attributes): only
    near misses of those names are warned about. Also in Candlepin's list form
    ``[{"name": …, "value": …}]``."""

    known: tuple[str, ...]

    @property
    def known_set(self) -> frozenset[str]:
        return _as_set(self.known)


@cache
def _as_set(names: tuple[str, ...]) -> frozenset[str]:
    return frozenset(names)


@dataclass(eq=False)
class Ref:
    """A place defined once and used at several (or recursively): resolved when walked."""

    name: str
    table: dict[str, Any]

    def resolve(self) -> Any:
        return self.table.get(self.name)


_WRAPPERS = {
    "nullable": "schema",
    "default": "schema",
    "function-before": "schema",
    "function-after": "schema",
    "function-wrap": "schema",
    "json-or-python": "python_schema",
    "lax-or-strict": "lax_schema",
}


class _Compiler:
    def __init__(self, named: NamedMaps, ignored: Ignored) -> None:
        self.refs: dict[str, Any] = {}
        self.named = named
        self.ignored = ignored

    def node(self, schema: Mapping[str, Any]) -> Any:
        found = self._node(schema)
        ref = schema.get("ref")
        if ref is not None:
            self.refs[ref] = found
        return found

    def _node(self, schema: Mapping[str, Any]) -> Any:
        kind: str = schema.get("type", "")
        if kind in _WRAPPERS:
            return self.node(schema[_WRAPPERS[kind]])
        build = _BUILDERS.get(kind)
        return None if build is None else build(self, schema)  # None: a leaf

    def _definitions(self, schema: Mapping[str, Any]) -> Any:
        for definition in schema.get("definitions", ()):
            self.node(definition)
        return self.node(schema["schema"])

    def _definition_ref(self, schema: Mapping[str, Any]) -> Any:
        return Ref(schema["schema_ref"], self.refs)

    def _typed_dict(self, schema: Mapping[str, Any]) -> Any:
        return self._fields(_cls_name(schema, "TypedDict"), schema["fields"], schema)

    def _dataclass(self, schema: Mapping[str, Any]) -> Any:
        fields = {f["name"]: f for f in schema["schema"].get("fields", ())}
        return self._fields(_cls_name(schema, "object"), fields, schema)

    def _sequence(self, schema: Mapping[str, Any]) -> Any:
        item = self.node(schema["items_schema"]) if "items_schema" in schema else None
        return None if item is None else Seq(item)

    def _dict(self, schema: Mapping[str, Any]) -> Any:
        value = self.node(schema["values_schema"]) if "values_schema" in schema else None
        return None if value is None else Map(value)

    def _union(self, schema: Mapping[str, Any]) -> Any:
        return self._choice(c[0] if isinstance(c, tuple) else c for c in schema["choices"])

    def _tagged(self, schema: Mapping[str, Any]) -> Any:
        if not isinstance(schema.get("discriminator"), str):
            return None  # chosen by a function: its insides cannot be followed
        options = {str(tag): self.node(s) for tag, s in schema["choices"].items()}
        return Tagged(schema["discriminator"], options)

    def _chain(self, schema: Mapping[str, Any]) -> Any:
        return self._choice(schema["steps"])

    def _choice(self, schemas: Iterable[Mapping[str, Any]]) -> Any:
        options = tuple(n for n in (self.node(s) for s in schemas) if n is not None)
        if not options:
            return None
        return options[0] if len(options) == 1 else Choice(options)

    def _model(self, schema: Mapping[str, Any]) -> Any:
        inner = schema["schema"]
        # A model validator (mode="before" or "wrap") wraps the fields in a function.
        while inner.get("type") in _WRAPPERS and inner.get("type") != "nullable":
            inner = inner[_WRAPPERS[inner["type"]]]
        if schema.get("root_model") or inner.get("type") != "model-fields":
            return self.node(inner)
        return self._fields(_cls_name(schema, "object"), inner["fields"], schema, inner)

    def _fields(
        self,
        name: str,
        fields: Mapping[str, Mapping[str, Any]],
        *configs: Mapping[str, Any],
    ) -> Object:
        extra = None
        for config in configs:
            extra = extra or config.get("extra_behavior")
            extra = extra or (config.get("config") or {}).get("extra_fields_behavior")
        known: set[str] = set()
        names: list[str] = []
        obj = Object(name=name, known=frozenset(), candidates=(), open=extra == "allow")
        for field_name, spec in fields.items():
            keys = field_keys(field_name, spec)
            known.update(keys)
            names.append(field_name)
            child = self.node(spec["schema"])
            if (name, field_name) in self.named:
                child = Names(self.named[name, field_name])
            if child is not None:
                obj.nested += [(key, child) for key in dict.fromkeys(keys)]
        obj.known = frozenset(known)
        obj.candidates = tuple(dict.fromkeys([*names, *sorted(known - set(names))]))
        obj.ignored = self.ignored.get(name, frozenset())
        return obj


# How each kind of core schema with fields inside is compiled; any other is a leaf.
_BUILDERS: dict[str, Callable[[_Compiler, Mapping[str, Any]], Any]] = {
    "definitions": _Compiler._definitions,
    "definition-ref": _Compiler._definition_ref,
    "model": _Compiler._model,
    "typed-dict": _Compiler._typed_dict,
    "dataclass": _Compiler._dataclass,
    "list": _Compiler._sequence,
    "set": _Compiler._sequence,
    "frozenset": _Compiler._sequence,
    "generator": _Compiler._sequence,
    "dict": _Compiler._dict,
    "union": _Compiler._union,
    "tagged-union": _Compiler._tagged,
    "chain": _Compiler._chain,
}


def _cls_name(schema: Mapping[str, Any], default: str) -> str:
    cls = schema.get("cls")
    return getattr(cls, "__name__", default)


def compile_model(model: Any, *, named: NamedMaps, ignored: Ignored) -> Any:
    """The compiled shape of ``model`` (a pydantic model or any type pydantic can
    validate): an :class:`Object`, :class:`Seq` … or None."""
    schema = getattr(model, "__pydantic_core_schema__", None)
    if schema is None:
        from pydantic import TypeAdapter

        schema = TypeAdapter(model).core_schema
    return _Compiler(named, ignored).node(schema)


__all__ = [
    "Choice",
    "Map",
    "Names",
    "Object",
    "Ref",
    "Seq",
    "Tagged",
    "compile_model",
    "field_keys",
]
