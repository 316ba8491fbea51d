"""``burnish.capture``'s signature matcher: a replayed call checks its arguments against the
last signature instead of building it again. Wherever the matcher says "the same", flattening
must give the same signature, tensors and places; it may only say "not the same" more often."""

from __future__ import annotations

import collections
import math
import random

import numpy as np
import pytest

import burnish as bn
from burnish import Tensor
from burnish.replay.tree import flatten, matcher


class Plain:
    def __init__(self, **attributes):
        self.__dict__.update(attributes)


class Slotted:
    __slots__ = ("a", "b", "c")


class SlottedChild(Slotted):
    __slots__ = ("d",)


Pair = collections.namedtuple("Pair", "x y")


class MyList(list):
    pass


def _function():
    return 1


def _slotted(**set_):
    out = SlottedChild()
    for name, value in set_.items():
        setattr(out, name, value)
    return out


def _tensor(value=0.0):
    return Tensor.from_data(np.full((2,), value, np.float32), device="ndarray")


def _tree(t, array):
    return ([Plain(w=t[0], stride=(1, 2), mode="zeros", on=True, scale=0.5,
                   inner=Plain(b=t[1], none=None)),
             [t[2], 3, "x"], {"k": t[3], 2: (t[4],)}, Pair(t[5], 7),
             _slotted(a=t[6], c=1.5), MyList([t[7]]), array, _function, np.float32, range(3)],
            {"lr": 0.01}, ())


def _check(structure, match, value, expect: bool | None = None):
    """``match`` on ``value`` agrees with flattening it (and says ``expect`` when given)."""
    tensors, places = [], []
    said = match(value, tensors, places)
    flat_tensors, flat_places = [], []
    same = flatten(value, flat_tensors, flat_places) == structure
    if said:  # never "the same" where flatten differs
        assert same
        assert len(tensors) == len(flat_tensors)
        assert all(a is b for a, b in zip(tensors, flat_tensors))
        assert [(id(p), k) for p, k in places] == [(id(p), k) for p, k in flat_places]
    if expect is not None:
        assert said is expect
    return said


def test_the_same_arguments_match_with_their_tensors_and_places():
    tensors = [_tensor(i) for i in range(8)]
    array = np.zeros(3)
    value = _tree(tensors, array)
    structure = flatten(value, [], [])
    match = matcher(structure)
    assert match is not None
    _check(structure, match, value, expect=True)
    # new tensors in the same places: the same signature, the new tensors
    _check(structure, match, _tree([_tensor(i) for i in range(8)], array), expect=True)


def _mutations(value):
    """Each a function that changes ``value`` (as ``_tree`` builds it) in one place."""
    args = value[0]
    plain, items, mapping, pair, slotted, mylist = args[:6]

    def set_(obj, name, new):
        return lambda: setattr(obj, name, new)

    def item(seq, i, new):
        return lambda: seq.__setitem__(i, new)

    return {
        "a constant": set_(plain, "stride", (2, 2)),
        "an int for a bool": set_(plain, "on", 1),
        "a float for an int": item(items, 1, 3.0),
        "a bool for an int": item(items, 1, True),
        "a NaN": set_(plain, "scale", math.nan),
        "a string": set_(plain, "mode", "reflect"),
        "a tensor for a constant": item(items, 1, _tensor()),
        "a constant for a tensor": set_(plain, "w", 0.0),
        "an attribute added": set_(plain.inner, "extra", 1),
        "an attribute removed": lambda: delattr(plain.inner, "none"),
        "attributes reordered": lambda: plain.__dict__.update(
            {k: plain.__dict__.pop(k) for k in list(plain.__dict__)[::-1]}),
        "a key reordered": lambda: mapping.update({"k": mapping.pop("k")}),
        "a key changed": lambda: mapping.update({3: mapping.pop(2)}),
        "a list grown": lambda: items.append(1),
        "a list shrunk": lambda: items.pop(),
        "a tuple for a list": item(args, 1, tuple(items)),
        "a list for a subclass": item(args, 5, list(mylist)),
        "a namedtuple for a tuple": item(args, 3, tuple(pair)),
        "a slot set": set_(slotted, "b", 1),
        "a slot unset": lambda: delattr(slotted, "c"),
        "a subclass's slot set": set_(slotted, "d", 2),
        "another array": item(args, 6, np.zeros(3)),
        "another function": item(args, 7, lambda: 1),
        "another class": item(args, 8, np.float64),
        "another range": item(args, 9, range(4)),
        "another type of object": item(args, 4, Plain(a=1)),
        "a keyword argument's value": lambda: value[1].update(lr=0.02),
    }


@pytest.mark.parametrize("change", sorted(_mutations(_tree([None] * 8, None))))
def test_every_change_flatten_sees_the_matcher_sees(change):
    value = _tree([_tensor(i) for i in range(8)], np.zeros(3))
    structure = flatten(value, [], [])
    match = matcher(structure)
    _mutations(value)[change]()
    assert flatten(value, [], []) != structure  # the change is one the signature names
    _check(structure, match, value, expect=False)


def test_random_changes_never_match_where_flatten_differs():
    rng = random.Random(0)
    kinds = sorted(_mutations(_tree([None] * 8, None)))
    matched = 0
    for _ in range(200):
        value = _tree([_tensor() for _ in range(8)], np.zeros(3))
        structure = flatten(value, [], [])
        match = matcher(structure)
        changes = _mutations(value)
        for name in rng.sample(kinds, rng.randint(0, 3)):
            try:
                changes[name]()
            except (AttributeError, KeyError, IndexError):
                pass  # a change an earlier one made impossible
        matched += _check(structure, match, value)
    assert matched  # the unchanged draws matched


def test_signatures_it_does_not_cover_have_no_matcher():
    from burnish.quantization import QuantScheme

    quantized = Tensor.from_data(np.ones((4, 4), np.float32), device="ndarray").quantize(
        QuantScheme())
    assert matcher(flatten(((quantized,), {}, ()), [], [])) is None


def test_a_replayed_call_records_again_after_a_held_number_changes():
    """The end to end case: a module's constant changed between replays is a new signature
    (a record of its own), never a replay of the old one."""
    device = bn.backend("ndarray").default_device()
    holder = Plain(scale=2.0)

    @bn.capture(strict=True)
    def scaled(x):
        return x * holder.scale

    x = Tensor.from_data(np.arange(4, dtype=np.float32), device=device)
    for _ in range(4):
        np.testing.assert_array_equal(scaled(x).to_numpy(), np.arange(4) * 2.0)
    holder.scale = 3.0
    for _ in range(4):
        np.testing.assert_array_equal(scaled(x).to_numpy(), np.arange(4) * 3.0)
    stats = scaled.stats()
    assert len(stats) == 2 and all(s["replays"] >= 1 for s in stats)


class _Holder:
    __slots__ = ("t", "name", "unset")


class _Copied(_Holder):
    __slots__ = ()

    def __copy__(self):
        out = _Copied()
        out.name = "copied"
        out.t = self.t
        return out


@pytest.mark.parametrize("kind", [_Holder, _Copied], ids=["slots", "own-copy"])
def test_a_replay_rebuilds_objects_of_slots_around_the_new_tensors(kind):
    """A returned object of ``__slots__`` is rebuilt slot by slot (set slots set, unset ones
    unset), and one with a ``__copy__`` of its own through its copy."""
    device = bn.backend("ndarray").default_device()

    @bn.capture(strict=True)
    def made(x):
        out = kind()
        out.t, out.name = x * 2, "n"
        return out

    for i in range(5):
        x = Tensor.from_data(np.full(3, float(i), np.float32), device=device)
        out = made(x)
        assert type(out) is kind and not hasattr(out, "unset")
        np.testing.assert_array_equal(out.t.to_numpy(), np.full(3, 2.0 * i))
        assert out.name == "n"
    assert made.stats()[0]["replays"] >= 2
