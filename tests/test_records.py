"""``mpcheck.records.dataclass`` behaves as ``dataclasses.dataclass`` for what mpcheck uses:
the same class twice, once from each, compared method by method."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from typing import Any, ClassVar

import pytest

from mpcheck import records


def twins(options: dict[str, Any], body: str) -> tuple[type, type]:
    made = []
    for decorator in (dataclasses.dataclass, records.dataclass):
        namespace: dict[str, Any] = {"field": dataclasses.field, "deco": decorator}
        namespace |= {"options": options, "ClassVar": ClassVar}
        exec(f"@deco(**options)\nclass Thing:\n{body}", namespace)
        made.append(namespace["Thing"])
    return made[0], made[1]


BODIES = {
    "plain": "    a: int\n    b: str = 'x'\n",
    "factory": "    a: int\n    items: list = field(default_factory=list)\n    c: int = 3\n",
    "uncompared": "    a: int\n    note: str = field(default='', compare=False)\n",
    "documented": "    '''Some words.'''\n    a: int\n",
    "empty": "    pass\n",
    "post_init": (
        "    a: int\n    doubled: int = field(default=0, init=False)\n"
        "    def __post_init__(self):\n        object.__setattr__(self, 'doubled', 2 * self.a)\n"
    ),
    "classvar": "    a: int\n    LIMIT: ClassVar[int] = 4\n",
}
OPTIONS = [{}, {"frozen": True}, {"frozen": True, "order": True}, {"frozen": True, "kw_only": True}]


def outcome(function: Any, *args: Any) -> object:
    try:
        return function(*args)
    except Exception as exc:  # noqa: BLE001 - compared, not hidden
        return type(exc)


def make(cls: type, options: dict[str, Any], **values: Any) -> Any:
    names = [p for p in inspect.signature(cls).parameters]
    if options.get("kw_only"):
        return cls(**{n: values[n] for n in names if n in values})
    return cls(*(values[n] for n in names if n in values))


@pytest.mark.parametrize("options", OPTIONS, ids=str)
@pytest.mark.parametrize("body", sorted(BODIES))
def test_same_behaviour_as_the_standard_library(options: dict[str, Any], body: str) -> None:
    std, ours = twins(options, BODIES[body])
    assert str(inspect.signature(std)) == str(inspect.signature(ours))
    assert std.__doc__ == ours.__doc__
    assert std.__match_args__ == ours.__match_args__  # type: ignore[attr-defined]
    assert [f.name for f in dataclasses.fields(std)] == [f.name for f in dataclasses.fields(ours)]
    values = [{"a": 1, "b": "y", "items": [1], "c": 5, "note": "n"}, {"a": 2}, {"a": 1}]
    pairs = []
    for v in values:
        if body == "empty":
            v = {}
        pairs.append((make(std, options, **v), make(ours, options, **v)))
    for s, o in pairs:
        assert repr(s).replace("test_records", "") == repr(o).replace("test_records", "")
        assert vars(s) == vars(o)
        assert dataclasses.asdict(s) == dataclasses.asdict(o)
        assert dataclasses.replace(s).__class__ is std
        assert vars(dataclasses.replace(o)) == vars(o)
    for s1, o1 in pairs:
        for s2, o2 in pairs:
            assert (s1 == s2) == (o1 == o2)
            assert (s1 == 3) == (o1 == 3)
            if options.get("order"):
                for op in ("__lt__", "__le__", "__gt__", "__ge__"):
                    assert getattr(s1, op)(s2) == getattr(o1, op)(o2)
    s, o = pairs[0]
    assert (std.__hash__ is None) == (ours.__hash__ is None)
    if std.__hash__ is not None:
        assert outcome(hash, s) == outcome(hash, o)
    if options.get("frozen"):
        for obj in (s, o):
            with pytest.raises(dataclasses.FrozenInstanceError):
                obj.a = 5  # type: ignore[attr-defined]
            with pytest.raises(dataclasses.FrozenInstanceError):
                del obj.a  # type: ignore[attr-defined]
    else:
        s.a = o.a = 7  # type: ignore[attr-defined]
        assert vars(s) == vars(o)


def test_factories_give_each_instance_its_own_value() -> None:
    _, ours = twins({}, BODIES["factory"])
    first, second = ours(1), ours(2)
    first.items.append(1)
    assert second.items == []


def test_recursive_repr_is_cut_as_the_standard_library_does() -> None:
    std, ours = twins({}, "    a: object = None\n")
    s, o = std(), ours()
    s.a, o.a = s, o
    assert repr(s) == repr(o) == "Thing(a=...)"


def test_a_class_with_its_own_methods_is_left_to_the_standard_library() -> None:
    body = "    a: int\n    def __eq__(self, other):\n        return True\n"
    std, ours = twins({"frozen": True}, body)
    assert ours(1) == ours(2) and hash(ours(1)) == hash(std(1))


def test_instances_pickle() -> None:
    assert pickle.loads(pickle.dumps(Sample(1, "b"))) == Sample(1, "b")


@records.dataclass(frozen=True)
class Sample:
    """A module-level record, as mpcheck's are."""

    a: int
    b: str
