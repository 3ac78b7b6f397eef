"""The closed world: the classes a project's half paths reach, when it shows all of them.

Weights change dtype only where code casts, loads or hands the model to something that does.
An application or an installable package that shows every such half path runs the classes
none of them reaches in float32 (issue 36), and a premise "raises if this module runs in
half" is no hazard there.

An installable package's users build some of its classes themselves (those its examples,
tests and documentation build, and those its own code never builds). They cast them as the
package shows: a class none of the package's own half paths reaches keeps float32 weights for
them too (an autocast of their own needs nothing of the package, and stays possible). A
package whose users run every module in half says so in one setting (``models-run-in-half``),
and a library base's contract (a ``ModelMixin``, a ``PreTrainedModel``) says so for its
subclasses; both outrank the closed world.

A half path whose class the records cannot name (a loose cast:
``instantiate_from_config(cfg.model).half()``, ``getattr(m, name)(8).half()``, ``net.half()``
of a ``net`` bound elsewhere) reaches only the classes that can flow to it (a call of a
variable holding a class, ``cls = A if c else B; cls(8).half()``, names its candidates: no
loose cast). A configuration
loader (``instantiate_from_config``, hydra's ``instantiate``, ``get_obj_from_str(...)(...)``,
``pydoc.locate``) builds the class a configuration names by import path (``target:``,
``_target_:``, ``class_path:``): its products are the project classes the project's
configuration files and string literals name so (as :mod:`mpcheck.project.reach` judges what
such loaders import). A class name the imports do not pin (``nn.Linear`` in a project with a
``Linear`` of its own) reaches at most the project classes of that name, and a cast of
``self`` in a method of a class (``self.to(torch.bfloat16)``) that class and those deriving
it (``self`` is one of them; a class defining its own ``to`` is no such case), and so does a
cast of what a classmethod builds of ``cls`` (``cls(...)``, ``skip_init(cls, ...)``). A
function's return annotation says what it returns (PEP 484): ``-> Net`` a ``Net`` (a factory of
it, :meth:`mpcheck.project.records._Reader._annotated`), ``-> Tensor`` no model. Anything else is
unknown and reaches every class, and so does a half default dtype: no closed world. A wrapper
whose setting may cast casts only the models handed to it, and the parts they build: the
classes its takes name are reached with it as their support (:mod:`mpcheck.project.models`),
and it opens the world only when a take hands it a model of unknown class (a parameter,
``*models``, a call's value the records cannot follow) or no take of its library is seen.

Whatever opens the world, or reaches a class in a closed one, is kept as an :class:`Opening`
(kind, words, place), once per project: a premise resting on it names it (issue 36), and the
sealed scorer counts findings by its kind.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from mpcheck.knowledge import wrappers as wrap
from mpcheck.project.reach import CONFIG_LOADERS, Reached
from mpcheck.project.summary import Place

__all__ = [
    "ALONE",
    "REACHED",
    "TAKEN",
    "UNSEEN",
    "USE",
    "WRAPPER",
    "Closed",
    "Configured",
    "LoosePath",
    "Opening",
    "closed_world",
    "live",
    "loaded",
    "opened_by",
]

# (the classes any half path reaches, the leaves of those it quotes in a message)
Closed = tuple[frozenset[str], tuple[str, ...]]
_DOTTED_CLASS = re.compile(r"\b((?:[A-Za-z_]\w*\.)+[A-Z]\w*)\b")
_CALLED_CLASS = re.compile(r"\b([A-Z][A-Za-z0-9_]*)\s*\(")
_CONFIG_SUFFIXES = (".yaml", ".yml", ".json", ".toml")
_MAX_DOC = 2 * 1024 * 1024  # bytes: larger documentation files are not read for builds
# A package's users cast its classes as the package shows them cast: a class none of its own
# half paths reaches (its code, examples, tests, documentation) keeps float32 weights for
# them too, unless the package says every module of it runs in half (the setting) or a
# library base's contract says so (both outrank this)
_USERS = "and nothing of the package (its code, examples, tests or documentation) runs it in half"


@dataclass(frozen=True, slots=True)
class LoosePath:
    """A half cast of a model whose class the file cannot name; ``source``: the function
    whose product it casts (``pkg.instantiate_from_config``), "" when not a call's value;
    ``classes``: the project classes it may reach when its name says (a class name the
    imports do not pin reaches those of that name), None when unknown."""

    place: Place
    source: str = ""
    classes: frozenset[str] | None = None


# The kinds of :class:`Opening`: what may make a class half where no half path names it
ALONE = "alone"  # one file checked by itself: its project is not here (nothing to say)
UNBUILT = "no application"  # the project builds no model: its users build its classes
DEFAULTS = "default dtype"  # a file changes the default dtype: every class may be built so
WRAPPER = "wrapper"  # a wrapper whose setting may cast the models handed to it
LOOSE = "unknown class"  # a cast of a model whose class the records cannot name
CONFIGS = "absent configurations"  # a configuration loader's cast, its configurations absent
REACHED = "reached"  # the closed world's half paths reach it (a named premise of their own)
USE = "a use that may cast"  # a use of the class hands it to code that may cast it
TAKEN = "taken"  # the class is handed to a wrapper whose setting may cast (a named half path)
# What may make a class half only through a half path the records cannot follow: the cast
# of a model whose class they cannot name, a wrapper whose setting they cannot read (or that
# is handed such a model), a configuration loader whose configurations are absent, a use
# that hands the model to code that may cast it. None of these is evidence that this class
# runs in half (issue 36): in an application a premise resting on one alone is reported only
# when the project asks for them (``open-world-premises``); an installable package's users
# cast its models as it shows them cast, and its own cast of a model of unknown class shows
# them casting some model of it.
UNSEEN = frozenset({WRAPPER, LOOSE, CONFIGS, USE})


@dataclass(frozen=True, slots=True)
class Opening:
    """Why a class may run in half though no cast names it (issue 36: every half belief
    carries its evidence): ``kind``, one of the kinds above; ``text``, the clause a premise
    adds ("a cast of a model of unknown class at train.py:88"; "" says nothing); ``place``,
    where (a related location), None when no one place says it."""

    kind: str
    text: str = ""
    place: Place | None = None


class Configured:
    """The project classes its configuration files name by import path (``in_files``), and
    with them those its string literals name so (``named``: what a configuration loader may
    build); the files are read once, when first asked."""

    def __init__(self, side: Sequence[Path], strings: Iterable[str], classes: Iterable[str]):
        self._args = (side, strings, list(classes))
        self._in_files: frozenset[str] | None = None
        self._named: frozenset[str] | None = None

    @property
    def in_files(self) -> frozenset[str]:
        if self._in_files is None:
            side, _, classes = self._args
            self._in_files = _matching(classes, _dotted_in(side))
        return self._in_files

    @property
    def named(self) -> frozenset[str]:
        if self._named is None:
            in_files = self.in_files
            _, strings, classes = self._args
            written = {s for s in strings if _DOTTED_CLASS.fullmatch(s)}
            self._named = in_files | _matching(classes, written)
        return self._named


def loaded(loose: Iterable[LoosePath], configured: Configured) -> frozenset[str]:
    """The project classes a configuration loader's half cast may build: a half path reaches
    them whatever else builds them in float32 (none without such a cast)."""
    if any(p.source.rpartition(".")[2] in CONFIG_LOADERS for p in loose):
        return configured.named
    return frozenset()


def live(loose: Iterable[LoosePath], modules: Mapping[str, str], ran: Reached) -> list[LoosePath]:
    """The loose casts in files and functions something runs (``modules``: path -> module;
    the place's text is the top-level function holding it, or "")."""
    out = []
    for path in loose:
        place = path.place
        if ran.module_dead(modules[place.path]):
            continue
        if place.text and ran.function_dead(place.text):
            continue
        out.append(path)
    return out


def closed_world(
    *,
    application: bool,
    package: bool,
    defaults: bool,
    deepspeed: bool,
    wrappers: Mapping[str, list[tuple[str, Place]]],
    takes: Mapping[str, Sequence[Place]],
    loose: Sequence[LoosePath],
    roots: Mapping[str, Opening],
    casts: Collection[str],
    reach: Collection[str],
    bodies: Mapping[str, set[str]],
    subclasses: Mapping[str, set[str]],
    classes: Mapping[str, str],
    sites: Mapping[str, list[tuple[Place, bool]]],
    shown: Collection[str],
    side: Sequence[Path],
    configured: Configured,
    where: Callable[[str, int], str],
) -> tuple[Closed | None, dict[str, str], dict[str, Opening], tuple[str, ...]]:
    """The closed world (None when some half path reaches every class); for an installable
    package, where only its own code builds each class no half path reaches; why each class
    may run in half with no cast naming it ("": every class, when the world is open: the
    first thing that opens it); and the kinds of all that open it, each once, first first
    (what would open it still without the first). ``roots``: the classes a half path names
    (casts, library bases, uses that may cast, classes computing their parts' dtype), each
    with why; ``classes``: project class -> its file; ``takes``: each library some take hands
    a model -> where one hands a model of unknown class."""
    opens = _openings(application, package, defaults, deepspeed, wrappers, takes, where)
    targets: dict[str, Opening] = {}
    for path in loose:
        at = where(path.place.path, path.place.line)
        if path.classes is not None:
            text = f"it may be what is cast at {at}"
            why = Opening(REACHED, text, _placed(path.place, text))
            targets.update(dict.fromkeys(path.classes, why))
            continue
        if path.source.rpartition(".")[2] not in CONFIG_LOADERS:
            # (a class picked by name in code, a value bound elsewhere)
            text = f"a model of unknown class is cast at {at}"
            opens.append(Opening(LOOSE, text, _placed(path.place, text)))
            break
        if not configured.named:  # (its configurations are not here: they may name any class)
            text = "what a configuration loader builds from configurations that are not here "
            text += f"is cast at {at}"
            opens.append(Opening(CONFIGS, text, _placed(path.place, text)))
            break
        why = Opening(REACHED, f"a configuration loader may build it, cast at {at}")
        targets.update(dict.fromkeys(configured.named, why))
    if opens:
        return None, {}, {"": opens[0]}, tuple(dict.fromkeys(o.kind for o in opens))
    found = {**roots, **targets}
    opened = _half_reached(found, bodies, subclasses)
    half = set(opened)
    quoted = sorted({c.rpartition(".")[2] for c in (*(c for c in casts if c in reach), *targets)})
    inside: dict[str, str] = {}
    if package:  # (its users build some classes themselves: see :func:`_users_build`)
        in_files = configured.in_files
        users = _users_build(classes, bodies, sites, shown, _documented(side), in_files)
        inside = _inside(set(classes) - half, bodies, sites, where, in_files, users)
    return (frozenset(half), tuple(quoted)), inside, opened, ()


def opened_by(opened: Mapping[str, Opening], name: str) -> Opening | None:
    """Why the class ``name`` may run in half with no cast naming it: the world's opening,
    else what reaches it in the closed world (None: nothing does)."""
    return opened.get("") or opened.get(name)


def _placed(place: Place, text: str) -> Place:
    """``place`` saying ``text`` (a related location's words)."""
    return Place(place.path, place.line, place.column, text)


def _openings(
    application: bool,
    package: bool,
    defaults: bool,
    deepspeed: bool,
    wrappers: Mapping[str, list[tuple[str, Place]]],
    takes: Mapping[str, Sequence[Place]],
    where: Callable[[str, int], str],
) -> list[Opening]:
    """What opens the world whatever its casts name, strongest first."""
    out = []
    if not (application or package):
        out.append(Opening(UNBUILT, "the project builds no model itself: its users build them"))
    if defaults:
        out.append(Opening(DEFAULTS, "a file of the project changes the default dtype"))
    found = _may_cast(wrappers, takes, deepspeed)
    if found is not None:
        place, taken = found
        text = f"the models handed to a wrapper may be cast by {place.text}"
        if taken is not None:
            at = where(taken.path, taken.line)
            text += f", and it is handed a model of unknown class at {at}"
        out.append(Opening(WRAPPER, text, _placed(place, text)))
    return out


def _may_cast(
    wrappers: Mapping[str, list[tuple[str, Place]]],
    takes: Mapping[str, Sequence[Place]],
    deepspeed: bool = False,
) -> tuple[Place, Place | None] | None:
    """A wrapper of the project that may cast the models handed to it (its setting casts,
    or is unknown here; accelerate in a project that names DeepSpeed hands what it prepares
    to DeepSpeed, which casts it) and is handed a model of unknown class (where; None: no
    take of its library is seen at all, so what it is handed is unknown). A wrapper casts
    only the models handed to it, and the parts they build: when every take names its
    models' classes, those classes are reached (:mod:`mpcheck.project.models`) and the
    world stays closed. None: no such wrapper."""
    first = ["accelerate"] if deepspeed and wrappers.get("accelerate") else []
    for lib in dict.fromkeys((*first, *wrappers)):
        casting = [
            place
            for e, place in wrappers[lib]
            if e.removesuffix(wrap.BUFFERS) in (wrap.CAST, wrap.UNKNOWN)
        ]
        if lib in first:
            casting = [wrappers[lib][0][1]]
        if not casting:
            continue
        if lib not in takes:
            return casting[0], None
        if takes[lib]:
            return casting[0], takes[lib][0]
    return None


def _half_reached(
    roots: Mapping[str, Opening],
    bodies: Mapping[str, set[str]],
    subclasses: Mapping[str, set[str]],
) -> dict[str, Opening]:
    """``roots`` (the classes a half path reaches), the parts their bodies build and the
    project bases whose code runs in them (and those bases' parts), transitively, each with
    why (a root's own, naming the root for what it reaches)."""
    bases: dict[str, set[str]] = {}
    for parent, derived in subclasses.items():
        for child in derived:
            bases.setdefault(child, set()).add(parent)
    out = dict(roots)
    todo = [(name, name) for name in sorted(roots)]
    while todo:
        name, root = todo.pop()
        for other in sorted({*bodies.get(name, ()), *bases.get(name, ())}):
            if other not in out:
                why = out[root]
                leaf = root.rpartition(".")[2]
                text = f"it runs in `{leaf}`; {why.text}" if why.text else ""
                out[other] = Opening(why.kind, text, why.place)
                todo.append((other, root))
    return out


def _users_build(
    classes: Iterable[str],
    bodies: Mapping[str, set[str]],
    sites: Mapping[str, list[tuple[Place, bool]]],
    shown: Collection[str],
    documented: Collection[str],
    configured: Collection[str] = (),
) -> set[str]:
    """The classes an installable package's users may build themselves: those its
    examples, tests or benchmarks or its documentation (``Block(`` in a ``.md``/``.rst``
    file) build, and those its own code never builds (no class body, no function or script
    of it, no configuration of it naming the class for its loader: only a user can; a
    module's ``__main__`` smoke test is no build). The rest the package builds itself, and a
    user reaches them only through what builds them (or what its factories return)."""
    known = set(classes)
    parts = {p for built in bodies.values() for p in built}
    built = {*parts, *sites, *configured}
    out = {n for n in known if n not in built}
    out.update(n for n in shown if n in known)
    out.update(n for n in known if n.rpartition(".")[2] in documented)
    return out


def _dotted_in(side: Iterable[Path]) -> set[str]:
    """The dotted class paths the project's configuration files write
    (``target: ldm.models.autoencoder.AutoencoderKL``)."""
    names: set[str] = set()
    for path in side:
        if path.suffix not in _CONFIG_SUFFIXES:
            continue
        try:
            if path.stat().st_size > _MAX_DOC:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        names.update(_DOTTED_CLASS.findall(text))
    return names


def _matching(classes: Iterable[str], names: Collection[str]) -> frozenset[str]:
    """The classes of ``classes`` one of ``names`` spells by import path (``src.pkg.m.Class``
    is written ``pkg.m.Class``)."""
    out = set()
    for name in classes:
        pieces = name.split(".")
        if any(".".join(pieces[i:]) in names for i in range(len(pieces) - 1)):
            out.add(name)
    return frozenset(out)


def _documented(side: Iterable[Path]) -> set[str]:
    """The CapWords names a ``.md``/``.rst`` file of the project calls (``Block(dim=64)``):
    the classes its documentation shows users building."""
    out: set[str] = set()
    for path in side:
        if path.suffix not in (".md", ".rst"):
            continue
        try:
            if path.stat().st_size > _MAX_DOC:
                continue
            out.update(_CALLED_CLASS.findall(path.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    return out


def _inside(
    classes: Iterable[str],
    bodies: Mapping[str, set[str]],
    sites: Mapping[str, list[tuple[Place, bool]]],
    where: Callable[[str, int], str],
    configured: Collection[str] = (),
    users: Collection[str] = (),
) -> dict[str, str]:
    """For each class of an installable package that no half path reaches, who builds it:
    its users ("`Block` is built by the package's users, ...": ``users``), or only the
    package's own code ("`Block` is built only by the package's own code (inside `Model`,
    built at run.py:12)": the first owner up the chain of class bodies, and that owner's
    first build outside a class body, or its configuration)."""
    builders: dict[str, list[str]] = {}
    for owner, parts in sorted(bodies.items()):
        for part in parts:
            builders.setdefault(part, []).append(owner)
    out: dict[str, str] = {}
    for name in sorted(classes):
        leaf = name.rpartition(".")[2]
        if name in users:
            out[name] = f"`{leaf}` is built by the package's users, {_USERS}"
            continue
        chain, seen = [name], {name}
        while chain[-1] not in sites and builders.get(chain[-1]):
            nxt = next((b for b in builders[chain[-1]] if b not in seen), None)
            if nxt is None:
                break
            chain.append(nxt)
            seen.add(nxt)
        found = sites.get(chain[-1])
        top = chain[-1].rpartition(".")[2]
        if not found and chain[-1] in configured:
            at = "named by its configuration"
            at = f"inside `{top}`, {at}" if len(chain) > 1 else at
        elif not found:
            continue
        else:
            place = found[0][0]
            at = where(place.path, place.line)
            at = f"inside `{top}`, built at {at}" if len(chain) > 1 else f"at {at}"
        out[name] = f"`{leaf}` is built only by the package's own code ({at})"
    return out
