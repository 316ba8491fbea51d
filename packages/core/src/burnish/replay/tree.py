"""What a captured call's arguments, held state and results are made of, for
``burnish.capture``: signatures (their structure, constants and tensors, and where each tensor
lies), the paths that name a difference between two signatures, and templates that rebuild a
result around replayed tensors."""

from __future__ import annotations

import copy
import enum
import functools
import types
from collections.abc import Callable, Iterator
from typing import Any

from burnish.device import Device
from burnish.distribution import Distribution
from burnish.dtype import DType
from burnish.errors import CaptureError
from burnish.quantization.tensor import QuantizedTensor
from burnish.tensor import Tensor
from burnish.tensor.core import make

_new = object.__new__

#: Values that are part of a call's signature as they are (a change means another record).
_CONSTANTS = (type(None), bool, int, float, complex, str, bytes, DType, Device, Distribution,
              enum.Enum, range, slice)

#: How deep arguments and results may nest (a guard against objects that refer to themselves).
MAX_DEPTH = 64

def held(fn: Callable, names: tuple[str, ...]) -> tuple:
    """What ``fn`` holds besides its arguments: the object of a bound method, the values of a
    closure's cells, and the module globals named in ``names`` (a model, an optimizer and
    its state, wherever the function finds them)."""
    held = []
    owner = getattr(fn, "__self__", None)
    if owner is not None and not isinstance(owner, types.ModuleType):
        held.append(owner)
        fn = getattr(fn, "__func__", fn)
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            held.append(cell.cell_contents)
        except ValueError:  # a cell not yet assigned
            pass
    space = getattr(fn, "__globals__", {})
    held.extend(space.get(name) for name in names)
    return tuple(held)


def global_names(fn: Callable, skip: tuple[type, ...] = ()) -> tuple[str, ...]:
    """The module globals ``fn``'s code reads that hold data (not modules, classes, functions
    or ``skip``), its nested functions' included."""
    fn = getattr(fn, "__func__", fn)
    code, space = getattr(fn, "__code__", None), getattr(fn, "__globals__", None)
    if code is None or space is None:
        return ()
    names: list[str] = []
    pending = [code]
    while pending:
        current = pending.pop()
        names.extend(n for n in current.co_names if n in space and n not in names)
        pending.extend(c for c in current.co_consts if isinstance(c, types.CodeType))
    return tuple(n for n in names if not isinstance(space[n], (*_CODE, *skip)))


def difference(a: Any, b: Any) -> str | None:
    """Where two signatures' structures first differ, as a path and the two values."""
    for name, x, y in zip(("argument", "keyword argument", "held state"), a[1:], b[1:]):
        if x != y:
            return _differs(x, y, name)
    return None


def _differs(a: Any, b: Any, path: str) -> str:
    if not (type(a) is tuple and type(b) is tuple and len(a) == len(b) and a
            and a[0] == b[0] and isinstance(a[0], type)):
        return f"{path}: {_short(a)} then {_short(b)}"
    if len(a) == 2 and type(a[1]) is not tuple:  # a constant
        return f"{path}: {_short(a[1])} then {_short(b[1])}"
    keyed = not issubclass(a[0], tuple | list)
    for i, (x, y) in enumerate(zip(a[1:], b[1:])):
        if x == y:
            continue
        if keyed and type(x) is tuple and len(x) == 2 and type(y) is tuple and x[0] == y[0]:
            step = f".{x[0]}" if isinstance(x[0], str) else f"[{x[0]!r}]"
            return _differs(x[1], y[1], path + step)
        return _differs(x, y, f"{path}[{i}]")
    return path


def _short(value: Any) -> str:
    if type(value) is tuple and len(value) == 2 and isinstance(value[0], type):
        value = value[1]
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- signatures ------------------------------------------------------------------------------


def flatten(value: Any, tensors: list[Tensor], places: list[tuple[Any, Any]],
            parent: Any = None, at: Any = None, depth: int = 0) -> Any:
    """A hashable description of ``value``'s structure and constants. Its tensors are
    appended to ``tensors`` (described later, by ``_signature``), and where each lies (its
    container and key) to ``places``."""
    kind = type(value)
    category = _CATEGORY.get(kind)
    if category is None:
        category = _category(kind)
    if category == _TENSOR:
        tensors.append(value)
        places.append((parent, at))
        return Tensor
    if category == _CONSTANT:
        return (kind, value)
    if category == _QUANTIZED:  # its scheme and shape, then its parts as tensors
        return (kind, value.scheme, tuple(value.shape),
                *[flatten(part, tensors, places, value, name, depth + 1)
                  for name, part in zip(_PARTS, value.parts())])
    if depth > MAX_DEPTH:
        raise CaptureError(f"its arguments nest deeper than {MAX_DEPTH} levels (or refer to "
                           "themselves)")
    depth += 1
    if category == _SEQUENCE:
        return (kind, *[flatten(v, tensors, places, value, i, depth)
                        for i, v in enumerate(value)])
    if category == _MAPPING:
        return (kind, *[(k, flatten(v, tensors, places, value, k, depth))
                        for k, v in value.items()])
    attributes = _attributes(value)
    if attributes is not None:
        return (kind, *[(k, flatten(v, tensors, places, value, k, depth))
                        for k, v in attributes.items()])
    try:
        hash(value)
    except TypeError:
        return (kind, _Identity(value))
    return (kind, value)  # functions, classes and other hashable objects: as they are


#: Past this many nodes a signature gets no matcher (generating and compiling it would cost
#: more than the calls it speeds up are likely to save).
MATCHER_NODES = 50_000


def matcher(structure: Any) -> Callable[[Any, list, list], bool] | None:
    """A function ``match(value, tensors, places)`` that says whether ``flatten(value,
    tensors, places)`` would give ``structure``, appending the same tensors and places when
    it would, without building the signature (which a replayed call would then hash and
    compare): straight-line Python generated once per record, a few tests per node and no
    call per node. It answers ``False`` on any difference, and on anything it is not sure of
    (an exception, a NaN constant), where the caller flattens as usual; it never answers
    ``True`` where ``flatten`` would give another signature. ``None`` for signatures it does
    not cover (quantized tensors, very large ones)."""
    emitter = _Emitter()
    try:
        emitter.node("value", structure, "None", "None")
    except _Unmatched:
        return None
    body = "\n".join("        " + line for line in emitter.lines)
    source = ("def match(value, tensors, places):\n    try:\n" + (body or "        pass") +
              "\n    except Exception:\n        return False\n    return True\n")
    space = {"Tensor": Tensor, "_attributes": _attributes, **emitter.constants}
    exec(compile(source, "<burnish.capture signature>", "exec"), space)  # noqa: S102
    return space["match"]


class _Unmatched(Exception):
    """A signature ``matcher`` does not cover."""


#: Constants a matcher spells as literals.
_LITERALS = (type(None), bool, int, str)


class _Emitter:
    """The lines of a matcher: per node of a signature, the tests that its value passes only
    if flattening it gives that node (``flatten``'s cases, in its order)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.constants: dict[str, Any] = {}  # the matcher's globals: k0, k1, ...
        self.names = 0

    def constant(self, value: Any) -> str:
        if type(value) in _LITERALS:
            return repr(value)
        name = f"k{len(self.constants)}"
        self.constants[name] = value
        return name

    def fresh(self) -> str:
        self.names += 1
        if self.names > MATCHER_NODES:
            raise _Unmatched
        return f"v{self.names}"

    def node(self, var: str, node: Any, parent: str, at: str) -> None:
        out = self.lines.append
        if node is Tensor:
            out(f"if not isinstance({var}, Tensor): return False")
            out(f"tensors.append({var}); places.append(({parent}, {at}))")
            return
        kind = node[0]
        category = _category(kind)
        k = self.constant(kind)
        if category == _CONSTANT:
            out(f"if type({var}) is not {k} or not ({var} == {self.constant(node[1])}): "
                "return False")
        elif category == _SEQUENCE:
            out(f"if type({var}) is not {k} or len({var}) != {len(node) - 1}: return False")
            self._parts(var, var, [(str(i), part) for i, part in enumerate(node[1:])])
        elif category == _MAPPING:
            self._keyed(var, f"type({var}) is not {k}", var, node[1:])
        elif category != _OBJECT:
            raise _Unmatched  # quantized tensors: their scheme and parts
        elif len(node) == 2 and type(node[1]) is not tuple:  # no attributes: the object
            found = node[1]
            if type(found) is _Identity:
                out(f"if type({var}) is not {k} or {var} is not "
                    f"{self.constant(found.value)}: return False")
                return
            out(f"if type({var}) is not {k} or _attributes({var}) is not None: return False")
            out(f"hash({var})")  # flatten keeps an unhashable object by identity instead
            out(f"if not ({var} == {self.constant(found)}): return False")
        elif getattr(kind, "__getattr__", None) is not None or issubclass(kind, _CODE):
            attributes = self.fresh()  # what _attributes finds: asked as flatten asks
            out(f"{attributes} = _attributes({var})")
            self._keyed(var, f"type({var}) is not {k} or {attributes} is None", attributes,
                        node[1:])
        elif kind.__dictoffset__:  # its instances' attributes: their __dict__
            attributes = self.fresh()
            out(f"if type({var}) is not {k}: return False")
            out(f"{attributes} = {var}.__dict__")
            self._keyed(var, "False", attributes, node[1:])
        else:  # its slots: those set, in the order _attributes lists them
            self._slots(var, k, kind, node[1:])

    def _keyed(self, var: str, test: str, mapping: str, parts: tuple) -> None:
        """A mapping's (or an attribute dict's) test, its keys in order, then its values."""
        keys = tuple(key for key, _ in parts)
        self.lines.append(f"if {test} or tuple({mapping}) != {self.constant(keys)}: "
                          "return False")
        if parts:
            names = [self.fresh() for _ in parts]
            self.lines.append(f"({', '.join(names)},) = {mapping}.values()")
            for name, (key, part) in zip(names, parts):
                self.node(name, part, var, self.constant(key))

    def _parts(self, var: str, items: str, parts: list[tuple[str, Any]]) -> None:
        """A sequence's items (``(index, node)`` pairs), unpacked at once."""
        if parts:
            names = [self.fresh() for _ in parts]
            self.lines.append(f"({', '.join(names)},) = {items}")
            for name, (at, part) in zip(names, parts):
                self.node(name, part, var, at)

    def _slots(self, var: str, k: str, kind: type, parts: tuple) -> None:
        """An object of ``__slots__``: each slot set where the signature has it, unset
        where it has not."""
        names = _slot_names(kind)
        found = dict(parts)
        if not names or [n for n in names if n in found] != list(found):
            raise _Unmatched
        out = self.lines.append
        out(f"if type({var}) is not {k}: return False")
        for name in names:
            if name not in found:
                out(f"if hasattr({var}, {name!r}): return False")
                continue
            value = self.fresh()
            out(f"{value} = {var}.{name}")
            self.node(value, found[name], var, repr(name))


#: What ``flatten`` does with a value, by its type (worked out once per type).
_TENSOR, _CONSTANT, _SEQUENCE, _MAPPING, _OBJECT, _QUANTIZED = range(6)
_PARTS = ("values", "scales", "zero_points")
_CATEGORY: dict[type, int] = {}


def _category(kind: type) -> int:
    if issubclass(kind, Tensor):
        found = _TENSOR
    elif issubclass(kind, QuantizedTensor):
        found = _QUANTIZED
    elif issubclass(kind, _CONSTANTS):
        found = _CONSTANT
    elif issubclass(kind, tuple | list):  # named tuples and list subclasses too
        found = _SEQUENCE
    elif issubclass(kind, dict):
        found = _MAPPING
    else:
        found = _OBJECT
    _CATEGORY[kind] = found
    return found


class _Identity:
    """An unhashable value (a NumPy array) in a signature: equal only to itself, and kept
    alive by the signature, so that no other object can take its identity."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value

    def __eq__(self, other: object) -> bool:
        return type(other) is _Identity and other.value is self.value

    def __hash__(self) -> int:
        return id(self.value)

    def __repr__(self) -> str:
        return f"<{type(self.value).__name__} at {id(self.value):#x}>"


#: Objects with attributes that are not data: kept as they are, by identity.
_CODE = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
         types.ModuleType, functools.partial)


def _attributes(value: Any) -> dict | None:
    """The attributes of a plain object (a module, a parameter, a user's state class), or
    ``None`` for what is not walked into (functions, classes, objects without attributes)."""
    if isinstance(value, _CODE):
        return None
    found = getattr(value, "__dict__", None)
    if found is not None:
        return found
    names = _SLOTS.get(type(value))  # inline: this runs per node of a flattened call
    if names is None:
        names = _slot_names(type(value))
    if not names:
        return None
    return {name: getattr(value, name) for name in names if hasattr(value, name)}


_SLOTS: dict[type, tuple[str, ...]] = {}


def _slot_names(kind: type) -> tuple[str, ...]:
    """The slots of ``kind`` and its bases that hold attributes (worked out once per type)."""
    names = _SLOTS.get(kind)
    if names is None:
        names = _SLOTS[kind] = tuple(name for cls in kind.__mro__ for name in _slots_of(cls)
                                     if name not in ("__weakref__", "__dict__"))
    return names


def _slots_of(cls: type) -> tuple[str, ...]:
    slots = cls.__dict__.get("__slots__", ())
    return (slots,) if isinstance(slots, str) else tuple(slots)


# -- results ---------------------------------------------------------------------------------

class Leaf:
    """A returned tensor in a template: where its replayed value goes."""

    __slots__ = ("prim", "device", "dtype", "capturer")

    def __init__(self, tensor: Tensor, capturer: Any = None):
        self.prim, self.device, self.dtype = tensor._prim, tensor._device, tensor._dtype
        self.capturer = capturer

    def settle(self, capturer: Any) -> None:
        """Bind the leaf to ``capturer`` for good, keeping of the recorded primitive only what
        ``capturer.rebuild`` reads (``stand_in``, where the capturer has one): a record lives
        as long as its function, and the recorded call's results (a model's parameters, an
        optimizer's state) must not live that long with it."""
        self.capturer = capturer
        stand_in = getattr(capturer, "stand_in", None)
        if stand_in is not None:
            self.prim = stand_in(self.prim)


def template_of(value: Any, tensors: list[Tensor], depth: int = 0) -> Any:
    """How to rebuild ``value`` with other tensors (``None`` where it cannot be): its tensors
    are appended to ``tensors`` and replaced by ``Leaf``; containers and objects that hold
    no tensor are kept as they are."""
    if isinstance(value, Tensor):
        tensors.append(value)
        return Leaf(value)
    if isinstance(value, _CONSTANTS):
        return _Same(value)
    if depth > MAX_DEPTH:
        return None
    if isinstance(value, tuple | list | dict):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        parts = {}
        for k, v in items:
            part = template_of(v, tensors, depth + 1)
            if part is None:
                return None
            parts[k] = part
        if all(type(p) is _Same for p in parts.values()):
            return _Same(value)
        return _Container(value, parts)
    attributes = _attributes(value)
    if attributes is None:
        return _Same(value) if isinstance(value, _CODE) else None
    parts = {}
    for k, v in attributes.items():
        part = template_of(v, tensors, depth + 1)
        if part is None:
            return None
        parts[k] = part
    if all(type(p) is _Same for p in parts.values()):
        return _Same(value)
    return _Container(value, parts)


class _Same:
    """A part of the result that holds no tensor: returned as the recorded call returned it."""

    __slots__ = ("value",)

    def __init__(self, value: Any):
        self.value = value


class _Container:
    """A list, tuple, dict or object holding tensors: rebuilt around the new ones."""

    __slots__ = ("value", "parts")

    def __init__(self, value: Any, parts: dict):
        self.value, self.parts = value, parts


def leaves_of(template: Any) -> list[Leaf]:
    """The tensors of a template, in order."""
    if type(template) is Leaf:
        return [template]
    if type(template) is _Same:
        return []
    return [leaf for part in template.parts.values() for leaf in leaves_of(part)]


def _put(out: Any, items: list[tuple[Any, Any]]) -> Any:
    """``out`` (a container or an object, perhaps with ``__slots__``) with each ``(key,
    value)`` of ``items`` set in it."""
    for k, v in items:
        if isinstance(out, dict | list):
            out[k] = v
        else:
            object.__setattr__(out, k, v)
    return out


_setattr = object.__setattr__


def _plain_slots(value: Any) -> bool:
    """Whether ``value`` is an object of ``__slots__`` alone (no ``__dict__``, not a container)
    that ``copy.copy`` would copy slot by slot: no copying, pickling or ``__setattr__`` of its
    own, so that a new object with its slots set is the same copy."""
    kind = type(value)
    if isinstance(value, tuple | list | dict) or hasattr(value, "__dict__"):
        return False
    if any(getattr(kind, name, None) is not getattr(object, name, None) for name in
           ("__reduce_ex__", "__reduce__", "__getstate__", "__setattr__", "__new__")):
        return False
    if hasattr(kind, "__copy__") or hasattr(kind, "__setstate__"):
        return False
    names = _slot_names(kind)
    return bool(names)


def _without_parts(value: Any, parts: list[tuple[Any, Any]]) -> Any:
    """A shallow copy of the container or object ``value`` with ``None`` where its parts are."""
    return _put(copy.copy(value), [(k, None) for k, _ in parts])


def builder(template: Any) -> Callable[[Iterator[Any]], Any]:
    """A function that makes ``template``'s value with the next tensors of an iterator of
    replayed values in place of the recorded ones. Worked out once per record, so that a
    replay walks no template: per tensor and per container it costs one call."""
    kind = type(template)
    if kind is Leaf:
        prim, device, dtype = template.prim, template.device, template.dtype
        again = template.capturer.rebuild

        def leaf(outputs: Iterator[Any]) -> Any:
            return make(again(prim, next(outputs)), device, dtype)

        return leaf
    if kind is _Same:
        value = template.value
        return lambda outputs: value
    value = template.value
    parts = [(k, builder(p)) for k, p in template.parts.items()]
    kind = type(value)
    if kind is tuple:  # every item is a part
        makers = [make_part for _, make_part in parts]
        return lambda outputs: tuple([make_part(outputs) for make_part in makers])
    if isinstance(value, tuple):
        makers = [make_part for _, make_part in parts]
        fields = hasattr(value, "_fields")
        return lambda outputs: (kind(*[m(outputs) for m in makers]) if fields
                                else kind([m(outputs) for m in makers]))
    # The recorded value without its parts (the recorded call's results: they must not live as
    # long as the record), each replay filling them in.
    if kind is dict or kind is list:
        skeleton = _without_parts(value, parts)

        def container(outputs: Iterator[Any]) -> Any:
            out = kind(skeleton)
            for k, make_part in parts:
                out[k] = make_part(outputs)
            return out

        return container
    if _plain_slots(value):  # a parameter: a new object with the slots set, no copy.copy
        fixed = [(name, getattr(value, name)) for name in _SLOTS[kind]
                 if name not in template.parts and hasattr(value, name)]

        def slotted(outputs: Iterator[Any]) -> Any:
            out = _new(kind)
            for name, part in fixed:
                _setattr(out, name, part)
            for name, make_part in parts:
                _setattr(out, name, make_part(outputs))
            return out

        return slotted
    if isinstance(value, dict | list) or not hasattr(value, "__dict__"):
        skeleton = _without_parts(value, parts)

        def other(outputs: Iterator[Any]) -> Any:
            rebuilt = [(k, make_part(outputs)) for k, make_part in parts]
            # subclasses of dict and list, objects with __slots__
            return _put(copy.copy(skeleton), rebuilt)

        return other
    attributes = dict.fromkeys(value.__dict__)  # None for the parts, in the attributes' order
    attributes.update((k, v) for k, v in value.__dict__.items() if k not in template.parts)

    def plain(outputs: Iterator[Any]) -> Any:  # a module: its attributes, without __init__
        fresh = dict(attributes)
        for k, make_part in parts:
            fresh[k] = make_part(outputs)
        out = _new(kind)
        object.__setattr__(out, "__dict__", fresh)
        return out

    return plain
