"""Where the project's models are made half: the casts and library bases that reach a class.

A module's ``forward`` runs in half only when something makes it so: a script's
``model.half()`` (or ``.to(torch.bfloat16)``, ``torch_dtype=torch.float16``, a ``dtype=`` at
construction, a ``weight_dtype`` variable), or a library contract (diffusers ``ModelMixin``,
transformers ``PreTrainedModel``, timm and peft models are run in half by their users). That
evidence is usually in another file than the class it reaches (the script casts ``Model``,
``Model`` builds ``Block`` in a third file), and runs against the import direction the
summaries follow, so it is joined here from every file's :class:`ModelRecord`
(:mod:`mpcheck.project.records`), cached by content.

A mixed-precision wrapper the model is handed to (``accelerator.prepare(model)``,
``trainer.fit(model)``, ``Trainer(model=model)``, ``deepspeed.initialize(model=model)``) takes
the effect of that library's wrappers in the project (:mod:`mpcheck.knowledge.wrappers`): one
that casts (Lightning's ``"bf16-true"``, a DeepSpeed config enabling bf16) is a cast; one that
autocasts keeps the model float32-built and runs its forward under autocast (accelerate's
native mixed precision, ``"16-mixed"``, ``TrainingArguments(fp16=True)``); one whose setting
is unknown here might cast it (the value escapes). accelerate in a project whose accelerate
code names DeepSpeed may run under it, which casts: unknown.

Classes are identified by qualified name (module path and class), resolved through each
file's imports, re-exports and star imports: a cast of ``pkg.a.Model`` reaches
``pkg.a.Model`` only, not a same-named class of another module.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Callable, Collection, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from mpcheck.files.hashing import hex_digest
from mpcheck.knowledge import wrappers as wrap
from mpcheck.knowledge.torch_api import CONTAINER_LAYERS
from mpcheck.project.callables import Callables
from mpcheck.project.callers import ModuleCode
from mpcheck.project.closed import (
    ALONE,
    LOOSE,
    REACHED,
    TAKEN,
    USE,
    Configured,
    LoosePath,
    Opening,
    closed_world,
    live,
    loaded,
    opened_by,
)
from mpcheck.project.construction import Construction
from mpcheck.project.deepspeed_configs import ShippedDeepSpeed
from mpcheck.project.flags import Unset
from mpcheck.project.held_parts import PART, HeldParts
from mpcheck.project.names import lineage_of
from mpcheck.project.part_methods import PartCalls
from mpcheck.project.reach import NOT_SIDE, SIDE_SUFFIXES, Reached
from mpcheck.project.records import (
    BUILT_IN_HALF,
    CALLED,
    HANDED,
    METHOD,
    OR,
    PASSED,
    ModelRecord,
    callee,
    may_write,
    module_of,
    record_of,
)
from mpcheck.project.returns import NEEDS, POSITION
from mpcheck.project.summary import Place
from mpcheck.project.uncalled import Uncalled

__all__ = [
    "ModelUses",
    "Reach",
    "forget_uses",
    "records_for",
    "uses_for",
    "uses_of_records",
    "uses_of_sources",
]

# Library base classes whose users run them (and every part they build) in half.
# the bases a library's by-name loader builds (an Auto class, a pipeline's components)
LOADABLE_SUFFIXES = ("ModelMixin", "PreTrainedModel", "PretrainedModel")
LIBRARY_SUFFIXES = ("ModelMixin", "PreTrainedModel", "PretrainedModel", "PeftModel", "TunerLayer")
_LIBRARY_ROOTS = ("timm.", "peft.")
CAST, LIBRARY, AUTOCAST, FLOAT32 = "cast", "library", "autocast", "float32"
# An application whose code never mentions half precision runs in float32 (the premise that
# a module may run in half needs someone to make it half: a cast, a half load, autocast or a
# trainer's setting; an installable package's users may do so where it does not show).
HALF_FREE = (
    "no file of the project names a half dtype, a cast to one, autocast or a mixed-precision "
    "setting: it runs in float32"
)
_SKIP_DIRS = frozenset({".git", ".venv", "venv", "node_modules", "build", "dist", "__pycache__"})


@dataclass(frozen=True, slots=True)
class Reach:
    """Why a class may run in half: ``kind`` is ``cast`` or ``library``; ``place`` is the
    cast or the library class's definition; ``via`` the chain of classes that build it."""

    kind: str
    place: Place
    via: tuple[str, ...] = ()


class ModelUses:
    """The project's half evidence, by qualified class name (see the module docstring)."""

    def __init__(
        self,
        reach: Mapping[str, Reach],
        module: str = "",
        mentions: _Mentions | None = None,
        construction: Construction | None = None,
        module_code: ModuleCode | None = None,
        ran: Reached | None = None,
        callables: Callables | None = None,
        autocasts: bool = True,
        dtype_loads: frozenset[str] | None = None,
        application: bool = False,
        cast_to: Mapping[str, Mapping[str, Reach]] = MappingProxyType({}),
        float16: frozenset[str] = frozenset(),
        input_cast: str | None = None,
        not_float16: frozenset[str] | None = None,
        buffers_kept: Mapping[str, Reach] = MappingProxyType({}),
        closed: tuple[frozenset[str], tuple[str, ...]] | None = None,
        half_free: bool = False,
        read: frozenset[str] = frozenset(),
        under_autocast: Mapping[str, Reach] = MappingProxyType({}),
        inside: Mapping[str, str] = MappingProxyType({}),
        opened: Mapping[str, Opening] = MappingProxyType({}),
        opens: tuple[str, ...] = (),
        open_bfloat16: bool = False,
        autocast_shown: bool = True,
        uncalled: Uncalled | None = None,
        part_calls: PartCalls | None = None,
        unset: Unset | None = None,
        on_cpu: frozenset[str] = frozenset(),
        names: _Names | None = None,
    ) -> None:
        self._reach = dict(reach)
        # the project's classes and the names its imports bind to them (:meth:`class_of`)
        self._names = names
        # the classes some autocast region written for the CPU runs (or their parts): the
        # CPU's lists apply to them there (:meth:`autocast_on_cpu`)
        self._on_cpu = on_cpu
        # the part methods whose every call is in their own file (None: not known)
        self._part_calls = part_calls
        self._uncalled = uncalled  # the methods nothing calls (None: a library, unknown)
        self._unset = unset  # the constructor flags nothing sets (None: a library, unknown)
        # why a class may run in half with no cast naming it ("": the world's opening, for
        # every class): :func:`mpcheck.project.closed.closed_world`
        self._opened = opened
        # the kinds of all that open the world, first first (what a measurement counts)
        self.world_kinds = opens
        # the world is open only by casts of models of unknown class that write bfloat16
        self._open_bfloat16 = open_bfloat16
        # the project's own code opens an autocast region that may lower to float16 (not
        # written to lower to bfloat16), or brings a trainer that may (:meth:`bfloat16_only`)
        self._autocast_shown = autocast_shown
        # class -> the autocast region around every run of the cast models that reach it,
        # in every file (no cast model that reaches it runs outside one): its weights are
        # half, and autocast recasts the operands of the ops on its lists
        self._under_autocast = under_autocast
        # an installable package's classes its users neither build nor receive, closed like
        # an application's: class -> where only its own code builds it (:func:`_inside`)
        self._inside = inside
        # an application whose every half path (cast, half load, wrapper that casts) names
        # the classes it reaches: (the classes some path may reach, premise where it is not
        # known to cast: handed to library code; the classes its casts reach, to quote).
        # None: some path's target is unknown (or a library): any class may run in half
        self._closed = closed
        # an application no file of which names a half dtype, a cast to one, autocast, a
        # trainer that may autocast or a mixed-precision setting: nothing of it runs in half
        self.half_free = half_free
        # the modules whose half paths the records read (``.py`` files of the walk): a file
        # they did not read (a ``.pyi`` stub, a file checked from outside) may hold its own
        self._read = read
        # class -> the FSDP wrapper casting its parameters only: its buffers stay as built
        self._buffers_kept = buffers_kept
        # an application (no package its users install) that shows where it builds its
        # models: a library base's contract ("its users run it in half") is about the
        # library's users, and here the project's own builds are the users
        self.application = application
        # half dtype -> class -> a cast that writes that dtype down and reaches the class
        self._cast_to = cast_to
        # the classes some cast, wrapper or use that may cast reaches without writing
        # bfloat16 down: float16 may reach them (:meth:`bfloat16_only`)
        self._float16 = float16
        # the classes some cast, wrapper or use that may cast reaches without writing float16
        # down (bfloat16, ``.to(weight_dtype)``): bfloat16 may reach them (:meth:`float16_only`);
        # None: not known (every class may be)
        self._not_float16 = not_float16
        # an FSDP policy of the project that casts its models' floating forward inputs to a
        # half (or unknown) ``param_dtype``, quoted with its place; None: none does
        self.input_cast = input_cast
        # whether anything may run the project's code under autocast: a file opens an
        # enabled region or brings a trainer that may (:func:`~mpcheck.project.records.
        # may_autocast`), or the project is a package its users run as they like
        self.autocasts = autocasts
        # the classes some load builds under a half default dtype (None: unknown, any may be)
        self._dtype_loads = dtype_loads
        self._ran = ran  # the files and functions nothing runs (None: a library, unknown)
        self.module = module  # the module :meth:`of` names classes in
        self._mentions = mentions
        self.construction = construction  # which functions only construction runs
        self.module_code = module_code  # which functions a module's code calls
        self.callables = callables  # handed lambdas, split input embeddings

    def at(self, module: str) -> ModelUses:
        """The same evidence, asked about the classes of ``module``."""
        return ModelUses(
            self._reach,
            module,
            self._mentions,
            self.construction,
            self.module_code,
            self._ran,
            self.callables,
            self.autocasts,
            self._dtype_loads,
            self.application,
            self._cast_to,
            self._float16,
            self.input_cast,
            self._not_float16,
            self._buffers_kept,
            self._closed,
            self.half_free,
            self._read,
            self._under_autocast,
            self._inside,
            self._opened,
            self.world_kinds,
            self._open_bfloat16,
            self._autocast_shown,
            self._uncalled,
            self._part_calls,
            self._unset,
            self._on_cpu,
            self._names,
        )

    def class_of(self, name: str) -> str | None:
        """The qualified project class that ``name`` (``Decoder``, ``vae.Decoder``) stands
        for in :attr:`module`, through its imports and the project's re-exports; None: no
        class of the project, or more than one may be meant."""
        if self._names is None or not self.module:
            return None
        head, dot, rest = name.partition(".")
        found = self._names.resolve(f"{self.module}.{name}")
        if found is None and dot:  # ``vae.Decoder`` after ``from models import vae``
            module = self._names.follow(f"{self.module}.{head}")
            found = None if module is None else self._names.resolve(f"{module}.{rest}")
        if found is None and dot:  # ``models.vae.Decoder`` after ``import models.vae``
            found = self._names.resolve(name)
        return found

    def float32_text(self, name: str) -> str | None:
        """Why the class ``name`` of :attr:`module` runs in float32 when nothing else says
        so: no half path of the project reaches it (and every one names what it reaches), or
        the project never mentions half precision. None: it may run in half (the premise),
        as in a file whose half paths the records did not read."""
        if self.module is not None and self.module not in self._read:
            return None
        if self.half_free:
            return HALF_FREE
        if self._closed is None:
            return None
        reached, cast = self._closed
        qualified = f"{self.module}.{name}" if self.module else name
        if qualified in reached:
            return None
        text = f"no half cast, load or wrapper of the project reaches `{name}`"
        inside = self._inside.get(qualified)
        if inside is not None:  # (an installable package: who builds it)
            text = f"{inside}, where {text}"
        if not cast:
            return text
        shown = ", ".join(f"`{c}`" for c in cast[:2]) + (", ..." if len(cast) > 2 else "")
        return f"{text} (its half paths reach {shown})"

    def opening(self, name: str) -> Opening | None:
        """Why the class ``name`` of :attr:`module` may run in half though no cast names it
        (None: nothing here says; an :class:`Opening` whose text is "" says nothing). For a
        function defined outside a class: why a module class whose code runs it may."""
        qualified = f"{self.module}.{name}" if self.module else name
        found = opened_by(self._opened, qualified)
        if found is not None or self.module_code is None:
            return found
        for owner in sorted(self.module_code.owners.get(qualified, ())):
            why = opened_by(self._opened, owner)
            if why is not None and why.text:
                text = f"it runs in `{owner.rpartition('.')[2]}`; {why.text}"
                return Opening(why.kind, text, why.place)
        return None

    def function_float32_text(self, name: str) -> str | None:
        """Why the function ``name`` of :attr:`module` (defined outside a class) runs in
        float32: its values are those of the module classes whose code runs it (scripts and
        datasets hand it data), and no half path of the project reaches any of them -- or,
        in a package that casts no model to half, nothing of the package runs it (its users
        run it as the package shows). None: it may run in half (the premise)."""
        if self.module is not None and self.module not in self._read:
            return None
        if self._closed is None or self.module_code is None:
            return None
        qualified = f"{self.module}.{name}" if self.module else name
        owners = self.module_code.runs_with(qualified)
        if owners is None:
            return None
        reached, _ = self._closed
        if any(owner in reached for owner in owners):
            return None
        if owners:
            shown = sorted(f"`{o.rpartition('.')[2]}`" for o in owners)
            where = ", ".join(shown[:2]) + (", ..." if len(shown) > 2 else "")
            return f"`{name}` runs in {where}, which no half cast, load or wrapper reaches"
        if qualified in self.module_code.outside:
            # (a script's code: its inputs are data, but what it casts to a dtype it does not
            # spell is cast to the run's working dtype, half on a half run)
            return None
        if self.application or any(self.module_code.module_class(c) for c in reached):
            # (run by a name a string writes; or a package's users hand it what they like,
            # such as the outputs of the models it shows cast to half)
            return None
        return f"nothing of the package calls `{name}`, and it casts no model to half"

    @property
    def world_opening(self) -> Opening | None:
        """What opens the project's world whatever its casts name (None: it is closed)."""
        return self._opened.get("")

    def runs_in_modules(self, name: str) -> bool:
        """Whether the project calls the function ``name`` of :attr:`module` (defined outside
        a class) from a module's code (:mod:`mpcheck.project.callers`)."""
        if self.module_code is None:
            return False
        return (f"{self.module}.{name}" if self.module else name) in self.module_code.called

    def runs_outside_modules(self, name: str) -> bool:
        """Whether the project calls the function ``name`` of :attr:`module` (defined outside
        a class), and only from code that is no module's: scripts, datasets, plain classes."""
        if self.module_code is None:
            return False
        return (f"{self.module}.{name}" if self.module else name) in self.module_code.outside

    def full_inputs(self, name: str, params: tuple[str, ...]) -> dict[str, str]:
        """The parameters of the function ``name`` of :attr:`module` (defined outside a
        class) that every call of the project hands no half value, with what they are
        handed (:meth:`~mpcheck.project.callers.ModuleCode.full_inputs`)."""
        if self.module_code is None:
            return {}
        qualified = f"{self.module}.{name}" if self.module else name
        return self.module_code.full_inputs(qualified, params)

    def half_call(self, name: str, params: tuple[str, ...], param: str) -> Place | None:
        """Where the function ``name`` of :attr:`module` (defined outside a class) is handed,
        as its parameter ``param``, a value that may be half while its other calls hand it
        none (:meth:`~mpcheck.project.callers.ModuleCode.half_call`): that call is the
        evidence a finding on the parameter rests on."""
        if self.module_code is None:
            return None
        qualified = f"{self.module}.{name}" if self.module else name
        found = self.module_code.half_call(qualified, params, param)
        if found is None:
            return None
        path, line, column, cast = found
        what = "a value cast to half" if cast else "a value that may be half"
        text = f"`{name}` is handed {what} as `{param}` here; its other calls hand no half value"
        return Place(path, line, column, text)

    def reached(self, name: str) -> bool:
        """Whether anything in the project may build the class ``name`` of :attr:`module`:
        a class that nothing builds, subclasses, imports, exports or names (in code or in a
        string: a registry, ``getattr``), and that no decorator registers, is never run --
        in a project that builds some of its models outside class bodies (else every class
        counts as reached: a library's users build them)."""
        if self._ran is not None and self._ran.module_dead(self.module):
            return False  # (in a file nothing imports: :mod:`mpcheck.project.reach`)
        if self._mentions is None:
            return True
        return self._mentions.reached(f"{self.module}.{name}" if self.module else name)

    def function_reached(self, name: str) -> bool:
        """Whether anything may run the top-level function ``name`` of :attr:`module`: one
        nothing names, or in a file nothing imports, never runs (:mod:`mpcheck.project.reach`)."""
        qualified = f"{self.module}.{name}" if self.module else name
        return self._ran is None or not self._ran.function_dead(qualified)

    def method_reached(self, owner: str, name: str) -> bool:
        """Whether anything may call the method ``name`` of the class ``owner`` of
        :attr:`module` (:mod:`mpcheck.project.uncalled`)."""
        if self._uncalled is None:
            return True
        qualified = f"{self.module}.{owner}.{name}" if self.module else f"{owner}.{name}"
        return self._uncalled.called(qualified)

    def called_in_file(self, name: str) -> bool:
        """Whether every call of the part method ``name`` of :attr:`module` is in its own
        file (:mod:`mpcheck.project.part_methods`); True where the project is not known."""
        return self._part_calls is None or self._part_calls.called_in_file(self.module, name)

    def flag_set(self, owner: str, name: str) -> bool:
        """Whether anything may set the constructor flag ``name`` of the class ``owner`` of
        :attr:`module` to a true value (:mod:`mpcheck.project.flags`)."""
        if self._unset is None:
            return True
        return not self._unset.never_set(f"{self.module}.{owner}" if self.module else owner, name)

    def loaded_under_dtype(self, name: str) -> bool:
        """Whether some load may build the class ``name`` of :attr:`module` under a half
        default dtype: ``from_pretrained(torch_dtype=torch.float16)`` builds it in that
        dtype and casts nothing after, so a non-persistent buffer (not in the checkpoint)
        keeps the dtype it was built with. A model built otherwise and cast (``.half()``,
        ``.to(dtype)``) has every floating buffer cast. Unknown (a library, whose users load
        it; a file alone; a project that changes the default dtype or has a pipeline load
        its parts by name) means it may be."""
        if self._dtype_loads is None:
            return True
        return (f"{self.module}.{name}" if self.module else name) in self._dtype_loads

    def buffers_kept(self, name: str) -> str | None:
        """The FSDP wrapper (quoted, with its place) whose policy is the only cast reaching
        the class ``name`` of :attr:`module` and casts parameters only (FSDP2 never casts a
        buffer, FSDP1 only to a ``buffer_dtype``): its buffers keep the dtype they were
        built with. None: none, or another cast reaches it too."""
        found = self._buffers_kept.get(f"{self.module}.{name}" if self.module else name)
        return None if found is None else found.place.text

    def of(self, name: str) -> Reach | None:
        """The evidence of the class ``name`` defined in :attr:`module`."""
        return self._reach.get(f"{self.module}.{name}" if self.module else name)

    def under_autocast(self, name: str) -> str | None:
        """The autocast region (quoted, with its place) around every run of the cast models
        that reach the class ``name`` of :attr:`module`, or None: one runs outside any."""
        found = self._under_autocast.get(f"{self.module}.{name}" if self.module else name)
        return None if found is None else found.place.text

    def autocast_on_cpu(self, name: str) -> bool:
        """Whether a region written for the CPU runs the class ``name`` of :attr:`module`
        (or a model that builds it): the CPU's autocast lists apply to it there, not only
        CUDA's (a region whose device the code does not write is taken for CUDA's)."""
        return (f"{self.module}.{name}" if self.module else name) in self._on_cpu

    def cast_to(self, name: str, dtype: str) -> Reach | None:
        """A cast of the project that writes ``dtype`` down (``.half()``,
        ``.to(torch.bfloat16)``) and reaches the class ``name`` of :attr:`module` (its own
        model or one that builds it), or None: on that path its weights are ``dtype``."""
        found = self._cast_to.get(dtype, {})
        return found.get(f"{self.module}.{name}" if self.module else name)

    def bfloat16_only(self, name: str) -> Reach | None:
        """A cast writing bfloat16 down that reaches the class ``name`` of :attr:`module`,
        when it is the only half the project gives it (None otherwise): every cast, load
        and wrapper reaching it writes bfloat16 (``.to(torch.bfloat16)``,
        ``torch_dtype=torch.bfloat16``), nothing that may cast a model of unknown dtype
        does, and every half path of the project names the classes it reaches or writes
        bfloat16 down (a cast of a model of unknown class, ``.to(torch.bfloat16)``), and
        the project opens no autocast region that may lower to float16 (each is written
        to lower to bfloat16: ``dtype=torch.bfloat16``, the CPU's default). Its weights
        and activations are then bfloat16, whose range is float32's: float16's 65504 does
        not bound them."""
        qualified = f"{self.module}.{name}" if self.module else name
        if (self._closed is None and not self._open_bfloat16) or qualified in self._float16:
            return None
        if self._autocast_shown:  # (a region that may lower to float16, CUDA's default)
            return None
        return self._cast_to.get("bfloat16", {}).get(qualified)

    def float16_only(self, name: str) -> Reach | None:
        """A cast writing float16 down that reaches the class ``name`` of :attr:`module`, when
        it is the only half the project gives its weights (None otherwise): every cast, load
        and wrapper reaching it writes float16 (``.half()``, ``torch_dtype=torch.float16``),
        nothing that may cast a model of unknown dtype does, and every half path of the
        project names the classes it reaches. Its ``self.dtype`` is then float16 wherever it
        is half (autocast lowers activations, never the weights ``dtype`` reads)."""
        qualified = f"{self.module}.{name}" if self.module else name
        if self._closed is None or self._not_float16 is None or qualified in self._not_float16:
            return None
        return self._cast_to.get("float16", {}).get(qualified)

    def autocast_bfloat16(self, name: str, reach: Reach) -> bool:
        """Whether the class ``name`` of :attr:`module`, whose evidence is ``reach``, is
        half only as autocast lowers it, and only to bfloat16: it is run only under
        autocast (never cast), and every region of the project is written to lower to
        bfloat16 (``dtype=torch.bfloat16``, the CPU's default) and no trainer's may."""
        qualified = f"{self.module}.{name}" if self.module else name
        return (
            reach.kind == AUTOCAST and not self._autocast_shown and qualified not in self._float16
        )

    def premise_bfloat16(self, name: str) -> bool:
        """Whether the premise that the class or function ``name`` of :attr:`module` runs in
        half rests only on casts of models of unknown class that write bfloat16 down: what
        they reach, they make bfloat16, and no cast that may write float16 reaches it."""
        qualified = f"{self.module}.{name}" if self.module else name
        return self._open_bfloat16 and not self._autocast_shown and qualified not in self._float16

    def __len__(self) -> int:
        return len(self._reach)

    @property
    def digest(self) -> str:
        """Changes when any class's evidence does (a cache entry keyed on it is then stale)."""
        written = sorted((d, sorted(m.items())) for d, m in self._cast_to.items())
        loads = None if self._dtype_loads is None else sorted(self._dtype_loads)
        kept = sorted(self._buffers_kept)
        closed = None if self._closed is None else (sorted(self._closed[0]), self._closed[1])
        evidence = (
            self.autocasts,
            self.application,
            written,
            sorted(self._float16),
            None if self._not_float16 is None else sorted(self._not_float16),
            self._open_bfloat16,
            self._autocast_shown,
            self.input_cast,
            loads,
            kept,
            closed,
            self.half_free,
            sorted(self._read),
            sorted(self._under_autocast.items()),
            sorted(self._inside.items()),
            sorted(self._opened.items()),
            self.world_kinds,
            sorted(self._on_cpu),
        )
        text = repr((sorted(self._reach.items()), *evidence))
        if self._mentions is not None:
            text += self._mentions.digest
        if self.construction is not None:
            text += self.construction.digest
        if self.module_code is not None:
            text += self.module_code.digest
        if self._ran is not None:
            text += self._ran.digest
        if self._uncalled is not None:
            text += self._uncalled.digest
        if self._part_calls is not None:
            text += self._part_calls.digest
        if self._unset is not None:
            text += self._unset.digest
        if self.callables is not None:
            text += self.callables.digest
        return hex_digest(text.encode())


class _Mentions:
    """Which files may write each class's name (see :meth:`ModelUses.reached`)."""

    def __init__(
        self,
        records: Mapping[str, ModelRecord],
        bodies: Mapping[str, set[str]] = MappingProxyType({}),
        built: Collection[str] = (),
    ) -> None:
        self.words = [(path, record.words) for path, record in sorted(records.items())]
        self.classes = {c.name: (path, c.named) for path, r in records.items() for c in r.classes}
        self.built = frozenset(built)  # built outside class bodies (``main()``), or a base
        self.builders: dict[str, set[str]] = {}  # class -> the classes whose bodies build it
        for owner, parts in bodies.items():
            for part in parts:
                self.builders.setdefault(part, set()).add(owner)
        self._memo: dict[str, bool] = {}

    @property
    def digest(self) -> str:
        """Changes when a class's reachability does (not with every edit of a file's words:
        the cache would then re-check every file whenever any changed)."""
        unnamed = sorted(n for n, (_, named) in self.classes.items() if not named)
        return hex_digest(repr([n for n in unnamed if not self.reached(n)]).encode())

    def reached(self, name: str) -> bool:
        if name not in self._memo:
            self._memo[name] = False  # (a cycle of classes building each other)
            self._memo[name] = self._reached(name)
        return self._memo[name]

    def _reached(self, name: str) -> bool:
        found = self.classes.get(name)
        if found is None or found[1] or name in self.built:
            return True  # (not a class the records know: no claim)
        if any(self.reached(owner) for owner in self.builders.get(name, ())):
            return True  # a part of a class that is reached (in its own file too)
        home, leaf = found[0], name.rpartition(".")[2]
        return any(path != home and may_write(words, leaf) for path, words in self.words)


def uses_of_sources(
    sources: Mapping[str, bytes], *, alone: bool = False, installable: bool = False
) -> ModelUses:
    """The evidence in ``sources`` (shown path -> bytes); ``alone``: one file checked by
    itself, whose messages say "line 12" rather than a path; ``installable``: see
    :func:`uses_of_records`."""
    records = {p: record_of(d, p) for p, d in sources.items()}
    return uses_of_records(records, alone=alone, installable=installable)


class _Names:
    """Qualified names across the project: classes, and the names imports bind to them."""

    def __init__(self, records: Mapping[str, ModelRecord]) -> None:
        self.classes: dict[str, str] = {}  # qualified class -> path of its file
        self.aliases: dict[str, str] = {}
        self.stars: dict[str, tuple[str, ...]] = {}
        self.by_leaf: dict[str, list[str]] = {}
        for path, record in records.items():
            for cls in record.classes:
                self.classes.setdefault(cls.name, path)
            self.aliases.update(record.aliases)
            if record.stars:
                self.stars[record.module] = record.stars
        for name in (*self.classes, *self.aliases):
            self.by_leaf.setdefault(name.rpartition(".")[2], []).append(name)
        self._memo: dict[str, str | None] = {}

    def follow(self, name: str) -> str | None:
        """``name`` through the project's re-exports (``pkg.f`` -> ``pkg.ops.f``), or None."""
        for _ in range(8):
            if name not in self.aliases:
                return name
            name = self.aliases[name]
        return None

    def named(self, name: str) -> frozenset[str]:
        """The project classes of ``name``'s leaf: those a name the imports do not pin to
        one of them may still stand for (``Linear`` of a star import in a project with a
        ``Linear``; ``torch.nn.Linear`` is torch's: :func:`_unknown_model`)."""
        leaf = name.rpartition(".")[2]
        return frozenset(n for n in self.by_leaf.get(leaf, ()) if n in self.classes)

    def resolve(self, name: str) -> str | None:
        """The project class ``name`` stands for, or None (not a project class, or more than
        one could be meant)."""
        if name not in self._memo:
            self._memo[name] = None  # (a cycle of re-exports resolves to nothing)
            self._memo[name] = self._resolve(name)
        return self._memo[name]

    def _resolve(self, name: str) -> str | None:
        if name in self.classes:
            return name
        if name in self.aliases:
            return self.resolve(self.aliases[name])
        module, _, leaf = name.rpartition(".")
        # ``pkg.models.Model`` imported absolutely, defined as ``src.pkg.models.Model``
        longer = [n for n in self.by_leaf.get(leaf, ()) if n.endswith(f".{name}")]
        if len(longer) == 1:
            return self.resolve(longer[0])
        found = {self.resolve(f"{source}.{leaf}") for source in self.stars.get(module, ())}
        found.discard(None)
        return found.pop() if len(found) == 1 else None


def uses_of_records(
    records: Mapping[str, ModelRecord],
    *,
    alone: bool = False,
    installable: bool = False,
    side: Iterable[Path] = (),
    root: Path | None = None,
) -> ModelUses:
    """The project's evidence, joined from each file's record (path -> record);
    ``installable``: the project is a package its users install, whose modules' own
    ``__main__`` demos say nothing of the dtype its users build their classes in; ``side``:
    the project's other files whose words may name its code (notebooks, configurations);
    ``root``: where the project is (side files are shown relative to it)."""
    names = _Names(records)
    tensors = _Tensors(records)
    side = list(side)  # (read more than once)
    # (a library whose contract covers all its classes, checked as itself: its users install
    # it, and run its models in half though it casts none of them)
    itself = None if alone else _library_itself(records)
    installable = installable or itself is not None

    def where(path: str, line: int) -> str:
        return f"line {line}" if alone else f"{path}:{line}"

    roots: dict[str, Reach] = {}
    bodies: dict[str, set[str]] = {}  # class -> the project classes its body builds
    casts: dict[str, Reach] = {}
    written: dict[str, dict[str, Reach]] = {}  # half dtype -> class -> a cast writing it
    # the classes a cast may make float16: one writing float16 or no dtype down
    # (``.to(weight_dtype)``), a wrapper's, a use that may cast it (:meth:`ModelUses.bfloat16_only`)
    float16: set[str] = set()
    not_float16: set[str] = set()  # the classes a cast may make other than float16
    bfloat16_first: set[str] = set()  # classes whose quoted cast writes bfloat16
    covered: dict[str, Reach] = {}  # every call seen runs under an enabled autocast
    uncovered: set[str] = set()
    sites: dict[str, list[tuple[Place, bool]]] = {}  # builds outside classes, kept float32?
    demos: set[str] = set()  # built by demos, examples or tests only (no float32 evidence)
    shown: set[str] = set()  # built by an installable package's examples, tests, docs
    unsafe: set[str] = set()  # a value of the class reaches a use that may cast it
    subclasses: dict[str, set[str]] = {}  # project class -> the project classes deriving it
    factories = _Factories(records, names)
    expand = factories.expand
    under_dtype: set[str] = set()  # loaded under a half default dtype (``torch_dtype=``)
    # a library pipeline or Auto class loads a model by name under a half dtype: the
    # architecture its checkpoint names, which is a library class or a project class on the
    # library's loadable base (:func:`_loadable`), registered with it
    by_name = False
    any_half = any(record.half for record in records.values())
    loose = [LoosePath(Place(p, *spot)) for p, r in sorted(records.items()) for spot in r.loose]
    # (the casts of a model of unknown class that write bfloat16 down: (path, line, column))
    loose_bfloat16 = {(p, s[0], s[1]) for p, r in records.items() for s in r.loose_bfloat16}
    defaults = any(record.default_dtype for record in records.values())
    wrappers: dict[str, list[tuple[str, Place]]] = {}  # library -> (effect, the wrapper)
    wrapped: dict[str, list[tuple[str, Place]]] = {}  # class -> (library, where handed)
    takes: dict[str, list[Place]] = {}  # library -> where it is handed a model of unknown class
    held: list[tuple[str | None, str | None]] = []  # (part, the class it is handed to)
    contained: set[str] = set()  # handed to a torch container (``nn.Sequential(part)``)
    own = {} if installable else _shadowed(records, names)
    keyed = _Keyed(side)
    shipped = ShippedDeepSpeed(side, root)
    # a project function handing what it is given to an FSDP wrapper: where it wraps
    fsdp_functions = {
        function: Place(path, line, column, "")
        for path, record in records.items()
        for function, (line, column, _) in record.wrapping
    }
    part_targets = _PartTargets(records, names, tensors, expand)
    called_elsewhere = _CalledElsewhere(records)
    for path in sorted(records):
        record = records[path]
        for cls in record.classes:
            # (``self.audio = build_tower(cfg)``: the classes the project function returns)
            parts = {p for b in cls.builds for p in expand(b)}
            bodies.setdefault(cls.name, set()).update(parts)
            lib = library_base(cls.bases)
            own_lib = None if lib is not None else _library_root(cls.name, itself)
            if (lib or own_lib) is not None and cls.name not in roots:
                leaf = cls.name.rpartition(".")[2]
                what = f"a `{lib}`" if own_lib is None else f"a module of `{own_lib}`"
                text = f"`{leaf}` is {what}, which its users run in half"
                place = Place(path, cls.line, 1, f"{text} ({where(path, cls.line)})")
                roots[cls.name] = Reach(LIBRARY, place)
        for name, (line, column, _), what, dtype in record.casts:
            # (``model.encoder.half()``: the class held there is cast, not the model)
            targets = part_targets(name, unsafe) if PART in name else expand(name)
            if BUILT_IN_HALF in what:  # ``X.from_pretrained(..., torch_dtype=...)``
                under_dtype.update(targets)
                leaf = name.rpartition(".")[2]
                loader = leaf.endswith("Pipeline") or leaf.startswith(("AutoModel", "AutoPipe"))
                by_name = by_name or (loader and names.resolve(name) is None)
            if PART not in name and factories.one_of(name) and targets:
                # (each member may be the one cast: none is only built in float32)
                place = Place(path, line, column, "")
                loose.append(LoosePath(place, classes=frozenset(targets)))
                unsafe.update(targets)
                continue
            if not targets and PART not in name and _unknown_model(name, names, tensors):
                # (its function: unknown here; the source: whose product it casts)
                place = Place(path, line, column, "")
                if CALLED in name:
                    function = callee(name)
                    loose.append(LoosePath(place, names.follow(function) or function))
                else:  # (a class of a project class's name: one of those)
                    loose.append(LoosePath(place, classes=names.named(name)))
            for target in targets:
                said = part_targets.spelled(what, name, target) if PART in name else what
                text = f"{factories.spelled(said, name, target)} at {where(path, line)}"
                # (a cast that may write float16 is quoted before one writing bfloat16: it
                # is the one a float16-only hazard rests on)
                if target not in casts or (target in bfloat16_first and dtype != "bfloat16"):
                    casts[target] = Reach(CAST, Place(path, line, column, text))
                    if dtype == "bfloat16":
                        bfloat16_first.add(target)
                    else:
                        bfloat16_first.discard(target)
                if dtype:
                    written.setdefault(dtype, {}).setdefault(
                        target, Reach(CAST, Place(path, line, column, text))
                    )
                if dtype != "bfloat16":
                    float16.add(target)
                if dtype != "float16":
                    not_float16.add(target)
        for name, region in record.calls:
            for target in expand(name):
                if region is None:
                    uncovered.add(target)
                elif target not in covered:
                    line, column, what = region
                    place = Place(path, line, column, f"{what} at {where(path, line)}")
                    covered[target] = Reach(AUTOCAST, place)
        demo = installable and _in_package(path, records)
        for name, (line, column, code), kept in record.builds:
            for target in expand(name):
                demos.add(target)  # (built: reached, whatever it says of the dtype)
                if demo and (path.endswith("__main__.py") or 0 < record.main <= line):
                    continue  # the package's own demo: its users build the class as they like
                if _demo(path) and not _demo(names.classes.get(target, path)):
                    if installable:
                        shown.add(target)
                    continue  # (a class of the package built by its examples, tests, benchmarks)
                leaf = target.rpartition(".")[2]
                text = f"`{leaf}` is only built in float32 (`{code}`) at {where(path, line)}"
                sites.setdefault(target, []).append((Place(path, line, column, text), kept))
        unsafe.update(t for name in record.unsafe for t in expand(name))
        for handed, owner in record.held:
            if owner.endswith(PASSED):  # handed to a project function: kept if it casts nothing
                function = owner.removesuffix(PASSED)
                wrapper = fsdp_functions.get(names.follow(function) or function)
                if wrapper is not None:  # (``apply_fsdp(model, ...)``: the wrapper's effect)
                    for target in expand(handed):
                        wrapped.setdefault(target, []).append(("torch", wrapper))
                    continue
                if not factories.keeps(function):
                    read = factories.attribute_read(handed, function)
                    if read is None:
                        unsafe.update(expand(handed))
                    else:  # (a part or a tensor read off the model: only what it holds)
                        unsafe.update(part_targets(f"{handed}{PART}{read}", unsafe))
                continue
            if _container(owner):  # (it holds the model as its part, and casts nothing)
                contained.update(expand(handed))
                continue
            held.extend((t, names.resolve(owner)) for t in expand(handed))
        for name, (line, column, text), effect in record.wrappers:
            if wrap.library_of(name) in own:
                continue
            said = f"{text} at {where(path, line)}"
            if effect == wrap.SHIPPED_DEEPSPEED:  # (the configurations it may be run with)
                found = shipped.half()
                effect = wrap.UNKNOWN if found is None else wrap.CAST
                if found is not None:
                    said += f", run with `{found[2]}` enabled in {found[0]}:{found[1]}"
            elif effect.startswith(wrap.UNKNOWN + wrap.KEYED):
                effect = keyed.effect(name, effect)
            place = Place(path, line, column, said)
            wrappers.setdefault(wrap.library_of(name), []).append((effect, place))
        for name, (line, column, _), lib in record.wrapped:
            if lib in own:  # (the project's own class of the library's name holds it)
                held.extend((t, own[lib]) for t in expand(name))
                continue
            takes.setdefault(lib, [])  # (a take of the library is seen)
            if not expand(name) and _unknown_model(name, names, tensors):
                takes[lib].append(Place(path, line, column, ""))
            for target in expand(name):
                wrapped.setdefault(target, []).append((lib, Place(path, line, column, "")))
        for lib, spot in record.takes:
            if lib not in own:  # (the spot's text: the top-level function holding the take)
                takes.setdefault(lib, []).append(Place(path, *spot))
        for lib, function, spot in record.param_takes:
            if lib not in own and called_elsewhere(function, path):
                # (another file's call hands the parameter what its own file names)
                takes.setdefault(lib, []).append(Place(path, *spot))
        for cls in record.classes:
            for base in cls.bases:
                parent = names.resolve(base)
                if parent is not None:
                    subclasses.setdefault(parent, set()).add(cls.name)
    # a cast of ``self`` in a method of a class reaches it and the classes deriving it
    loose.extend(
        LoosePath(Place(p, *spot), classes=frozenset(_family(name, subclasses)))
        for p, r in sorted(records.items())
        for name, spot in r.owned
    )
    if by_name:  # (the project classes such a load may build, with every part they build)
        loadable = _loadable(records, subclasses)
        under_dtype.update(loadable)
        unsafe.update(loadable)
    # what a factory no call of an application binds goes where nothing shows, and might be
    # cast there; an installable package's users run what its factories return as the
    # package shows it run (:mod:`mpcheck.project.closed`)
    if not installable:
        unsafe.update(factories.unseen())
    deepspeed = any(record.deepspeed for record in records.values())
    fsdp: dict[str, Reach] = {}  # cast by an FSDP policy that leaves the buffers as built
    supported: dict[str, Opening] = {}  # class -> the wrapper that may cast it (issue 36)
    autocasting = _wrapped(wrappers, wrapped, casts, unsafe, deepspeed, where, fsdp, supported)
    plain = {c.name for r in records.values() for c in r.classes if c.bases in ((), ("object",))}
    # a torch container holds what it is handed and casts nothing: a class built only in
    # module class bodies stays their part there (they build it: ``bodies``); one built
    # elsewhere too might be in a container whose own uses no record follows
    unsafe.update(part for part in contained if part in demos)
    for part, holder in held:  # a project module's part; anything else might cast it
        if part is not None and (holder is None or holder in plain):
            unsafe.add(part)
        elif part is not None and holder is not None:
            bodies.setdefault(holder, set()).add(part)
    computed = {c.name for r in records.values() for c in r.classes if c.computes_dtype}
    known = not alone and bool(demos)
    ran = None
    uncalled = None
    unset = None
    if known:
        reads = {p: (r.module, r.reach, r.stars) for p, r in records.items()}
        ran = Reached(reads, side)
        uncalled = Uncalled(
            {p: (r.module, r.methods, r.attributes, r.reach[3]) for p, r in records.items()},
            {c.name: c.bases for r in records.values() for c in r.classes},
            names.resolve,
            side,
            package=installable,
        )
        if not installable:  # (a package's users may hand its classes any flag)
            unset = Unset(
                {p: (r.module, r.flags, r.attributes, r.reach[3]) for p, r in records.items()},
                side,
            )
    if ran is not None:  # (a cast in a file or function nothing runs casts nothing)
        loose = live(loose, {p: r.module for p, r in records.items()}, ran)
        # (nor does a take there hand anything; its library's takes are still seen)
        modules = {p: r.module for p, r in records.items()}
        takes = {
            lib: [p.place for p in live((LoosePath(p) for p in places), modules, ran)]
            for lib, places in takes.items()
        }
    configured = Configured(side, (s for r in records.values() for s in r.reach[3]), names.classes)
    unsafe.update(loaded(loose, configured))
    only = _Float32(sites, unsafe, subclasses, bodies, any_half, defaults, plain, computed)
    # a project whose only half is an autocasting wrapper's: any model may run under it
    mixed = None if any_half else _autocasting_wrapper(wrappers)
    built = {}
    for name in sites:
        if only(name):
            place = only.place(name)
            if name in autocasting:  # float32 weights, the forward under the wrapper's autocast
                text = f"{place.text}; {autocasting[name].text}"
                built[name] = Reach(AUTOCAST, Place(place.path, place.line, place.column, text))
            elif mixed is not None:
                text = f"{place.text}; mixed precision here only comes from {mixed.text}, "
                text += "which keeps weights float32 (autocast at most)"
                built[name] = Reach(AUTOCAST, Place(place.path, place.line, place.column, text))
            else:
                built[name] = Reach(FLOAT32, place)
    reach: dict[str, Reach] = {}
    autocast = {k: v for k, v in covered.items() if k not in uncovered}
    # (one that loads a library's model or pipeline by name in half is not the only user of
    # its classes on the library's bases: the load may build them, and the contract stands)
    application = known and not installable and not by_name
    if application:  # the contract is about its users; an application's builds are its own
        roots = {k: v for k, v in roots.items() if not only(k)}  # (a cast still wins)
    for kind_roots in (casts, roots, autocast):  # the strongest evidence first
        _spread(kind_roots, reach, bodies)
    outside = {t for record in records.values() for n in record.outside for t in expand(n)}
    part_outside = {
        t for record in records.values() for n in record.part_outside for t in expand(n)
    }
    under_autocast = _cast_under_autocast(casts, autocast, outside, bodies, part_outside)
    built_anywhere = demos.union(*bodies.values())  # (built somewhere: run as itself, not a base)
    ran_alone = {*casts, *outside, *covered, *uncovered, *built_anywhere}
    bases = _bases_under_autocast(under_autocast, subclasses, ran_alone)
    on_cpu = {t for record in records.values() for n in record.on_cpu for t in expand(n)}
    on_cpu = _parts_of(on_cpu, bodies)
    # (a covered base runs where the classes deriving it run: on the CPU's lists with them)
    on_cpu |= {b for b in bases if any(d in on_cpu for d in subclasses.get(b, ()))}
    buffers_kept = _buffers_kept(fsdp, casts, roots, bodies) if fsdp and not defaults else {}
    cast_to: dict[str, dict[str, Reach]] = {}
    for dtype, cast_roots in written.items():
        _spread(cast_roots, cast_to.setdefault(dtype, {}), bodies)
    # (a wrapper's cast writes no dtype here, and a use that may cast a model may pick any)
    float16.update(c for c in casts if c not in written.get("bfloat16", {}))
    loosely = {c for path in loose if path.classes is not None for c in path.classes}
    float16 |= unsafe | computed | loosely
    not_float16 |= unsafe | computed | loosely
    _spread(built, reach, bodies, only)
    _spread(_bases(subclasses, reach, only), reach, bodies, only)
    # What nothing reaches is known only in a project that shows where it builds its models
    # (a script, a trainer): a library, or a module file checked by itself, builds none, and
    # every class of it is as reachable as its users make it (``known``, above).
    mentions = _Mentions(records, bodies, {*demos, *subclasses}) if known else None
    made = Construction((r.construction for r in records.values()), defaults)
    classes = {c.name: c.bases for r in records.values() for c in r.classes}
    passes = {r.module: r.callers for r in records.values()}
    paths = {r.module: p for p, r in records.items()}
    called = ModuleCode(passes, classes, names.resolve, names.follow, paths)
    lambdas = Callables({p: r.callables for p, r in records.items()})
    # (FSDP's policies cast, they never autocast: :data:`~mpcheck.knowledge.wrappers.WRAPPERS`)
    # (the project's own code shows an autocast region, or a trainer that may open one)
    autocast_code = any(lib != "torch" for lib in wrappers)
    autocast_code = autocast_code or any(
        lib != "torch" for uses in wrapped.values() for lib, _ in uses
    )
    # (a region the code writes to lower to bfloat16 brings no float16: :meth:`bfloat16_only`)
    float16_code = autocast_code or any(r.autocast_float16 for r in records.values())
    autocast_code = autocast_code or any(record.autocasts for record in records.values())
    autocasts = alone or installable or autocast_code
    inputs = next(
        (
            f"{text} at {where(path, line)}"
            for path in sorted(records)
            for line, _, text in reversed(records[path].inputs)  # (the root: wrapped last)
        ),
        None,
    )
    loads = None
    if known and not installable and not defaults:
        loads = frozenset(_parts_of(under_dtype, bodies))
    mentions_half = any_half or defaults or any(r.autocasts for r in records.values())
    # (an application that shows its builds; an installable package's users run its models
    # as it shows them cast, but wrap them in autocast without its help: its activations may
    # be half where it never says so, e.g. a rotary embedding under a training loop's
    # autocast; a project that builds nothing is a library whose users build and cast its
    # classes in code it does not show, e.g. a model package a benchmark casts)
    half_free = known and not installable and not mentions_half
    half_free = half_free and not any(lib != "torch" for lib in wrappers)
    package = known and installable
    # (a class building parts in a dtype it computes is a half path to them itself)
    # (why each class a root reaches may be half: named when a premise rests on it)
    why_roots = {c: Opening(USE, f"a use of `{_leaf(c)}` may cast it") for c in unsafe}
    why_roots.update(supported)
    why_roots.update(
        (c, Opening(REACHED, f"`{_leaf(c)}` builds parts in a dtype it computes")) for c in computed
    )
    why_roots.update((c, Opening(REACHED, r.place.text, r.place)) for c, r in roots.items())
    why_roots.update((c, Opening(REACHED, r.place.text, r.place)) for c, r in casts.items())
    closed, inside, opened, opens = closed_world(
        application=known and not installable,
        package=package,
        defaults=defaults,
        deepspeed=deepspeed,
        wrappers=wrappers,
        takes=takes,
        loose=loose,
        roots=why_roots,
        casts=casts,
        reach=reach,
        bodies=bodies,
        subclasses=subclasses,
        classes=names.classes,
        sites=sites,
        shown=shown,
        side=side,
        configured=configured,
        where=where,
    )
    return ModelUses(
        reach,
        mentions=mentions,
        construction=made,
        module_code=called,
        ran=ran,
        callables=lambdas,
        autocasts=autocasts,
        dtype_loads=loads,
        application=application,
        cast_to=cast_to,
        float16=frozenset(_parts_of(float16, bodies)),
        input_cast=inputs,
        not_float16=frozenset(_parts_of(not_float16, bodies)),
        buffers_kept=buffers_kept,
        closed=closed,
        read=frozenset(r.module for r in records.values()),
        half_free=half_free,
        under_autocast=under_autocast,
        inside=inside,
        opened={"": Opening(ALONE)} if alone else opened,
        opens=(ALONE,) if alone else opens,
        open_bfloat16=not alone and _bfloat16_opening(opens, loose, loose_bfloat16),
        autocast_shown=float16_code,
        uncalled=uncalled,
        part_calls=PartCalls(
            {r.module: (r.part_called, r.attributes) for r in records.values()},
            (s for r in records.values() for s in r.reach[3]),
            package=installable,
        ),
        unset=unset,
        on_cpu=frozenset(on_cpu),
        names=names,
    )


def _leaf(name: str) -> str:
    return name.rpartition(".")[2]


def _bfloat16_opening(
    opens: tuple[str, ...], loose: Sequence[LoosePath], bfloat16: Collection[tuple[str, int, int]]
) -> bool:
    """Whether only casts of a model of unknown class open the world, each writing bfloat16
    down (``getattr(zoo, name)().to(torch.bfloat16)``): whatever class they reach, they make
    it bfloat16, never float16."""
    if opens != (LOOSE,):
        return False
    unknown = [p.place for p in loose if p.classes is None]
    return all((p.path, p.line, p.column) in bfloat16 for p in unknown)


def _loadable(records: Mapping[str, ModelRecord], subclasses: Mapping[str, set[str]]) -> set[str]:
    """The project classes a library's by-name loader may build: transformers' Auto classes
    build the ``PreTrainedModel`` a checkpoint's configuration names (a project's own only
    when registered with them or named by its ``auto_map``), and a diffusers pipeline builds
    each component its ``model_index.json`` names (a ``ModelMixin`` or ``PreTrainedModel``).
    A class is loadable when it is on such a base or derives (transitively) a project class
    that is; nothing else reaches such a load."""
    on_base = {
        c.name
        for r in records.values()
        for c in r.classes
        if any(b.rpartition(".")[2].endswith(LOADABLE_SUFFIXES) for b in c.bases)
    }
    return _parts_of(on_base, subclasses)


def _cast_under_autocast(
    casts: Mapping[str, Reach],
    autocast: Mapping[str, Reach],
    outside: set[str],
    bodies: Mapping[str, set[str]],
    part_outside: Collection[str] = (),
) -> dict[str, Reach]:
    """The classes whose every cast model runs under autocast: the cast models the project
    runs only inside an enabled region (every call and every method that runs them, in every
    file), their parts, less what any other cast model (or a model run outside a region)
    builds. Their weights are half; autocast recasts what meets them in the ops on its lists.
    A part that a class run outside a region builds stays covered when every run of it is
    in a region and its owner's body runs it in none outside one (``part_outside``): the
    region its owner opens around it (``with autocast(): sample(model=self.unet)``) holds
    wherever the owner runs."""
    inside = {k: v for k, v in autocast.items() if k in casts and k not in outside}
    if not inside:
        return {}
    spread: dict[str, Reach] = {}
    _spread(inside, spread, bodies)
    held = {c for c in inside if c not in part_outside and c not in outside}
    owned_outside = _parts_of(outside, bodies, stop=held)
    others = _parts_of([c for c in casts if c not in inside], bodies) | owned_outside
    return {k: v for k, v in spread.items() if k not in others}


class _Tensors:
    """The project's functions that return tensors only (:attr:`ModelRecord.tensors`),
    asked by the name a file's imports give them (``module.commons.f`` for a file run from
    a folder, defined as ``pkg.module.commons.f``): every project function so named must be
    one."""

    def __init__(self, records: Mapping[str, ModelRecord]) -> None:
        self.tensors: set[str] = set()
        needing: dict[str, list[str]] = {}  # returns tensors if these functions do
        for record in records.values():
            for entry in record.tensors:
                name, _, wanted = entry.partition(NEEDS)
                if wanted:
                    needing[name] = wanted.split(",")
                else:
                    self.tensors.add(name)
        self.by_leaf: dict[str, list[str]] = {}
        for record in records.values():
            for function in record.callers[0]:
                self.by_leaf.setdefault(function.rpartition(".")[2], []).append(function)
        changed = True
        while changed:  # (the least fixed point: a cycle of such functions proves nothing)
            changed = False
            for name, needs in needing.items():
                if name not in self.tensors and all(n in self for n in needs):
                    self.tensors.add(name)
                    changed = True

    def __contains__(self, function: object) -> bool:
        if not isinstance(function, str):
            return False
        if function in self.tensors:
            return True
        function, mark, index = function.partition(POSITION)
        named = [
            f
            for f in self.by_leaf.get(function.rpartition(".")[2], ())
            if f == function or f.endswith(f".{function}")
        ]
        if not mark:
            return bool(named) and all(f in self.tensors for f in named)
        # (an item of what it returns: no model if the whole value is a tensor)
        return bool(named) and all(
            f in self.tensors or f"{f}{POSITION}{index}" in self.tensors for f in named
        )


# Where torch's own classes live: a name the imports qualify under it is torch's, never the
# project's class of the same leaf name.
TORCH = "torch."


def _unknown_model(name: str, names: _Names, tensors: Container[str] = ()) -> bool:
    """Whether ``name``, which resolves to no project class, may still be one: what a call
    returns that the records cannot follow (``instantiate_from_config(cfg)``, a library
    registry building the project's registered classes, ``torch.load`` of a pickled model),
    or a class of a project class's name that its imports do not pin (a library's class is
    none). A project function every ``return`` of which is a tensor (``tensors``:
    :mod:`mpcheck.project.returns`) returns no model: a cast of its value casts none."""
    if CALLED in name:
        function, index = callee(name), name.partition(CALLED)[2]
        function = names.follow(function) or function
        if function in tensors:
            return False
        # (an item of its value that every ``return`` builds of a library's class: no model)
        return f"{function}{POSITION}{index}" not in tensors
    if name.startswith(TORCH) and not any(c.startswith(TORCH) for c in names.classes):
        return False  # (``torch.nn.Linear``: torch's class, whatever the project names its own)
    leaf = name.rpartition(".")[2]
    return any(c.rpartition(".")[2] == leaf for c in names.classes)


def _container(name: str) -> bool:
    """Whether ``name`` is a torch module container (``torch.nn.Sequential``, ``ModuleList``,
    ``ModuleDict``): it registers the modules it is handed as its parts and casts none of
    them; its owner's cast reaches them, as any part's."""
    module, _, leaf = name.rpartition(".")
    return (module == "torch.nn" or module.startswith("torch.nn.")) and leaf in CONTAINER_LAYERS


def _family(name: str, subclasses: Mapping[str, set[str]]) -> set[str]:
    """``name`` and the project classes deriving it, transitively: what ``self`` in a method
    of ``name`` may be."""
    return _parts_of((name,), subclasses)


class _CalledElsewhere:
    """Whether a top-level function of the project may be called by another file than its
    own: another file calls a function of its leaf name (:attr:`ModelRecord.callers`) or
    writes a name ending in it (an import, a re-export), or imports its module itself
    (``import pkg.train``, then ``pkg.train.f(...)``): the reach pass's names. By the leaf
    alone, so a call the records cannot qualify still counts: a false match only leaves a
    take unknown, as it was."""

    def __init__(self, records: Mapping[str, ModelRecord]) -> None:
        self.records = records
        self.by_leaf: dict[str, set[str]] | None = None

    def __call__(self, function: str, path: str) -> bool:
        if self.by_leaf is None:
            self.by_leaf = {}
            for where, record in self.records.items():
                names = [c for c, _, _ in record.callers[3]]
                names += [*record.reach[2], *record.reach[3]]
                for name in names:
                    self.by_leaf.setdefault(name.rpartition(".")[2], set()).add(where)
                    self.by_leaf.setdefault(f"{name}.", set()).add(where)  # (a module)
        module, _, leaf = function.rpartition(".")
        found = self.by_leaf.get(leaf, set()) | self.by_leaf.get(f"{module}.", set())
        return bool(found - {path})


def _bases_under_autocast(
    under: dict[str, Reach], subclasses: Mapping[str, set[str]], ran_alone: Container[str]
) -> set[str]:
    """Add to ``under`` the project base classes whose code runs only as a covered subclass,
    and return them: a method a subclass inherits (or reaches by ``super()``) runs with
    ``self`` an instance of that subclass, so when every class deriving the base runs under
    autocast and the base itself is never built, cast, run or called on its own
    (``ran_alone``: a part of another class's body counts), its code runs under autocast
    too."""
    added: set[str] = set()
    changed = True
    while changed:  # (a base of a base: once its derived classes are all in)
        changed = False
        for base, derived in subclasses.items():
            if base in under or base in ran_alone or not derived:
                continue
            if not all(d in under for d in derived):
                continue
            first = under[min(derived)]
            under[base] = Reach(
                first.kind, first.place, (*first.via, min(derived).rpartition(".")[2])
            )
            added.add(base)
            changed = True
    return added


def _parts_of(
    roots: Iterable[str], bodies: Mapping[str, set[str]], stop: Collection[str] = ()
) -> set[str]:
    """``roots`` and every class their bodies build, transitively (built under the same
    default dtype); with ``subclasses`` for ``bodies``, every class deriving them. A part in
    ``stop`` is neither taken nor followed."""
    out, todo = set(roots), list(roots)
    while todo:
        for part in bodies.get(todo.pop(), ()):
            if part not in out and part not in stop:
                out.add(part)
                todo.append(part)
    return out


class _Factories:
    """The project's functions that build a model and return it (``def load_vae(cfg): ...
    return model``), joined from the records: a call's value (``vae = load_vae(cfg)``, spelled
    ``pkg.f()#`` in a record, ``pkg.f()#1`` for the second element of its returned tuple) is
    the class it returns, so the caller's uses of it are that class's uses (cast there,
    handed to a wrapper, kept float32)."""

    def __init__(self, records: Mapping[str, ModelRecord], names: _Names) -> None:
        self.names = names
        self.products: dict[str, list[tuple[int, str]]] = {}
        for _, record in sorted(records.items()):
            for function, index, built in record.factories:
                self.products.setdefault(function, []).append((index, built))
        self.called: set[str] = set()  # the factories whose value some call binds
        # registry -> its members (:attr:`ModelRecord.registries`): calling one of its values
        # runs one of them, so the value is what any of them returns (a function) or builds;
        # a registry object's members are registered over many files, joined here
        self.registries: dict[str, tuple[str, ...]] = {}
        for _, record in sorted(records.items()):
            for r, m in record.registries:
                self.registries[r] = (*self.registries.get(r, ()), *m)
        # the registry objects (``MODELS = Registry(...)`` with ``@MODELS.register_module()``)
        self.objects = frozenset(r for r, m in self.registries.items() if HANDED in m)
        # the project's top-level functions and methods that cast nothing (a model handed
        # one keeps), and the methods that cast
        self.keepers = frozenset(k for r in records.values() for k in r.keepers)
        self.casters = frozenset(k for r in records.values() for k in r.casters)
        self._expanded: dict[tuple[str, int], list[str]] = {}  # (:meth:`expand`)
        self.bases = {
            c.name: c.bases for r in records.values() for c in r.classes if c.bases
        }  # (resolved when asked: :meth:`_lineage`)

    def keeps(self, function: str) -> bool:
        """Whether ``function`` is a project function none of whose definitions casts; or,
        spelled ``receiver:method`` (:data:`METHOD`), a method that casts nothing of every
        class ``receiver`` stands for; ``first|second``: either keeps."""
        if OR in function:  # a bound method if it is one (whoever calls it), else a part
            method, *others = function.split(OR)
            receiver, _, name = method.rpartition(METHOD)
            classes = self.expand(receiver)
            if classes and all(self._method_keeps(c, name) is not None for c in classes):
                return all(self._method_keeps(c, name) for c in classes)
            return all(self.keeps(f) for f in others)
        if METHOD in function:
            receiver, _, method = function.rpartition(METHOD)
            classes = self.expand(receiver)
            return bool(classes) and all(self._method_keeps(c, method) for c in classes)
        return (self.names.follow(function) or function) in self.keepers

    def attribute_read(self, handed: str, function: str) -> str | None:
        """The chain of attributes a bound read ``handed:chain`` hands on when it names no
        method of the classes ``handed`` stands for (``encoder``, ``emb.weight``, as
        ``encoder@...`` parts): a part or a tensor of the model, never the model itself
        (:class:`_PartTargets` says what it holds). None: a method, or a model handed to
        another object's method."""
        receiver, _, name = function.partition(OR)[0].rpartition(METHOD)
        if receiver != handed or not name:
            return None
        if "." not in name:
            classes = self.expand(receiver)
            if not classes or any(self._method_keeps(c, name) is not None for c in classes):
                return None
        return name.replace(".", PART)

    def _method_keeps(self, cls: str, method: str) -> bool | None:
        """Whether no definition of ``method`` in ``cls`` or its project bases casts (one
        may run another by ``super()``); None when none of them defines it."""
        names = [f"{c}.{method}" for c in self._lineage(cls)]
        if any(n in self.casters for n in names):
            return False
        return True if any(n in self.keepers for n in names) else None

    def _lineage(self, cls: str) -> list[str]:
        """``cls`` and its project bases, nearest first."""
        return lineage_of(cls, self.bases, self.names.resolve)

    def expand(self, name: str, depth: int = 0) -> list[str]:
        """The project classes ``name`` stands for: a class, or what a call returns (each
        name at each depth expanded once: factories returning each other's values would
        otherwise be walked once per path)."""
        key = (name, depth)
        found = self._expanded.get(key)
        if found is None:
            found = self._expanded[key] = self._expand(name, depth)
        return found

    def _expand(self, name: str, depth: int) -> list[str]:
        if CALLED not in name:
            found = self.names.resolve(name)
            return [] if found is None else [found]
        function, _, index = name.partition(CALLED)
        if HANDED in function:  # ``build_module(cfg, MODELS)``: MODELS's build, if it returns it
            function, position, registry = function.split(HANDED, 2)
            function = self.names.follow(function) or function
            if f"{HANDED}{position}" in self.registries.get(function, ()):
                return self.expand(f"{registry}{CALLED}{index}", depth + 1)
        function = self.names.follow(function) or function
        members = [m for m in self.registries.get(function, ()) if HANDED not in m]
        if members and depth <= 8:
            values: list[str] = []
            for member in members:
                made = self.expand(f"{member}{CALLED}{index}", depth + 1)
                values.extend(t for t in made or self.expand(member) if t not in values)
            return values
        if function not in self.products or depth > 8:
            return []
        self.called.add(function)
        out: list[str] = []
        for at, built in self.products[function]:
            if index in ("", str(at)) or at < 0:
                out.extend(t for t in self.expand(built, depth + 1) if t not in out)
        return out

    def one_of(self, name: str) -> bool:
        """Whether ``name`` is a registry object's build (``MODELS.build(cfg)``,
        ``build_module(cfg, MODELS)``): one of the classes registered with it, which one a
        configuration says, so a cast of it reaches one of them (a loose path with classes),
        no cast of each."""
        function = name.partition(CALLED)[0]
        if HANDED in function:
            base, position, registry = function.split(HANDED, 2)
            base = self.names.follow(base) or base
            return f"{HANDED}{position}" in self.registries.get(base, ()) and (
                registry in self.objects
            )
        return CALLED in name and (self.names.follow(function) or function) in self.objects

    def spelled(self, what: str, name: str, target: str) -> str:
        """A cast's text quoting the class a call returned, not the call's placeholder."""
        if CALLED not in name:
            return what
        function = callee(name).rpartition(".")[2]
        leaf = target.rpartition(".")[2]
        shown = f"`{leaf}` (returned by `{function}()`)"
        return what.replace(f"`{name.rpartition('.')[2]}`", shown, 1)

    def unseen(self) -> set[str]:
        """The classes returned by factories no call of the project binds: they go where
        nothing shows."""
        out: set[str] = set()
        for function in sorted(self.products):
            if function in self.called:
                continue
            for _, built in self.products[function]:
                out.update(self.expand(built))
        return out


class _PartTargets:
    """The project classes a cast of one part of a model casts (``model.encoder.half()`` is
    spelled ``pkg.Net@encoder`` in a record): what the model's class binds at that attribute
    (:mod:`mpcheck.project.held_parts`). A part no record names (``self.encoder =
    encoder``) may hold anything the model holds: its models may be cast (``unsafe``)."""

    def __init__(
        self,
        records: Mapping[str, ModelRecord],
        names: _Names,
        tensors: Container[str],
        expand: Callable[[str], list[str]],
    ) -> None:
        modules = {r.module for r in records.values() if r.module}
        # (a module's dotted tails too: ``src.pkg.models`` is imported as ``pkg.models``)
        self.modules = {m.split(".", i)[-1] for m in modules for i in range(m.count(".") + 1)}
        self.names, self.tensors, self.expand = names, tensors, expand
        self.parts = HeldParts(
            ((c.name, c.bases, c.parts) for r in records.values() for c in r.classes),
            names.resolve,
            self._unknown,
        )

    def __call__(self, name: str, unsafe: set[str]) -> list[str]:
        owner, _, attrs = name.partition(PART)
        owners = self.expand(owner)
        held = [self._walk(o, attrs.split(PART)) for o in owners]
        if any(h is None for h in held):
            unsafe.update(owners)  # (the conservative answer: the cast may reach the model)
            return []
        return sorted({c for h in held if h for c in h})

    def _walk(self, owner: str, attrs: Sequence[str]) -> frozenset[str] | None:
        """What ``owner``'s part at the chain ``attrs`` holds (``encoder``, ``layers``)."""
        return self.parts.reached(owner, attrs)

    def _unknown(self, name: str) -> bool:
        """Whether a part's callee that is no project class may still build one: a name of
        a project module (``pkg.enc.Encoder.build``), or one the imports do not pin."""
        if _unknown_model(name, self.names, self.tensors):
            return True
        head = name
        while "." in head:
            head = head.rpartition(".")[0]
            if head in self.modules:
                return True
        return False

    def spelled(self, what: str, name: str, target: str) -> str:
        """A part cast's text naming the class held there and the class holding it
        (```Encoder` (held at `Net.encoder`)``, also for a model a factory returned)."""
        owner, _, attrs = name.partition(PART)
        chain = attrs.split(PART)
        holders = [o for o in self.expand(owner) if target in (self._walk(o, chain) or ())]
        holder = holders[0] if holders else owner
        path = ".".join(chain)
        quoted = f"`{owner.rpartition('.')[2]}.{path}`"
        held = f"`{target.rpartition('.')[2]}` (held at `{holder.rpartition('.')[2]}.{path}`)"
        return what.replace(quoted, held, 1)


class _Keyed:
    """A wrapper's setting read under a configuration key (``precision=cfg["train"]
    ["precision"]``): the values the project's configuration files give that key
    (``precision: 16-mixed``) are the values it takes; when the table maps every one, their
    effect is the setting's (none found, or one it does not map: unknown)."""

    _LINE = r"""(?m)^[ \t]*["']?%s["']?[ \t]*[:=][ \t]*["']?([\w.+-]+)"""

    def __init__(self, side: Sequence[Path]) -> None:
        self._side = [p for p in side if p.suffix in (".yaml", ".yml", ".json", ".toml")]
        self._memo: dict[str, str] = {}

    def effect(self, name: str, effect: str) -> str:
        if effect in self._memo:
            return self._memo[effect]
        _, keyword, key = effect.split(wrap.KEYED, 2)
        setting = next((s for s in wrap.WRAPPERS.get(name, ()) if s.keyword == keyword), None)
        values: set[str] = set()
        pattern = re.compile(self._LINE % re.escape(key))
        for path in self._side:
            try:
                if path.stat().st_size > 2 * 1024 * 1024:
                    continue
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            values.update(pattern.findall(text))
        out = wrap.UNKNOWN
        if setting is not None and values and all(v in setting.values for v in values):
            out = wrap.effect([setting.values[v] for v in sorted(values)])
        self._memo[effect] = out
        return out


def _shadowed(records: Mapping[str, ModelRecord], names: _Names) -> dict[str, str | None]:
    """The wrapper libraries an application's own modules shadow (its ``trainer.py`` with a
    ``Trainer`` is no coqui-ai ``trainer``: Python imports the script's own directory first),
    each with the project class named as the library's taking call (None: none is), which
    holds the models handed to it like any project class."""
    modules = {record.module for record in records.values()}
    rows: dict[str, list[str]] = {}
    for name in (*wrap.WRAPPERS, *wrap.TAKING_CALLS):
        rows.setdefault(wrap.library_of(name), []).append(name)
    out: dict[str, str | None] = {}
    for lib, named in rows.items():
        roots = {name.split(".", 1)[0] for name in named}
        found = [c for c in (names.resolve(n) for n in named) if c is not None]
        if found or any(m.split(".", 1)[0] in roots for m in modules if m):
            out[lib] = found[0] if found else None
    return out


def _autocasting_wrapper(wrappers: Mapping[str, list[tuple[str, Place]]]) -> Place | None:
    """The first wrapper of the project that runs models under autocast, if any."""
    found = [place for lib in sorted(wrappers) for e, place in wrappers[lib] if e == wrap.AUTOCAST]
    return found[0] if found else None


def _wrapped(
    wrappers: Mapping[str, list[tuple[str, Place]]],
    wrapped: Mapping[str, list[tuple[str, Place]]],
    casts: dict[str, Reach],
    unsafe: set[str],
    deepspeed: bool,
    where: Callable[[str, int], str],
    kept: dict[str, Reach],
    support: dict[str, Opening],
) -> dict[str, Place]:
    """Each class handed to a wrapper takes the effect of its library's wrappers in the
    project: a cast (added to ``casts``; to ``kept`` too, with the wrapper, when it is an
    FSDP cast of the parameters only), unknown (added to ``unsafe``, and to ``support`` with
    the wrapper that may cast it: a premise resting on it names it), or autocast (the
    classes returned, with what to quote); full precision keeps it float32 as it was."""
    autocasting: dict[str, Place] = {}
    for target, uses in sorted(wrapped.items()):
        leaf = target.rpartition(".")[2]
        for lib, handed in uses:
            found = [(e.removesuffix(wrap.BUFFERS), p) for e, p in wrappers.get(lib, [])]
            effect = wrap.effect([e for e, _ in found]) if found else wrap.UNKNOWN
            if lib == "accelerate" and deepspeed and effect == wrap.AUTOCAST:
                effect = wrap.UNKNOWN  # (accelerate under DeepSpeed casts the model)
            at = where(handed.path, handed.line)
            if effect == wrap.UNKNOWN:
                unsafe.add(target)
                source = next((p for e, p in found if e != wrap.FULL), None)
                if source is not None and target not in support:
                    text = f"the models handed to a wrapper may be cast by {source.text} "
                    text += f"(it takes `{leaf}` at {at})"
                    place = Place(handed.path, handed.line, handed.column, text)
                    support[target] = Opening(TAKEN, text, place)
            elif effect == wrap.CAST and target not in casts:
                source = next(p for e, p in found if e == effect)
                text = f"`{leaf}` is cast to half by {source.text} (it takes `{leaf}` at {at})"
                place = Place(handed.path, handed.line, handed.column, text)
                casts[target] = Reach(CAST, place)
                buffers = any(e.endswith(wrap.BUFFERS) for e, _ in wrappers.get(lib, []))
                if lib == "torch" and not buffers:
                    kept[target] = Reach(CAST, source)
            elif effect == wrap.AUTOCAST and target not in autocasting:
                source = next(p for e, p in found if e == effect)
                text = (
                    f"{source.text} runs its forward under autocast and keeps its weights "
                    f"float32 (it takes `{leaf}` at {at})"
                )
                autocasting[target] = Place(handed.path, handed.line, handed.column, text)
    return autocasting


def _buffers_kept(
    kept: Mapping[str, Reach],
    casts: Mapping[str, Reach],
    roots: Mapping[str, Reach],
    bodies: Mapping[str, set[str]],
) -> dict[str, Reach]:
    """The classes whose only half evidence is an FSDP cast of the parameters (FSDP2, or
    FSDP1 without a half ``buffer_dtype``; ``kept``: the classes handed to one, which no
    other cast reached first), with that wrapper: their buffers keep the dtype they were
    built with. A class (or part) some other cast or a library base reaches
    (``.half()`` and ``.to(dtype)`` cast every floating buffer) is none of them."""
    others = {name: reach for name, reach in casts.items() if name not in kept}
    others.update((name, reach) for name, reach in roots.items() if name not in others)
    cast: dict[str, Reach] = {}
    _spread(others, cast, bodies)
    found: dict[str, Reach] = {}
    _spread(kept, found, bodies)
    return {name: reach for name, reach in found.items() if name not in cast}


class _Float32:
    """Whether the project only builds a class in float32 (issue 36, item 2).

    A project that never mentions half precision builds everything in float32. Otherwise a
    class is float32 when it is built somewhere, every value built outside a class body stays
    float32 in its file (bound to a variable whose every use keeps its dtype: called,
    ``.to(device)``, ``.cuda()``, ``.eval()``, ``.parameters()``, ``torch.compile``, DDP; or
    called at once), no value of it reaches a use that might cast it, every class that builds
    it is float32 by the same rule (transitively), every class of the project deriving it
    that is built is float32 (its code runs in theirs), no file changes the default dtype,
    and its body builds no part in a dtype it computes itself (``dtype=compute_dtype`` of a
    configuration's string: its parts, and what their data reaches, may be half). A cast,
    a half load or a library base wins over it (they come first).
    """

    def __init__(
        self,
        sites: Mapping[str, list[tuple[Place, bool]]],
        unsafe: set[str],
        subclasses: Mapping[str, set[str]],
        bodies: Mapping[str, set[str]],
        any_half: bool,
        defaults: bool,
        plain: Collection[str] = (),
        computed: Collection[str] = (),
    ) -> None:
        self.sites, self.unsafe, self.subclasses = sites, unsafe, subclasses
        self.computed = computed  # classes building parts in a dtype they compute
        self.any_half, self.defaults = any_half, defaults
        self.builders: dict[str, set[str]] = {}
        for holder, parts in bodies.items():
            if holder in plain:
                continue  # (its builds are sites: :meth:`ModelRecord.builds`)
            for part in parts:
                if part != holder:
                    self.builders.setdefault(part, set()).add(holder)
        self._memo: dict[str, bool] = {}

    def __call__(self, name: str) -> bool:
        if name not in self._memo:
            self._memo[name] = False  # (a cycle of builders is no evidence)
            self._memo[name] = self._decide(name)
        return self._memo[name]

    def _decide(self, name: str) -> bool:
        sites, builders = self.sites.get(name, []), self.builders.get(name, set())
        derived = [d for d in sorted(self.subclasses.get(name, ())) if self._built(d)]
        if not sites and not builders and not derived:
            return False  # never built: no evidence either way
        if not self.any_half:  # (built by a class that is built itself)
            return bool(sites) or any(self(b) for b in (*builders, *derived))
        if self.defaults or name in self.unsafe or name in self.computed:
            return False  # (a class building parts in a dtype it computes: they may be half)
        if not all(self(d) for d in derived):
            return False
        return all(kept for _, kept in sites) and all(self(b) for b in builders)

    def _built(self, name: str) -> bool:
        """Whether anything of the project builds ``name`` (or a class deriving it)."""
        if self.sites.get(name) or self.builders.get(name):
            return True
        return any(self._built(d) for d in self.subclasses.get(name, ()) if d != name)

    def place(self, name: str) -> Place:
        return self.sites[name][0][0]


def _bases(
    subclasses: Mapping[str, set[str]], reach: Mapping[str, Reach], only: _Float32
) -> dict[str, Reach]:
    """A base class only its float32 subclasses run (itself built nowhere) takes their
    evidence: its code runs in theirs."""
    out = {}
    for base, derived in sorted(subclasses.items()):
        if base in reach or not only(base):
            continue
        found = [(n, reach.get(n)) for n in sorted(derived) if only._built(n)]
        if found and all(r is not None and r.kind in (FLOAT32, AUTOCAST) for _, r in found):
            name, first = found[0]
            assert first is not None
            out[base] = Reach(first.kind, first.place, (*first.via, name.rpartition(".")[2]))
    return out


def _spread(
    roots: Mapping[str, Reach],
    reach: dict[str, Reach],
    bodies: Mapping[str, set[str]],
    admits: Callable[[str], bool] | None = None,
) -> None:
    """Give each root's evidence to the classes it builds, transitively, unless they have
    stronger evidence already (or ``admits`` refuses them)."""
    todo = [name for name in sorted(roots) if name not in reach]
    for name in todo:
        reach[name] = roots[name]
    while todo:
        name = todo.pop()
        for part in sorted(bodies.get(name, ())):
            if part == name or part in reach or (admits is not None and not admits(part)):
                continue
            found = reach[name]
            leaf = name.rpartition(".")[2]
            reach[part] = Reach(found.kind, found.place, (*found.via, leaf))
            todo.append(part)


def library_base(bases: Iterable[str]) -> str | None:
    """The library base among ``bases`` (qualified) whose contract says its users run its
    subclasses in half: a diffusers ``ModelMixin``, a transformers ``PreTrainedModel``, a
    peft tuner, or any class of timm or peft."""
    for base in bases:
        leaf = base.rsplit(".", 1)[-1]
        if leaf.endswith(LIBRARY_SUFFIXES) or base.startswith(_LIBRARY_ROOTS):
            return leaf
    return None


def _library_itself(records: Mapping[str, ModelRecord]) -> str | None:
    """The library whose contract covers every model and part of it (timm, peft) that the
    project is: all its code is that library's package. Checked as itself, the library's
    classes are what its users run in half, though it casts none of them; a copy vendored
    beside an application's own code is the application's, whose builds decide."""
    tops = {path.partition("/")[0] for path in records}
    if len(tops) != 1:
        return None
    (top,) = tops
    return top if f"{top}." in _LIBRARY_ROOTS else None


def _library_root(name: str, itself: str | None) -> str | None:
    """``itself`` (:func:`_library_itself`) when the class ``name`` (qualified) is its own."""
    return itself if itself is not None and name.startswith(f"{itself}.") else None


_USES: dict[str, ModelUses] = {}
_RECORDS: dict[tuple[str, str], ModelRecord] = {}  # (path, content hash) -> its record
_MAX_SOURCE = 16 * 1024 * 1024  # bytes: larger files are not project sources


def uses_for(
    root: str, cache_dir: str | None = None, buffers: Mapping[str, bytes] | None = None
) -> ModelUses:
    """The evidence of the project at ``root``, joined once per process (``forget_uses``
    drops it for a run that must see the files as they are now). ``buffers``: open editor
    buffers (real path -> bytes) that stand for their files."""
    if root not in _USES:
        side: list[Path] = []
        records = records_for(root, cache_dir, buffers, side)
        _USES[root] = uses_of_records(
            records, installable=_installable(Path(root)), side=side, root=Path(root)
        )
    return _USES[root]


# Where a package's own demos build its classes: they show how to call them, not the
# dtype its users build them in.
_DEMO_DIRS = frozenset(
    {"examples", "example", "tests", "test", "benchmarks", "benchmark", "docs", "doc"}
)
_PACKAGING = ("setup.py", "setup.cfg", "pyproject.toml")


def _demo(path: str) -> bool:
    """Whether the file at ``path`` is a demo: in an examples, tests, benchmarks or docs
    folder."""
    return not _DEMO_DIRS.isdisjoint(path.split("/")[:-1])


def _installable(root: Path) -> bool:
    """A project its users install (a packaging file at its root): a library, or an
    application shipped as a package. A ``pyproject.toml`` that only configures tools
    (``[tool.ruff]``, ``[tool.mpcheck]``) packages nothing."""
    for name in _PACKAGING:
        path = root / name
        if not path.is_file():
            continue
        if name != "pyproject.toml":
            return True
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if re.search(r"^\[(project|build-system|tool\.poetry)\]", text, re.MULTILINE):
            return True
    return False


def _in_package(path: str, records: Mapping[str, ModelRecord]) -> bool:
    """Whether the file at ``path`` belongs to a package of the project (its top folder
    has an ``__init__.py``; a script at the root or in a scripts folder does not)."""
    top, _, rest = path.partition("/")
    return bool(rest) and f"{top}/__init__.py" in records


def forget_uses() -> None:
    _USES.clear()


def records_for(
    root: str,
    cache_dir: str | None = None,
    buffers: Mapping[str, bytes] | None = None,
    side: list[Path] | None = None,
) -> dict[str, ModelRecord]:
    """Every project file's record (shown path -> record): kept in this process and in the
    cache (one entry for the project, each file's record under its content hash and
    modification stamp), derived only for files that changed. ``side`` gets the project's
    other files that may name its code (:data:`mpcheck.project.reach.SIDE_SUFFIXES`)."""
    cache = None
    kept: dict[str, list[object]] = {}
    key = Path(root).resolve() / ".mpcheck-model-records"
    if cache_dir is not None:  # (the cache module is imported only by runs that use it)
        from mpcheck.pipeline.cache import FileCache, fingerprint

        cache = FileCache(Path(cache_dir), fingerprint((), {"model_records": 1}))
        entry = cache.load(key)
        if entry is not None and entry.summary is not None:
            try:
                kept = json.loads(entry.summary)
            except ValueError:
                kept = {}
    out: dict[str, ModelRecord] = {}
    fresh: dict[str, list[object]] = {}
    changed = False
    for shown, path in _project_files(Path(root), side):
        buffered = buffers.get(os.path.realpath(path)) if buffers else None
        seen = _stamp(str(path)) if buffered is None and cache is not None else None
        old = kept.get(shown)
        if old is not None and seen is not None and seen[1] and old[1] == list(seen[0]):
            record = ModelRecord.from_plain(old[2])
            if record is not None:
                out[shown], fresh[shown] = record, old
                continue
        data = buffered if buffered is not None else _read(path)
        if data is None:  # (every file: one that only names a class keeps it reachable)
            continue
        content = hex_digest(data)
        record = _RECORDS.get((shown, content))
        if record is None and old is not None and old[0] == content:
            record = ModelRecord.from_plain(old[2])
        if record is None:
            record = record_of(data, shown)
        _RECORDS[(shown, content)] = record
        out[shown] = record
        trusted = seen[0] if seen is not None and seen[1] else None
        fresh[shown] = [content, None if trusted is None else list(trusted), record.to_plain()]
        changed = changed or old != fresh[shown]
    if cache is not None and (changed or set(kept) != set(fresh)):
        from mpcheck.pipeline.cache import Entry

        text = json.dumps(fresh, separators=(",", ":"))
        cache.store(key, Entry("", (), text))
    return out


def _stamp(path: str) -> tuple[tuple[int, int], bool] | None:
    from mpcheck.pipeline.cache import stamp

    return stamp(path)


def _read(path: Path) -> bytes | None:
    try:  # a FIFO would block, a device never end: regular files only, and not huge
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_SOURCE:
            return None
        return path.read_bytes()
    except OSError:
        return None


def _project_files(root: Path, side: list[Path] | None = None) -> Iterable[tuple[str, Path]]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".py"):
                path = Path(folder) / name
                yield path.relative_to(root).as_posix(), path
            elif side is not None and name.endswith(SIDE_SUFFIXES) and name not in NOT_SIDE:
                side.append(Path(folder) / name)


__all__ += ["module_of"]
