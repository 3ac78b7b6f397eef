"""Which project files and top-level functions anything runs: code nothing reaches.

A file runs when it is an entry (a script: code at its top level or an ``if __name__ ==
"__main__":``; a test; a package ``__init__``; ``setup.py``) or when something that runs
imports it. A vendored module nothing imports (``x_transformer.py`` copied beside the model
code) never runs, and nor does a top-level function that nothing names: no other file
imports it, reaches it through its module (``mel.spectrogram(...)``) or writes it in a
string (a registry, ``__all__``, a config), and its own file writes it only where it is
defined. What such code would compute is no hazard of the program.

Unknown means running. A project that loads modules by names it computes
(``importlib.import_module(name)``, hydra's ``instantiate(cfg)``) loads those its strings,
configuration files and scripts write (``instantiate_from_config``'s ``target:``, a script's
``--module inference``): it is judged only when such files are present, and one that finds
the names by listing directories (a plugin folder) may load any file. A word any project file
writes (notebooks, configuration, docs) keeps what it names running. Each file's part comes
from its record (:func:`reach_of`, cheap regexes over the code :mod:`mpcheck.project.records`
already blanked), and :class:`Reached` joins them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType

from mpcheck.project.lines import line_matches, narrowed

__all__ = [
    "CONFIG_LOADERS",
    "NOT_SIDE",
    "SIDE_SUFFIXES",
    "ReachPass",
    "Reached",
    "reach_of",
    "side_words",
    "is_test",
]

# One file's part: (it is an entry, how it loads modules by name (:data:`STATIC`,
# :data:`CONFIG`, :data:`COMPUTED`), the dotted names it writes in code or strings that may
# be the project's (imports, ``mod.f`` through an imported module), those it writes in
# string literals, and its top-level functions it writes nowhere but at their definition).
ReachPass = tuple[bool, int, tuple[str, ...], tuple[str, ...], tuple[str, ...]]
STATIC, CONFIG, COMPUTED = 0, 1, 2
NONE: ReachPass = (True, STATIC, (), (), ())

# Files besides Python sources whose words may name a module or function (notebooks,
# configurations a loader reads, scripts and docs that run or import them).
SIDE_SUFFIXES = (".ipynb", ".yaml", ".yml", ".json", ".toml", ".cfg", ".ini", ".sh", ".md", ".rst")
# mpcheck's own configuration files say how to check the code, never what runs it: they are no
# side file (a checkout holding only them still shows nothing of its docs or configurations)
NOT_SIDE = (".mpcheck.toml", "mpcheck.toml")
_CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".toml", ".sh")
_MAX_SIDE = 2 * 1024 * 1024  # bytes: larger side files (data) are not read

# A statement at the top level that runs something: ``if __name__``, a loop, a ``with``, or
# a call (``main()``, ``fire.Fire(run)``); definitions and assignments run nothing of note.
_ENTRY = re.compile(
    rb"(?:if[ \t]+__name__\b|(?:for|while|with|async[ \t]+with)\b|[A-Za-z_][\w.]*[ \t]*\()"
)
# (the same after a newline: led by it, the search is for the newline, where ``^`` under
# ``re.M`` is tried at every offset)
_ENTRY_LINE = re.compile(b"\n" + _ENTRY.pattern)
_DYNAMIC = re.compile(
    rb"\b(?:import_module|__import__)[ \t]*\([ \t]*(?:[rbuRBU]?(['\"])[\w.]*\1[ \t]*[,)])?"
)
# Loaders of a class or function by the full dotted name a configuration spells (hydra's
# ``instantiate(cfg)`` / ``_target_``, ``pydoc.locate``, Lightning's ``class_path``).
_BY_CONFIG = re.compile(rb"\b(?:instantiate|locate|get_class|get_method|LightningCLI)[ \t]*\(")
# A loader that finds the modules it loads by listing directories (a plugin folder, a lazy
# package's files) may load any of them; another loads names written somewhere (a string, a
# configuration's ``target:``, a script's ``--module inference``).
_LISTS = re.compile(rb"\b(?:listdir|scandir|iterdir|glob|walk|iter_modules|__path__)\b")
_DEF = re.compile(rb"^(?:async[ \t]+)?def[ \t]+(\w+)", re.M)
_DEF_WORD = re.compile(rb"def[ \t]+\w")  # (see :func:`line_matches`)
_STRING = re.compile(rb"""(['"])([A-Za-z_][\w.]{1,120})\1""")
_WORD = re.compile(rb"[A-Za-z_]\w*")
# Libraries whose attributes are never the project's (``torch.nn``, ``np.mean``).
_LIBRARIES = frozenset(
    """torch numpy math einops scipy random os re sys json logging functools itertools typing
    collections transformers diffusers accelerate safetensors PIL cv2 tqdm warnings inspect
    copy time pathlib dataclasses contextlib""".split()
)


def reach_of(
    data: bytes,
    code: bytes,
    imports: Mapping[str, str],
    plain: Iterable[str] = (),
    headers_read: list[re.Match[bytes]] | None = None,
) -> ReachPass:
    """The file's part (see :data:`ReachPass`): ``data`` its bytes, ``code`` the same with
    strings and comments blanked, ``imports`` what the names its imports bind stand for,
    ``plain`` the modules of its ``import a.b.c`` (which binds only ``a``), ``headers_read``
    its headers (:func:`~mpcheck.project.lines.headers`) when already read."""
    entry = _ENTRY.match(code) is not None or _ENTRY_LINE.search(code) is not None
    dynamic = STATIC
    if b"import_module" in data or b"__import__" in data:
        for match in _DYNAMIC.finditer(data):
            if match.group(1) is None:  # (a name it computes)
                after = _DEF_ANY.search(code, match.end())
                near = code[_function_start(code, match.start()) : after.start() if after else None]
                dynamic = COMPUTED if _LISTS.search(near) else CONFIG
                break
    if dynamic == STATIC and any(w in code for w in _CONFIG_LOADERS):
        dynamic = CONFIG if _BY_CONFIG.search(code) else STATIC
    refs = {*imports.values(), *plain}
    for head, target in imports.items():  # ``mel.spectrogram(...)`` of an imported module
        if target.partition(".")[0] in _LIBRARIES:
            continue
        key = f"{head}.".encode()
        at = code.find(key)
        while at >= 0:
            if at == 0 or code[at - 1 : at] not in _NAME_CHARS:
                found = _NAME.match(code, at + len(key))
                if found is not None:
                    refs.add(f"{target}.{found.group().decode()}")
            at = code.find(key, at + 1)
    strings = {m.group(2).decode() for m in _STRING.finditer(data)}
    unnamed = []  # (written once: at its ``def``; a longer name containing it keeps it named)
    defs = (
        line_matches(_DEF, _DEF_WORD, code)
        if headers_read is None
        else narrowed(_DEF, headers_read, code)
    )
    for match in defs:
        name = match.group(1)
        if not name.startswith(b"__") and data.count(name) == 1:
            if not _decorated(code, match.start()):
                unnamed.append(name.decode())
    return entry, dynamic, tuple(sorted(refs)), tuple(sorted(strings)), tuple(sorted(unnamed))


_NAME = re.compile(rb"[A-Za-z_]\w*")
_NAME_CHARS = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_."
_CONFIG_LOADERS = (b"instantiate", b"locate", b"get_class", b"get_method", b"LightningCLI")
# Functions (by leaf name) that build the class a configuration names by import path: the
# project's own ``instantiate_from_config`` / ``get_obj_from_str``, hydra's ``instantiate``,
# ``pydoc.locate``; what they return is one of the classes the configurations name.
CONFIG_LOADERS = frozenset(
    {"instantiate_from_config", "instantiate", "get_obj_from_str", "locate", "get_class"}
)


def _function_start(code: bytes, at: int) -> int:
    """Where the function around offset ``at`` begins (its ``def`` line), or the file."""
    found = [m.start() for m in _DEF_ANY.finditer(code, max(0, at - 4000), at)]
    return found[-1] if found else max(0, at - 4000)


_DEF_ANY = re.compile(rb"^[ \t]*(?:async[ \t]+)?def[ \t]", re.M)


def _decorated(code: bytes, at: int) -> bool:
    """Whether the top-level ``def`` at ``at`` has a decorator (registered: named)."""
    lines: list[bytes] = _TOP.findall(code, max(0, at - 2000), at)
    return bool(lines) and lines[-1].startswith((b"@", b")"))  # (the last statement before)


_TOP = re.compile(rb"^[^\s#].*", re.M)


class Reached:
    """The project's files and top-level functions that nothing runs (see the module
    docstring), joined from each file's part: ``parts`` maps a file's shown path to (its
    module, its :data:`ReachPass`, the modules it star-imports); ``side`` lists the other
    files whose words may name them (read once, only when something is a candidate);
    ``classes``: each module's classes (a string naming one may be a registry's)."""

    def __init__(
        self,
        parts: Mapping[str, tuple[str, ReachPass, tuple[str, ...]]],
        side: Iterable[Path] = (),
        classes: Mapping[str, Iterable[str]] = MappingProxyType({}),
    ) -> None:
        side = list(side)
        written: set[str] = set()  # words of string literals
        words: set[str] = set()  # and of names written in code
        for _, (_, (_, _, refs, strings, _), stars) in parts.items():
            for ref in strings:
                written.update(ref.split("."))
            for ref in (*refs, *stars):
                words.update(ref.split("."))
        starred = {s for _, (_, _, stars) in parts.items() for s in stars}
        # A project packaged for installation (``setup.py``, ``pyproject.toml``) exports its
        # packages' modules and public functions: its users may import and call any of them.
        packaged = any(p.rpartition("/")[2] == "setup.py" for p in parts) or any(
            p.name in ("pyproject.toml", "setup.cfg") for p in side
        )
        packages = {m for p, (m, _, _) in parts.items() if p.endswith("__init__.py")}
        exported = packaged and packages

        def public(module: str, name: str = "") -> bool:
            pieces = module.split(".")
            inside = any(".".join(pieces[:i]) in packages for i in range(1, len(pieces)))
            return bool(exported) and inside and not name.startswith("_")

        functions = {  # (a test file's functions are collected by name)
            f"{module}.{name}" if module else name
            for path, (module, (_, _, _, _, unnamed), _) in parts.items()
            if not is_test(path)
            for name in unnamed
            if name not in words
            and name not in written
            and not _starred(module, starred)
            and not public(module, name)
        }
        graph = _Imports(parts, side, classes)
        modules = graph.unreached(written, written) if graph.known else set()
        modules = {m for m in modules if not public(m)}
        candidates = {n.rpartition(".")[2] for n in (*functions, *modules)}
        named = side_words(side, candidates) if candidates else set()
        if any(m.rpartition(".")[2] in named for m in modules):  # (a configuration's module)
            modules = graph.unreached(written | named, written)
        self.dead_functions = frozenset(f for f in functions if f.rpartition(".")[2] not in named)
        self.dead_modules = frozenset(modules)

    def module_dead(self, module: str) -> bool:
        return module in self.dead_modules

    def function_dead(self, qualified: str) -> bool:
        """Whether nothing names the top-level function ``qualified``, or its file is dead."""
        module = qualified.rpartition(".")[0]
        return qualified in self.dead_functions or module in self.dead_modules

    @property
    def digest(self) -> str:
        return repr((sorted(self.dead_modules), sorted(self.dead_functions)))


class _Imports:
    """The project's import graph: which modules the entries import, transitively."""

    def __init__(
        self,
        parts: Mapping[str, tuple[str, ReachPass, tuple[str, ...]]],
        side: list[Path],
        classes: Mapping[str, Iterable[str]],
    ) -> None:
        self.classes = classes
        kinds = {dynamic for _, (_, dynamic, *_), _ in parts.values()}
        configs = any(p.suffix in _CONFIG_SUFFIXES for p in side)
        # a name found by listing directories may load any file; other names are written in
        # strings or in configuration files and scripts, which must be here to be read
        # and a checkout without its docs, configurations and scripts (sources copied alone)
        # does not show what names a file for the tools that run it by name (a README's
        # ``custom_pipeline="fresco_v2v"``, a launcher's grid): unknown
        documented = any(p.suffix != ".ipynb" for p in side)
        self.known = documented and COMPUTED not in kinds and (CONFIG not in kinds or configs)
        self.modules = {module for module, _, _ in parts.values()}
        by_suffix: dict[str, set[str]] = {}
        for module in self.modules:
            pieces = module.split(".")
            for i in range(len(pieces)):
                by_suffix.setdefault(".".join(pieces[i:]), set()).add(module)
        self.roots: set[str] = set()
        self.edges: dict[str, set[str]] = {}
        for path, (module, (entry, _, refs, _, _), stars) in parts.items():
            targets = self.edges.setdefault(module, set())
            for ref in (*refs, *stars):
                pieces = ref.split(".")
                for i in range(1, len(pieces) + 1):
                    targets.update(by_suffix.get(".".join(pieces[:i]), ()))
            if entry or _root(path):
                self.roots.add(module)

    def unreached(self, named: set[str], registered: set[str]) -> set[str]:
        """The modules no entry imports, transitively, whose name is not in ``named`` (the
        words of strings and configuration files: what a loader may load) and none of whose
        classes is in ``registered`` (the words of the project's strings: a registry's)."""
        todo = [
            *self.roots,
            *(
                m
                for m in self.modules
                if m.rpartition(".")[2] in named
                or not registered.isdisjoint(self.classes.get(m, ()))
            ),
        ]
        live: set[str] = set()
        while todo:
            module = todo.pop()
            if module not in live:
                live.add(module)
                todo.extend(self.edges.get(module, ()))
        return self.modules - live


def _root(path: str) -> bool:
    """A file that runs by itself: a package ``__init__``, a test, ``setup.py``."""
    name = path.replace("\\", "/").rpartition("/")[2]
    return name in ("__init__.py", "__main__.py", "setup.py") or is_test(path)


def is_test(path: str) -> bool:
    """A test file (pytest collects it and its functions by name)."""
    parts = path.replace("\\", "/").split("/")
    name = parts[-1]
    return (
        name == "conftest.py"
        or name.startswith("test_")
        or name.endswith("_test.py")
        or any(p in ("test", "tests", "testing") for p in parts[:-1])
    )


def _starred(module: str, starred: set[str]) -> bool:
    return any(module == s or module.endswith(f".{s}") for s in starred)


def side_words(side: list[Path], candidates: set[str]) -> set[str]:
    """The candidates any side file writes."""
    pattern = re.compile(
        rb"(?<!\w)(" + b"|".join(re.escape(c.encode()) for c in sorted(candidates)) + rb")(?!\w)"
    )
    found: set[str] = set()
    for path in side:
        try:
            if path.stat().st_size > _MAX_SIDE:
                continue
            data = path.read_bytes()
        except OSError:
            continue
        found.update(m.group(1).decode() for m in pattern.finditer(data))
        if found >= candidates:
            break
    return found
