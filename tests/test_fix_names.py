"""A fix reads only names bound where it goes: what counts as a read, and where."""

from __future__ import annotations

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, ScopeProvider

from mpcheck.output.fix_names import Scopes, unbound

SOURCE = """import torch
import torch.nn.functional as F

def helper(mask):
    bias = torch.where(mask > 0, 0.0, -1e10)
    loss = F.binary_cross_entropy(bias, mask)
    return torch.autocast("cuda", False)

def forward(scores, mask):
    return scores
"""


def first(module: cst.Module, kind: type[cst.CSTNode], text: str) -> cst.CSTNode:
    """The first ``kind`` node spelled ``text`` that is not a definition's name."""
    found: list[cst.CSTNode] = []

    class Find(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            if isinstance(node, kind) and module.code_for_node(node) == text:
                found.append(node)
            return not isinstance(node, (cst.Parameters, cst.AssignTarget))

    module.visit(Find())
    return found[0]


@pytest.mark.parametrize(
    ("kind", "replaced", "code", "missing"),
    [
        (cst.Float, "1e10", "torch.finfo(scores.dtype).max", {"scores"}),
        (cst.Float, "1e10", "torch.finfo(mask.dtype).max", set()),
        (cst.Name, "binary_cross_entropy", "binary_cross_entropy_with_logits", set()),
        (cst.Arg, "False", "enabled=False, dtype=torch.float16", set()),
        (cst.Arg, "False", "enabled=flag", {"flag"}),
        (cst.Name, "mask", "scores", {"scores"}),
        (cst.Float, "1e10", "abs(len(mask))", set()),  # builtins are bound everywhere
    ],
)
def test_names_a_fix_reads(
    kind: type[cst.CSTNode], replaced: str, code: str, missing: set[str]
) -> None:
    module = cst.parse_module(SOURCE)
    scopes = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider)
    assert unbound(code, first(module, kind, replaced), scopes.get) == missing


@pytest.mark.parametrize(
    ("kind", "replaced", "code"),
    [
        (cst.Arg, "False", "enabled=False"),
        (cst.Call, 'torch.autocast("cuda", False)', 'torch.autocast("cuda", enabled=False)'),
    ],
)
def test_scopes_are_not_computed_for_a_fix_that_reads_nothing_new(
    kind: type[cst.CSTNode], replaced: str, code: str
) -> None:
    module = cst.parse_module(SOURCE)
    asked: list[cst.CSTNode] = []

    def scope_of(node: cst.CSTNode) -> None:
        asked.append(node)

    assert unbound(code, first(module, kind, replaced), scope_of) == set()
    assert asked == []


PARTS = """import torch
LIMIT = 2.0

class Block:
    scale = 3.0

    def forward(self, x):
        return x * 1e4

def configure():
    global RATE
    RATE = 0.5

def later(x):
    return x + 1e4

AFTER = 1.0
"""


@pytest.mark.parametrize(
    ("replaced_in", "code", "missing"),
    [
        ("forward", "LIMIT", set()),  # module level, before the class
        ("forward", "AFTER", set()),  # module level, after it: bound when it runs
        ("forward", "later(x)", set()),  # another function's name (its body left out)
        ("forward", "scale", {"scale"}),  # a class body's names are not seen in a method
        ("forward", "self.scale", set()),
        ("later", "Block", set()),
        # bound only by ``global`` inside another function's body: not seen, the safe side
        ("later", "RATE", {"RATE"}),
    ],
)
def test_scopes_over_the_statement_that_holds_the_edit(
    replaced_in: str, code: str, missing: set[str]
) -> None:
    """The scope of an edit is computed over the top-level statement that holds it and the
    rest of the top level without other bodies: the answers of the whole module's scopes,
    except for a name only a ``global`` in another body binds (then the fix is not offered)."""
    module = cst.parse_module(PARTS)
    node = _floats(module)[_IN[replaced_in]]
    assert unbound(code, node, Scopes(module).of) == missing
    whole = MetadataWrapper(module, unsafe_skip_copy=True).resolve(ScopeProvider)
    assert unbound(code, node, whole.get) == (missing - {"RATE"})


_IN = {"forward": 2, "later": 4}  # the ``1e4`` of each (after 2.0 and 3.0; 0.5 between)


def _floats(module: cst.Module) -> list[cst.CSTNode]:
    found: list[cst.CSTNode] = []

    class Find(cst.CSTVisitor):
        def visit_Float(self, node: cst.Float) -> None:
            found.append(node)

    module.visit(Find())
    return found


def test_scopes_are_computed_once_per_statement(monkeypatch: pytest.MonkeyPatch) -> None:
    module = cst.parse_module(PARTS)
    resolved: list[int] = []
    real = MetadataWrapper.resolve

    def counted(self: MetadataWrapper, provider: object) -> object:
        resolved.append(len(self.module.body))
        return real(self, provider)  # type: ignore[arg-type]

    monkeypatch.setattr(MetadataWrapper, "resolve", counted)
    scopes = Scopes(module)
    floats = _floats(module)
    in_forward, in_later = floats[_IN["forward"]], floats[_IN["later"]]
    for node in (in_forward, in_later, in_forward):
        scopes.of(node)
    assert len(resolved) == 2


FLOW = """import torch
t = torch.zeros(1)

def assigned_later(x):
    a = 1e4
    t = x * 2
    return t

def in_a_loop(x):
    for i in range(3):
        a = 1e4
        kv = x @ x
    return kv

def one_branch(x, flag):
    if flag:
        logit = x
    a = 1e4
    return logit

def both_branches(x, flag):
    if flag:
        logit = x
    else:
        logit = -x
    a = 1e4
    return logit

def other_branch_raises(x, flag):
    if flag:
        logit = x
    else:
        raise ValueError(flag)
    a = 1e4
    return logit

def loop_target_and_earlier(xs):
    for x in xs:
        h = x + 1
        a = 1e4

def try_body(x):
    try:
        h = x.float()
    except ValueError:
        pass
    a = 1e4
    return h

def closure(x):
    def inner():
        return 1e4
    h = x
    return inner

def global_declared(x):
    global t
    a = 1e4
    t = x

def comprehension(xs):
    return [1e4 for y in xs]

a = 1e4
late = 1
"""


@pytest.mark.parametrize(
    ("holder", "code", "missing"),
    [
        ("assigned_later", "t.dtype", {"t"}),  # local to the whole function: the global hides
        ("assigned_later", "x.dtype", set()),
        ("in_a_loop", "kv.dtype", {"kv"}),  # bound on the second pass, not the first
        ("one_branch", "logit.dtype", {"logit"}),
        ("both_branches", "logit.dtype", set()),
        ("other_branch_raises", "logit.dtype", set()),
        ("loop_target_and_earlier", "h + x", set()),
        ("try_body", "h.dtype", {"h"}),  # the try body may stop before it
        ("closure", "h.dtype", {"h"}),  # inner() could run before ``h = x``
        ("global_declared", "t.dtype", set()),
        ("comprehension", "y * 2", set()),
        ("<module>", "t.dtype", set()),
        ("<module>", "late", {"late"}),  # the module runs top to bottom
    ],
)
def test_a_fix_reads_only_names_bound_on_every_path(
    holder: str, code: str, missing: set[str]
) -> None:
    """A name in scope is not enough: it must hold a value when the edited code runs
    (transformers' nystromformer got ``dtype=key_value.dtype`` above the loop binding it)."""
    module = cst.parse_module(FLOW)
    node = _float_in(module, holder)
    scopes = Scopes(module)
    assert unbound(code, node, scopes.of, scopes.path) == missing


def _float_in(module: cst.Module, holder: str) -> cst.CSTNode:
    """The ``1e4`` of function ``holder`` (or of the module's own top level)."""
    for stmt in module.body:
        name = stmt.name.value if isinstance(stmt, cst.FunctionDef) else "<module>"
        if name == holder:
            floats = _floats(module.with_changes(body=[stmt]))
            if floats:
                return floats[0]
    raise AssertionError(holder)
