"""Module: the base class of every layer and model, its parameters found from its attributes."""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import numbers
import os
import sys
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Self

import numpy as np

from burnish import Device, Tensor, record
from burnish.dtype import DType
from burnish.errors import ArgumentTypeError, RecordError
from burnish.nn.param import Param, is_autodiff
from burnish.quantization import QuantizedTensor
from burnish.record.tree import join, normalize
from burnish.shape import show
from burnish.tensor.habits import missing_attribute

ParamMapper = Callable[[str, Param], Param]

#: Module attributes PyTorch users reach for, and burnish's way to say them.
MODULE_HABITS = {
    "parameters": "module.params()",
    "named_parameters": "module.named_params()",
    "eval": "module.valid() (the module on the inner backend of its autodiff backend: no "
            "gradients, dropout off, batch norm on its running statistics)",
    "train": "module.to_device('autodiff+ndarray') (or another autodiff backend): modules "
             "train where gradients are tracked",
    "state_dict": "module.into_record()",
    "load_state_dict": "module = module.load_record(record) (it returns a new module); a "
                       "PyTorch state dict or file: burnish.nn.import_weights.load_weights("
                       "module, source)",
    "to": "module.to_device(device)",
    "cuda": "module.to_device('cuda')",
    "cpu": "module.to_device('ndarray')",
    "zero_grad": "nothing: gradients are not kept on parameters, each backward() returns its "
                 "own Gradients",
    "requires_grad_": "module.freeze(*names) or module.unfreeze(*names)",
    "half": "module.map(lambda name, p: p.map(lambda t: t.half()))",
}


# dataclass_transform: type checkers see each subclass's fields as its __init__'s arguments.
@typing.dataclass_transform(eq_default=False)
class Module:
    """A model or a layer: Burn's ``#[derive(Module)]`` in Python form.

    Subclasses declare their fields as annotations and get a dataclass ``__init__`` (a subclass
    that defines its own ``__init__`` keeps it). That ``__init__`` checks each field's value
    against its annotation (``Param``, a module class, ``int``, ``float | None``, ``Literal``,
    ``list[Linear]``... an annotation it cannot resolve is not checked) and raises
    ``ArgumentTypeError`` naming every field that does not fit; ``Linear(4, 2)``, written as
    in PyTorch, is told to write ``LinearConfig(4, 2).init(device)``. Parameters are found
    from the instance's attributes, whatever their annotations: a ``Param``, a ``Module``, or
    lists, tuples and dicts (str keys) of them to any depth. A parameter's name is its path of
    attribute names, list indices and dict keys joined by dots (``"layers.0.weight"``), the key
    it has in records.

    Records also hold a module's *recorded constants*: each attribute holding a
    ``QuantizedTensor`` (as its parts: ``<name>.values``, ``.scales`` and, when affine,
    ``.zero_points``), and the tensor attributes a class names in ``recorded_constants`` (a
    quantized layer's calibrated input scales). They are not trained; ``load_record`` fills
    them, and ``map`` moves them to the device it puts the module's parameters on. Every other
    attribute is a constant that is copied along and never recorded.

    Modules are values: ``map``, ``to_device``, ``valid``, ``no_grad``, ``load_record`` and the
    optimizers return new modules and leave this one alone. A module owns its parameters and
    keeps no gradients, so it can be sent to another thread. Calling a module calls ``forward``.
    """

    #: Tensor attributes that records hold beside the parameters (see the class docstring).
    recorded_constants: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        own_init = "__init__" in cls.__dict__
        dataclasses.dataclass(eq=False, repr=False)(cls)
        if not own_init:
            cls.__init__ = _checked_init(cls.__init__)  # type: ignore[method-assign]

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.forward(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: say what to write for a PyTorch habit.
        raise missing_attribute(self, name, MODULE_HABITS)

    # -- parameters ---------------------------------------------------------------------------

    def named_params(self) -> list[tuple[str, Param]]:
        """Every parameter with its name, in attribute order."""
        return list(_walk(self, ""))

    def params(self) -> list[Param]:
        """Every parameter, in attribute order."""
        return [param for _, param in _walk(self, "")]

    def visit(self, visitor: Callable[[str, Param], None]) -> None:
        """Call ``visitor(name, param)`` for every parameter (Burn's ``ModuleVisitor``)."""
        for name, param in _walk(self, ""):
            visitor(name, param)

    def map(self, mapper: ParamMapper) -> Self:
        """A copy whose every parameter is ``mapper(name, param)`` (Burn's ``ModuleMapper``);
        containers are copied, constants shared (a module holding tensors that are not
        parameters moves them along in ``map_constants``)."""
        return _map_module(self, "", mapper)

    def map_constants(self, path: str, mapper: ParamMapper) -> None:
        """Called on each copy ``map`` makes, after its parameters are mapped: a module whose
        constants hold tensors (a quantized layer's integers) puts them where ``mapper`` put
        its parameters. Nothing by default."""

    def num_params(self) -> int:
        """The number of scalar values in all parameters, frozen ones included."""
        return sum(param.numel() for param in self.params())

    def devices(self) -> list[Device]:
        """The devices the parameters are on, each once."""
        found: list[Device] = []
        for param in self.params():
            if param.device not in found:
                found.append(param.device)
        return found

    # -- copies -------------------------------------------------------------------------------

    def clone(self) -> Self:
        """A copy with its own containers and params (same ids; tensors are values, shared)."""
        return self.map(lambda _, p: Param(p.val(), p.id, p.require_grad))

    def to_device(self, device: Device | str) -> Self:
        """The module with every parameter on ``device``, which may belong to another backend
        (``"autodiff+ndarray"`` to train a module built on ``"ndarray"``); ids are kept."""
        return self.map(lambda _, p: p.map(lambda t: t.to_device(device)))

    def fork(self, device: Device | str) -> Self:
        """``to_device`` with fresh autodiff leaves: the copy's graph is its own (Burn's
        ``fork``), for training copies of one model in several threads."""
        return self.map(lambda _, p: p.map(lambda t: t.detach().to_device(device)))

    def valid(self) -> Self:
        """The same module on the inner backend of its autodiff backend: no gradients are
        tracked, and dropout and batch norm behave as in evaluation (Burn's ``valid``). A module
        already on a plain backend is returned as it is."""
        return self.map(lambda _, p: p.map(lambda t: t.inner() if is_autodiff(t) else t))

    def no_grad(self) -> Self:
        """Every parameter frozen: optimizers leave it alone and no gradient is computed."""
        return self.map(lambda _, p: p.set_require_grad(False))

    def freeze(self, *names: str) -> Self:
        """The named parameters frozen; a name also freezes everything below it (``"encoder"``
        freezes ``"encoder.layers.0.weight"``). ``unfreeze`` undoes it."""
        return self._set_require_grad(names, False)

    def unfreeze(self, *names: str) -> Self:
        """The named parameters (every one when none is named) trained again."""
        return self._set_require_grad(names, True)

    def _set_require_grad(self, names: tuple[str, ...], flag: bool) -> Self:
        known = {name for name, _ in self.named_params()}
        for name in names:
            if not any(_below(k, name) for k in known):
                raise KeyError(f"{type(self).__name__} has no parameter {name!r}; it has "
                               f"{', '.join(sorted(known)) or 'none'}")

        def mapper(name: str, param: Param) -> Param:
            if not names or any(_below(name, n) for n in names):
                return param.set_require_grad(flag)
            return param

        return self.map(mapper)

    # -- records ------------------------------------------------------------------------------

    def into_record(self) -> dict[str, Any]:
        """The parameters and recorded constants as a nested mapping of tensors, keyed like
        the attributes."""
        tree = _record_of(self)
        return tree if isinstance(tree, dict) else {}

    def load_record(self, source: Mapping[str, Any] | record.Record, *,
                    cast_ints: bool = False) -> Self:
        """A copy holding the record's values (cast to each parameter's dtype, on its device);
        ids and frozen flags stay this module's.

        Float values are cast to the parameter's float dtype (float64 into float32, as precision
        settings do). Int and bool values are refused, since a parameter is a float tensor and an
        int where a float belongs is more often a wrong file than a wish; ``cast_ints=True``
        converts them.

        Raises RecordError listing every missing, unexpected and mis-shaped key at once, and
        RecordError naming the parameter and both dtypes for an int or bool value.
        """
        tensors = source.tensors if isinstance(source, record.Record) else source
        given = record.flatten(normalize(tensors))
        expected: dict[str, Any] = dict(self.named_params())
        constants = _constant_parts(self)
        expected.update(constants)
        missing = [name for name in expected if name not in given]
        unexpected = [name for name in given if name not in expected]
        misshaped = [
            f"{name} (module {show(expected[name].shape)}, record {show(given[name].shape)})"
            for name in expected
            if name in given and list(given[name].shape) != list(expected[name].shape)
        ]
        if missing or unexpected or misshaped:
            problems = [f"{label}: {', '.join(items)}" for label, items in
                        (("missing", missing), ("unexpected", unexpected),
                         ("mis-shaped", misshaped)) if items]
            raise RecordError(f"the record does not fit {type(self).__name__}; "
                              + "; ".join(problems))

        for name, param in expected.items():
            if name in constants:
                _check_constant(name, given[name].dtype, param.dtype)
            else:
                check_cast(name, given[name].dtype, param.dtype, cast_ints)

        def mapper(name: str, param: Param) -> Param:
            tensor = Tensor.from_data(given[name], device=param.device, dtype=param.dtype)
            return param.with_tensor(tensor)

        module = self.map(mapper)
        for owner, key, path in _constant_holders(module, ""):
            item = owner.__dict__[key]
            if isinstance(item, QuantizedTensor):
                values, scales, points = (
                    None if part is None else Tensor.from_data(
                        given[join(path, name)], device=part.device, dtype=part.dtype)
                    for name, part in zip(("values", "scales", "zero_points"), item.parts()))
                owner.__dict__[key] = QuantizedTensor.from_parts(
                    values, scales, points, item.scheme, list(item.shape))  # type: ignore
            else:
                owner.__dict__[key] = Tensor.from_data(given[path], device=item.device,
                                                       dtype=item.dtype)
        return module

    def save(self, path: str | os.PathLike[str], format: str | None = None,
             precision: record.Precision = "full") -> Path:
        """Write the record to ``path`` through ``burnish.record`` (format from the extension,
        safetensors by default; ``precision="half"`` stores float16), with the module's type and
        parameter ids, so that an optimizer's saved state finds its parameters again."""
        metadata = {
            "module": f"{type(self).__module__}.{type(self).__qualname__}",
            "param_ids": {name: param.id for name, param in self.named_params()},
        }
        return record.save(self.into_record(), path, format, precision, metadata)

    def load(self, path: str | os.PathLike[str], format: str | None = None, *,
             cast_ints: bool = False) -> Self:
        """A copy holding the values saved at ``path`` (see ``load_record`` for the errors and
        ``cast_ints``), with the saved parameter ids.

        The ids come from the file's ``param_ids`` metadata (``save`` writes it): a mapping of
        parameter names to id strings; a parameter it does not name keeps its id.
        Raises RecordError naming ``param_ids`` when it is anything else.
        """
        loaded = record.load(path, format)
        module = self.load_record(loaded, cast_ints=cast_ints)
        ids = _saved_ids(loaded.metadata.user.get("param_ids", {}), path)
        return module.map(lambda name, p: Param(p.val(), ids.get(name, p.id), p.require_grad))

    # -- display ------------------------------------------------------------------------------

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__}("]
        for name, value in vars(self).items():
            text = repr(value) if isinstance(value, Module | Param) else None
            if text is None and isinstance(value, int | float | str | bool | type(None)):
                text = repr(value)
            if text is not None:
                lines.append(f"  {name}: " + text.replace("\n", "\n  ") + ",")
        if len(lines) == 1:
            return f"{type(self).__name__}()"
        return "\n".join(lines + [")"])


def check_cast(name: str, source: DType, target: DType, cast_ints: bool) -> None:
    """Raise RecordError naming parameter ``name`` and both dtypes when an int or bool value
    would be cast into a float parameter and ``cast_ints`` is false."""
    if target.is_float and not source.is_float and not cast_ints:
        raise RecordError(
            f"parameter {name!r} is {target} but the record holds {source} values; an int or "
            f"bool tensor is not cast into a float parameter unless you pass cast_ints=True")


def _saved_ids(ids: Any, path: str | os.PathLike[str]) -> Mapping[str, str]:
    """The ``param_ids`` metadata of a record, checked: parameter names to id strings."""
    if not isinstance(ids, Mapping) or not all(
            isinstance(key, str) and isinstance(value, str) and value
            for key, value in ids.items()):
        shown = repr(ids) if len(repr(ids)) <= 80 else repr(ids)[:77] + "..."
        raise RecordError(f"{path}: the metadata 'param_ids' must map parameter names to "
                          f"non-empty id strings, found {shown}")
    return ids


# -- checking fields when a module is built -----------------------------------------------------


def _checked_init(init: Callable[..., None]) -> Callable[..., None]:
    """The dataclass ``__init__``, followed by the check of every field against its annotation
    (the arguments are kept for the message)."""

    @functools.wraps(init)
    def __init__(self: Module, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *args, **kwargs)
        except TypeError as error:  # arguments that do not match the fields
            raise ArgumentTypeError(f"{error}{_config_hint(type(self), args, kwargs)}") from None
        _check_fields(self, args, kwargs)

    return __init__


def _check_fields(module: Module, args: tuple, kwargs: dict) -> None:
    cls = type(module)
    hints = _field_hints(cls)  # type: ignore[arg-type]  # classes are hashable
    problems = []
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]  # subclasses are dataclasses
        hint = hints.get(field.name)
        value = getattr(module, field.name, None)
        if hint is not None and not _fits(value, hint):
            shown = field.type if isinstance(field.type, str) else _name_of(hint)
            problems.append(f"{field.name} must be {shown}, got {type(value).__name__} "
                            f"{_short(value)}")
    if problems:
        raise ArgumentTypeError(f"{cls.__name__}({_arguments(args, kwargs)}): "
                                + "; ".join(problems) + _config_hint(cls, args, kwargs))


def _config_hint(cls: type, args: tuple, kwargs: dict) -> str:
    """Where the module has a config (``LinearConfig`` for ``Linear``), how to build it: the
    usual slip is a module called with its hyperparameters, as in PyTorch."""
    config = getattr(sys.modules.get(cls.__module__), f"{cls.__name__}Config", None)
    if not (isinstance(config, type) and hasattr(config, "init")):
        return ""
    return (f". Modules are built by their config, with hyperparameters: "
            f"{config.__name__}({_arguments(args, kwargs)}).init(device)")


def _arguments(args: tuple, kwargs: dict) -> str:
    return ", ".join([_short(a) for a in args] + [f"{k}={_short(v)}" for k, v in kwargs.items()])


@functools.cache
def _field_hints(cls: type) -> dict[str, Any]:
    """Each field's annotation, resolved; fields whose annotation does not resolve (a name
    imported only for type checkers) are left out, and so go unchecked."""
    try:
        return typing.get_type_hints(cls)
    except Exception:  # one unresolvable name: resolve the others one by one
        pass
    hints = {}
    for klass in reversed(cls.__mro__):
        namespace = vars(sys.modules.get(klass.__module__, types.ModuleType("none")))
        for name, annotation in vars(klass).get("__annotations__", {}).items():
            try:
                hints[name] = (eval(annotation, namespace, dict(vars(klass)))  # noqa: S307
                               if isinstance(annotation, str) else annotation)
            except Exception:
                hints.pop(name, None)
    return hints


_SEQUENCES = (list, tuple, collections.abc.Sequence, collections.abc.MutableSequence)


def _fits(value: Any, hint: Any) -> bool:
    """Whether ``value`` fits the annotation ``hint``; True for what this cannot judge."""
    if hint is Any or hint is object or isinstance(hint, typing.TypeVar | str):
        return True
    if hint is None or hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or isinstance(hint, types.UnionType):
        return any(_fits(value, arg) for arg in args)
    if origin is typing.Literal:
        return value in args
    if origin is typing.ClassVar or origin is typing.Annotated:
        return _fits(value, args[0]) if args else True
    if origin in _SEQUENCES:
        # A tuple for a list (and the reverse) and an array for a sequence are fine.
        if isinstance(value, str | bytes) or not isinstance(value, list | tuple | np.ndarray):
            return False
        if not args or isinstance(value, np.ndarray):
            return True
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            return len(value) == len(args) and all(map(_fits, value, args))
        return all(_fits(item, args[0]) for item in value)
    if origin in (dict, collections.abc.Mapping, collections.abc.MutableMapping):
        if not isinstance(value, Mapping):
            return False
        return len(args) != 2 or all(_fits(item, args[1]) for item in value.values())
    if origin is not None:
        hint = origin
        if hint is collections.abc.Callable:
            return callable(value)
    if not isinstance(hint, type):
        return True
    if hint is float:
        return isinstance(value, numbers.Real)
    if hint is int:
        return isinstance(value, numbers.Integral)
    try:
        return isinstance(value, hint)
    except TypeError:  # a protocol that cannot be checked at run time
        return True


def _name_of(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _below(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _walk(value: Any, path: str) -> Iterator[tuple[str, Param]]:
    for _, _, name, item in _attributes(value, path):
        if isinstance(item, Param):
            yield name, item


def _attributes(value: Any, path: str, owner: Any = None, key: Any = None
                ) -> Iterator[tuple[Any, Any, str, Any]]:
    """(holder, key, record path, value) of every value below ``value`` that is neither a
    module nor a container: modules' attributes, list and tuple items, str-keyed dict values,
    to any depth (the order parameters are named in)."""
    if isinstance(value, Module):
        for name, item in vars(value).items():
            yield from _attributes(item, join(path, name), value, name)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _attributes(item, join(path, str(i)), value, i)
    elif isinstance(value, dict):
        for name, item in value.items():
            if isinstance(name, str):
                yield from _attributes(item, join(path, name), value, name)
    else:
        yield owner, key, path, value


def _map_module(module: Module, path: str, mapper: ParamMapper) -> Any:
    copy = object.__new__(type(module))
    for key, item in vars(module).items():
        copy.__dict__[key] = _map_value(item, join(path, key), mapper)
    _move_constants(copy, path, mapper)
    copy.map_constants(path, mapper)
    return copy


def _is_constant(module: Module, key: str, item: Any) -> bool:
    """Whether attribute ``key`` holding ``item`` is one of the module's recorded constants."""
    return isinstance(item, QuantizedTensor) or (
        key in type(module).recorded_constants and isinstance(item, Tensor))


def _constant_holders(value: Any, path: str) -> Iterator[tuple[Module, str, str]]:
    """(module, attribute, record path) of every recorded constant below ``value``."""
    for owner, key, name, item in _attributes(value, path):
        if isinstance(owner, Module) and _is_constant(owner, key, item):
            yield owner, key, name


def _constant_parts(module: Module) -> dict[str, Tensor]:
    """Each recorded constant's tensors by their record names (a quantized tensor's parts)."""
    parts: dict[str, Tensor] = {}
    for owner, key, path in _constant_holders(module, ""):
        item = owner.__dict__[key]
        if isinstance(item, QuantizedTensor):
            for name, part in zip(("values", "scales", "zero_points"), item.parts()):
                if part is not None:
                    parts[join(path, name)] = part
        else:
            parts[path] = item
    return parts


def _check_constant(name: str, source: DType, target: DType) -> None:
    """A recorded constant takes float values of any precision where it is float, and values
    of its own dtype otherwise (a quantized tensor's integers)."""
    if source is not target and not (source.is_float and target.is_float):
        raise RecordError(f"{name!r} is {target} but the record holds {source} values")


def _move_constants(copy: Module, path: str, mapper: ParamMapper) -> None:
    """The recorded constants of ``copy`` (a module ``map`` just made) moved to the device
    ``mapper`` put its parameters on: the first of its own parameters, else the device a
    constant's float tensor passed through ``mapper`` as a frozen parameter lands on. A mapper
    that knows only the module's parameters by name (``load_record``'s) leaves them."""
    keys = [key for key, item in vars(copy).items() if _is_constant(copy, key, item)]
    if not keys:
        return
    device = next((p.device for p in copy.params()), None)
    if device is None:
        first = copy.__dict__[keys[0]]
        probe = first.scales if isinstance(first, QuantizedTensor) else first
        if not probe.dtype.is_float:
            return
        try:
            device = mapper(join(path, keys[0]), Param(probe, require_grad=False)).device
        except KeyError:
            return
    for key in keys:
        item = copy.__dict__[key]
        if item.device != device:
            copy.__dict__[key] = item.to_device(device)


def _map_value(value: Any, path: str, mapper: ParamMapper) -> Any:
    if isinstance(value, Param):
        return mapper(path, value)
    if isinstance(value, Module):
        return _map_module(value, path, mapper)
    if isinstance(value, list):
        return [_map_value(item, join(path, str(i)), mapper) for i, item in enumerate(value)]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_map_value(item, join(path, str(i)), mapper) for i, item in enumerate(value))
    if isinstance(value, dict):
        return {key: _map_value(item, join(path, key), mapper) if isinstance(key, str) else item
                for key, item in value.items()}
    return value


def _record_of(value: Any) -> Any:
    """The record of a value, or None when it holds no parameter or recorded constant."""
    if isinstance(value, Param):
        return value.val()
    if isinstance(value, QuantizedTensor):
        return {name: part for name, part in zip(("values", "scales", "zero_points"),
                                                 value.parts()) if part is not None}
    if isinstance(value, Module):
        module = value
        tree = {key: item if _is_constant(module, key, item) and isinstance(item, Tensor)
                else _record_of(item) for key, item in vars(module).items()}
        tree = {key: item for key, item in tree.items() if item is not None}
        return tree or None
    if isinstance(value, dict):
        tree = {key: _record_of(item) for key, item in value.items() if isinstance(key, str)}
        tree = {key: item for key, item in tree.items() if item is not None}
        return tree or None
    if isinstance(value, list | tuple):
        items = [_record_of(item) for item in value]
        if all(item is None for item in items):
            return None
        # Keep indices aligned with the attribute: a gap becomes an empty mapping.
        return [{} if item is None else item for item in items]
    return None
