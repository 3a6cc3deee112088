"""Dataclasses of the compiled modules whose ``__init__`` is written out.

A dataclass's generated ``__init__`` is interpreted code even in the compiled build (``dataclasses`` makes it at
import), and a frozen one sets each field through ``object.__setattr__``: for the classes made several times per
packet or per expected delivery, the construction alone was a measurable part of the audit. Those classes write
their ``__init__`` out, which mypyc compiles. What the generated one did must stay true: these tests hold each
written ``__init__`` to its class's fields (names, order, defaults, every field set), read from the source so that
both builds are checked the same way, and check that the compiled build runs them natively.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import types
from pathlib import Path

import pytest

from mqttaudit import codec

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = SRC / "mqttaudit"


def _is_dataclass(node: ast.ClassDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Name) and target.id == "dataclass":
            return True
    return False


def _written(path: Path) -> list[tuple[str, ast.ClassDef, ast.FunctionDef]]:
    module = ".".join(path.relative_to(SRC).with_suffix("").parts)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and _is_dataclass(node):
            init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
            if init is not None:
                found.append((module, node, init))
    return found


#: Every dataclass of the package whose ``__init__`` is written out, found in the source (none is left unchecked).
WRITTEN = [entry for path in sorted(PACKAGE.rglob("*.py")) for entry in _written(path)]


def _factory(value: ast.expr | None) -> str | None:
    """The ``default_factory`` of a ``field(...)`` default, as source text (None: not a factory)."""
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "field":
        for keyword in value.keywords:
            if keyword.arg == "default_factory":
                return ast.unparse(keyword.value)
    return None


def _assigned(init: ast.FunctionDef) -> dict[str, ast.expr]:
    """What the body sets each attribute to: ``self.name = value`` or ``object.__setattr__(self, "name", value)``."""
    found: dict[str, ast.expr] = {}
    for statement in init.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target = statement.targets[0]
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
                found[target.attr] = statement.value
        elif isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            call = statement.value
            if ast.unparse(call.func) == "object.__setattr__" and isinstance(call.args[1], ast.Constant):
                found[str(call.args[1].value)] = call.args[2]
    return found


def test_the_package_holds_the_written_initialisers_of_the_judge_s_per_packet_objects() -> None:
    assert {node.name for _, node, _ in WRITTEN} >= {
        "Seen",
        "Obligation",
        "Flow",
        "Subscription",
        "Message",
        "Expectation",
        "Undecided",
        "Judgement",
    }


@pytest.mark.parametrize(("module", "node", "init"), WRITTEN, ids=[f"{m}.{n.name}" for m, n, _ in WRITTEN])
def test_a_written_initialiser_takes_and_sets_every_field_as_the_generated_one_would(
    module: str, node: ast.ClassDef, init: ast.FunctionDef
) -> None:
    fields = [n for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)]
    fields = [f for f in fields if "ClassVar" not in ast.unparse(f.annotation)]
    names = [f.target.id for f in fields if isinstance(f.target, ast.Name)]
    arguments = init.args.args[1:]
    assert [a.arg for a in arguments] == names, "the parameters are the fields, in their order"
    assert not init.args.kwonlyargs and init.args.vararg is None and init.args.kwarg is None
    defaults = [None] * (len(arguments) - len(init.args.defaults)) + list(init.args.defaults)
    assigned = _assigned(init)
    assert sorted(assigned) == sorted(names), "every field is set, and nothing else"
    for field_node, argument, default in zip(fields, arguments, defaults, strict=True):
        name = argument.arg
        factory = _factory(field_node.value)
        if factory is None:
            # The same default, and the field set to its parameter as given.
            assert (default is None) == (field_node.value is None), name
            if default is not None and field_node.value is not None:
                assert ast.unparse(default) == ast.unparse(field_node.value), name
            assert ast.unparse(assigned[name]) == name, name
        else:
            # A fresh value of the factory when the parameter is left out (None), else the value given.
            assert default is not None and ast.unparse(default) == "None", name
            empty = {"list": "[]", "dict": "{}", "set": "set()"}[factory]
            assert ast.unparse(assigned[name]) == f"{empty} if {name} is None else {name}", name


@pytest.mark.parametrize(("module", "node", "init"), WRITTEN, ids=[f"{m}.{n.name}" for m, n, _ in WRITTEN])
def test_a_written_initialiser_is_kept_by_the_dataclass_and_native_when_compiled(
    module: str, node: ast.ClassDef, init: ast.FunctionDef
) -> None:
    cls = getattr(importlib.import_module(module), node.name)
    assert dataclasses.is_dataclass(cls)
    written = cls.__dict__["__init__"]
    if codec.COMPILED:
        assert not isinstance(written, types.FunctionType), "the compiled build runs it natively"
    else:
        assert isinstance(written, types.FunctionType) and written.__code__.co_filename.endswith(".py")


def test_a_frozen_class_with_a_written_initialiser_is_still_frozen_and_replace_still_works() -> None:
    from mqttaudit.judge.verdict import Undecided

    undecided = Undecided("rule", "why", event=3)
    assert (undecided.rule, undecided.reason, undecided.side, undecided.event, undecided.time) == (
        "rule",
        "why",
        None,
        3,
        None,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        undecided.rule = "other"  # type: ignore[misc]
    changed = dataclasses.replace(undecided, time=1.5)
    assert changed == Undecided("rule", "why", None, 3, 1.5) and hash(changed) == hash(
        Undecided("rule", "why", None, 3, 1.5)
    )
    assert changed != undecided


def test_events_and_transcript_records_pickle_by_position_and_come_back_equal() -> None:
    import pickle

    from mqttaudit.codec import Direction, Publish, StreamDecoder, encode
    from mqttaudit.judge.events import Closed, Lost, Quiet, Sent
    from mqttaudit.judge.transcript import Delivered, Published, Subscribed, Transcript, Unsubscribed

    client = Direction.FROM_CLIENT
    publish = Publish(topic="a/b", payload=b"x", qos=1, packet_id=7)
    frame = StreamDecoder(client).feed(encode(publish))[0]
    closed = Closed(2.0, None, True)
    published = Published(3, publish, 0.9, accepted=1.0, certain=True)
    delivered = Delivered(4, 1.1, publish)
    records: list[object] = [
        Sent(1.5, client, frame, True),
        Sent(1.5, client, frame),
        closed,
        Quiet(3.0, 4.0),
        Lost(2.5, client, 10, undecoded=True),
        Subscribed(1, "a/#", 1, 0.5, 1, 0.6, no_local=False, retain_as_published=True, retain_handling=2, identifier=4),
        Unsubscribed(2, "a/#", 0.7, acked=0.8),
        published,
        delivered,
    ]
    for record in records:
        # By position: exactly the fields, in their order (neighbouring fields hold different values above).
        values = tuple(getattr(record, field.name) for field in dataclasses.fields(record))  # type: ignore[arg-type]
        assert record.__reduce__() == (type(record), values), record
        back = pickle.loads(pickle.dumps(record))
        assert type(back) is type(record) and back == record, record
    transcript = Transcript(published=[published], delivered=[delivered], closed=closed, answers={4: (0, 1.2)})
    assert pickle.loads(pickle.dumps(transcript)) == transcript
