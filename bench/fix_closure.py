"""Apply every fix (safe and unsafe) to a tree of Python files and prove the result sound.

For each file with fixes: the fixed file compiles, pyflakes reports no undefined name it did
not report before, and re-checking it brings no finding that was not there before (compared
by rule and message, with line numbers left out, since fixes move lines). Each fix, applied
alone, must also read only names bound on every path to it, read ``.weight`` only from a
module built as a layer that has one, pass ``dtype=`` only to a factory that takes it, and
use no torch API newer than the torch the tree declares (its ``target-torch-version`` or
requirement). Everything happens in memory: the trees are only read. Usage::

    python bench/fix_closure.py /path/to/transformers /path/to/diffusers ...
    python bench/fix_closure.py --dir /tmp/corpora      # every corpus unpacked there

Prints one line per problem and a summary per tree; exits 1 on any problem.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider
from pyflakes.api import check as pyflakes_check
from pyflakes.reporter import Reporter

from mpcheck.diagnostics import Diagnostic, Edit
from mpcheck.files.source import SourceError, SourceFile
from mpcheck.knowledge.torch_api import MODULE_WRAPPERS, TAKES_DTYPE
from mpcheck.output.bound_before import bound_on_every_path, path_to
from mpcheck.output.fixes import apply_fixes
from mpcheck.output.module_dtype import WEIGHTED_LAYERS
from mpcheck.pipeline.one_file import Options, check_source
from mpcheck.project.names import ImportTable, dotted
from mpcheck.ruleset.rule import all_rules
from mpcheck.settings.torch_target import TorchVersion, declared_torch, project_root

RULES = tuple(all_rules())
DEFAULT = Options()
_LINE = re.compile(r"\bline \d+")


class _Undefined(Reporter):  # type: ignore[misc]
    """Collects pyflakes' "undefined name" messages; ignores everything else."""

    def __init__(self) -> None:
        self.names: Counter[str] = Counter()

    def flake(self, message: object) -> None:
        text = str(message)
        if "undefined name" in text:
            self.names[text.split("undefined name", 1)[1].strip()] += 1

    def syntaxError(self, *args: object) -> None:  # noqa: N802 - pyflakes' API
        self.names["<syntax error>"] += 1

    def unexpectedError(self, *args: object) -> None:  # noqa: N802 - pyflakes' API
        self.names["<error>"] += 1


def undefined(text: str, name: str) -> Counter[str]:
    reporter = _Undefined()
    pyflakes_check(text, name, reporter)
    return reporter.names


def findings(data: bytes, name: str, options: Options = DEFAULT) -> Counter[tuple[str, str]]:
    return _counted(_shown(data, name, options))


def _counted(diagnostics: Sequence[Diagnostic]) -> Counter[tuple[str, str]]:
    return Counter((d.code, _LINE.sub("line N", d.message)) for d in diagnostics)


def _shown(data: bytes, name: str, options: Options = DEFAULT) -> list[Diagnostic]:
    return [d for d in check_source(data, name, RULES, options) if not d.suppressed]


def close(
    data: bytes,
    name: str,
    shown: Sequence[Diagnostic] | None = None,
    target: TorchVersion | None = None,
) -> tuple[bytes | None, list[str]]:
    """The fixed bytes (None when nothing was fixed) and every problem the fixes caused.
    ``shown``: the file's unsuppressed findings, when the caller has them already;
    ``target``: the oldest torch the file's project supports."""
    try:
        source = SourceFile.decode(data)
    except SourceError:
        return None, []
    options = Options(target_torch_version=target)
    diagnostics = _shown(data, name, options) if shown is None else list(shown)
    if not any(d.fix for d in diagnostics):
        return None, []
    text, count = apply_fixes(source, diagnostics, unsafe=True)
    if not count:
        return None, []
    new = source.encode(text)
    problems = []
    try:
        compile(new, name, "exec")
    except SyntaxError as exc:
        return new, [f"{name}: the fixed file does not compile: {exc}"]
    gained = undefined(text, name) - undefined(source.text, name)
    problems += [f"{name}: the fixes use the undefined name {n}" for n in gained]
    for diag in diagnostics:
        if diag.fix is not None:
            where = f"{name}:{diag.start.row}: {diag.code}'s fix"
            problems += [f"{where} {p}" for p in fix_problems(source, diag.fix.edits, target)]
    appeared = findings(new, name, options) - _counted(diagnostics)
    problems += [f"{name}: a new {code} after fixing: {message}" for code, message in appeared]
    return new, problems


# The first torch with each API a fix may write (torch-truth.md, MPC404's table).
NEWER_APIS = {
    "torch.amp.GradScaler": (2, 3),
    "torch.amp.custom_fwd": (2, 4),
    "torch.amp.custom_bwd": (2, 4),
    "torch.amp.autocast": (2, 0),
}


def fix_problems(
    source: SourceFile, edits: Sequence[Edit], target: TorchVersion | None
) -> list[str]:
    """What is wrong with one fix applied alone to ``source``: a name read before it is
    bound, ``.weight`` of a module built without one, ``dtype=`` to a callee without it, an
    API newer than ``target``."""
    spans = sorted((source.offset(e.start), source.offset(e.end), e.content) for e in edits)
    text, shift, written = source.text, 0, []
    for start, end, content in spans:
        at = start + shift
        text = text[:at] + content + text[at + end - start :]
        written.append((at, at + len(content)))
        shift += len(content) - (end - start)
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError:
        return ["does not parse"]
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    places, parents = wrapper.resolve(PositionProvider), wrapper.resolve(ParentNodeProvider)
    fixed = SourceFile.from_text(text)
    bounds = [(fixed.position(a), fixed.position(b)) for a, b in written]
    inside = [
        node
        for node, r in places.items()
        for first, last in bounds
        if (r.start.line, r.start.column + 1) >= (first.row, first.column)
        and (r.end.line, r.end.column + 1) <= (last.row, last.column)
    ]
    imports = ImportTable.of(module)
    problems = []
    for node in inside:
        parent = parents.get(node)
        if isinstance(node, cst.Name) and _reads(node, parent):
            path = path_to(module, node)
            if path is not None and not bound_on_every_path(node.value, path):
                problems.append(f"reads `{node.value}` where it may be unbound")
        if isinstance(node, cst.Attribute) and node.attr.value == "weight":
            built = _built_as(module, dotted(node.value), imports)
            if built is not None and built.rsplit(".", 1)[-1] not in WEIGHTED_LAYERS:
                problems.append(f"reads `.weight` of a `{built}`, which has none")
        call = parents.get(node)
        if isinstance(node, cst.Arg) and node.keyword is not None and isinstance(call, cst.Call):
            dtype = node.keyword.value == "dtype"
            callee = (imports.resolve(call.func) or "") if dtype else ""
            if callee.startswith("torch.") and callee.count(".") == 1:
                if callee not in TAKES_DTYPE and callee not in ("torch.autocast",):
                    problems.append(f"passes `dtype=` to `{callee}`, which takes none")
        if isinstance(node, (cst.Name, cst.Attribute)) and target is not None:
            api = imports.resolve(node) or ""
            since = NEWER_APIS.get(api)
            if since is not None and target < since:
                problems.append(f"writes `{api}` (torch {since}) for torch {target}")
    return problems


def _reads(node: cst.Name, parent: cst.CSTNode | None) -> bool:
    """Whether ``node`` is a variable read (not an attribute, a keyword or a target)."""
    if isinstance(parent, cst.Attribute) and parent.attr is node:
        return False
    if isinstance(parent, cst.Arg) and parent.keyword is node:
        return False
    return not isinstance(parent, (cst.AssignTarget, cst.Param, cst.FunctionDef, cst.ClassDef))


def _built_as(module: cst.Module, target: str | None, imports: ImportTable) -> str | None:
    """The torch.nn class ``target`` (``self.head``) is assigned an instance of, when every
    assignment to it in the file builds one."""
    if target is None:
        return None
    built: set[str] = set()

    class Find(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            if any(dotted(t.target) == target for t in node.targets):
                value = node.value
                name = imports.resolve(value.func) if isinstance(value, cst.Call) else None
                while name in MODULE_WRAPPERS and isinstance(value, cst.Call) and value.args:
                    value = value.args[0].value  # ``weight_norm(nn.Conv1d(...))``: the Conv1d
                    name = imports.resolve(value.func) if isinstance(value, cst.Call) else None
                built.add(name or "")

    module.visit(Find())
    if len(built) != 1:
        return None
    (name,) = built
    return name if name.startswith("torch.nn.") else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="*", type=Path)
    parser.add_argument("--dir", type=Path, help="check every tree directly under this one")
    args = parser.parse_args()
    trees = list(args.trees)
    if args.dir is not None:
        trees += sorted(p for p in args.dir.iterdir() if p.is_dir())
    if not trees:
        parser.error("no tree to check: name trees, or --dir")
    failed = False
    for tree in trees:
        files = sorted(tree.rglob("*.py"))
        declared = declared_torch(project_root(tree))
        target = declared[0] if declared else None
        changed = 0
        problems: list[str] = []
        for path in files:
            try:
                data = path.read_bytes()
            except OSError:
                continue
            fixed, found = close(data, str(path.relative_to(tree)), target=target)
            changed += fixed is not None
            problems += found
        for problem in problems:
            print(problem)
        print(
            f"{tree.name}: {len(files)} files, {changed} changed by fixes, {len(problems)} problems"
        )
        failed = failed or bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
