"""Why the engine believes a class's code may run in half: a :class:`HalfEvidence`.

Every method of an ``nn.Module`` is walked as if the model ran in half (its inputs and
weights in the model's dtype). That is a premise, not a fact: a finding that rests on it
alone is a latent hazard (a warning that states it). A finding is an error only when the
project gives evidence that half reaches the class: a cast or half load of a model that is
or builds it (``model.half()`` in a script, in any file: :mod:`mpcheck.project.models`), a
library base whose users run it in half (diffusers ``ModelMixin``, transformers
``PreTrainedModel``, timm, peft), or the project's own setting (``models-run-in-half``: the
project is a model library and says its users run every module of it in half).

A module's weights change dtype only when code casts them, loads them in a dtype or hands the
model to something that does (a trainer's half setting, DeepSpeed, an FSDP policy). So the
premise needs a half path the engine cannot see: in a project whose every half path names the
classes it reaches, a class none reaches runs in float32; the premise stays for the classes an
unresolved path may reach (a cast of a model of unknown class, a model handed to library code,
a half default dtype: then every class; a library's by-name loader: its loadable bases). An
application that never names a half dtype, a cast to one, autocast or a mixed-precision
setting runs in float32. A premise names what supports it (issue 36: every half belief
carries its evidence): what opens the project's world, or the half path reaching the class
(:class:`mpcheck.project.closed.Opening`, computed once per project), with its place as a
related location.

A function defined outside a class runs with its callers' values: scripts, datasets and plain
classes hand it data (what it casts to a dtype it does not spell is then the run's working
dtype, half on a half run), and a module's code hands it the module's activations. In a closed
world, one that only module classes no half path reaches run (or, in a package that casts no
model to half, that nothing of the package runs) runs in float32
(:meth:`ModelUses.function_float32_text`); a premise on one names the half path reaching a
module class that runs it ("it runs in `Scorer`; ...").

A cast model the project runs only inside enabled autocast regions (every call and every
method that runs it, in every file) has half weights, but autocast recasts the operands of
the ops on its lists: a float32 value meeting those weights in a Linear, conv, matmul or
attention raises nothing (``HalfEvidence.autocast``; ``Rule.report_evidenced`` checks the
clashing op against autocast's lists). The ops autocast does not see (a compiled kernel, a
call with ``out=``) still meet them.

An installable package's users cast its models as the package shows them cast (its code,
examples, tests and documentation): a class none of its half paths reaches keeps float32
weights, whoever builds it ("`Block` is built by the package's users, and nothing of the
package ... runs it in half"; "`Block` is built only by the package's own code (inside
`Model`, built at run.py:12), where no half cast, load or wrapper of the project reaches
`Block`"). Its users may still wrap it in autocast (``ModelUses.autocasts``). A model library
whose users run every module in half says so (the setting), and a library base's contract
says so for its subclasses: both outrank the closed world. So does a library whose contract
covers every class of it (timm, peft) checked as itself, when all the project's code is that
library's package: a copy vendored beside an application's code is the application's.

Which half: in a closed world, a class every half path of which writes bfloat16 down
(``.to(torch.bfloat16)``, ``.bfloat16()``, ``torch_dtype=torch.bfloat16``) never runs in
float16 (``HalfEvidence.float16``): bfloat16 has float32's range, so an overflow of float16's
65504 needs float16 shown. A cast to a dtype variable (``.to(weight_dtype)``), a wrapper's
cast, or a use that may cast the model may write float16, and keeps it open; so does any
autocast region the project may run that is not written to lower to bfloat16 (float16 is
CUDA's default). A class run only under autocast, in a project whose every region lowers to
bfloat16, is bfloat16 wherever it is half.
A premise resting only on casts of models of unknown class that write bfloat16 down
(``getattr(zoo, name)().to(torch.bfloat16)``) is bfloat16 too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import libcst as cst

from mpcheck.project.closed import UNSEEN
from mpcheck.project.models import (
    AUTOCAST,
    CAST,
    FLOAT32,
    HALF_FREE,
    LIBRARY,
    ModelUses,
    Reach,
    library_base,
)
from mpcheck.project.summary import Place

__all__ = [
    "AUTOCAST",
    "CAST",
    "FLOAT32",
    "LIBRARY",
    "PREMISE",
    "SETTING",
    "UNREACHED",
    "DevicePremise",
    "Evidence",
    "HalfEvidence",
]

SETTING, PREMISE, UNREACHED = "setting", "premise", "unreached"


@dataclass(frozen=True)
class HalfEvidence:
    """``kind``: cast, library, setting, premise, or against half: float32 or autocast (see
    :mod:`mpcheck.project.models`); ``text``: what a message quotes;
    ``place``: the cast or library class, or what supports a premise (None for a setting or
    a premise with no place); ``node``: the
    class it is about, where a finding's related location is anchored; ``note``: what that
    location says when ``place`` is a location of its own (only the link the place does not
    say, so the two notes never repeat each other; None: ``text``)."""

    kind: str
    text: str
    place: Place | None = None
    node: cst.CSTNode | None = None
    note: str | None = None
    subject: str | None = None  # the premise's class or function (a numerics rule words it)
    # (half dtype, what says so): casts of the project that write a half dtype down and
    # reach the class (``Model(...).to(torch.float16)``): on that path its weights are it
    written: tuple[tuple[str, str], ...] = ()
    # a cast's class whose every cast model the project runs only under autocast: the region
    # (quoted, with its place). Its weights are half, and autocast recasts the operands of
    # the ops on its lists, so a float32 value meeting them there raises nothing
    autocast: str | None = None
    # a premise's support: why the class may run in half though no cast names it (a cast of
    # a model of unknown class, a wrapper that may cast, ...: :class:`closed.Opening`)
    why: str = ""
    # a cast's class whose every half path writes bfloat16 down: that cast (quoted, with
    # its place). bfloat16 has float32's range, so float16's 65504 bounds nothing there
    bfloat16: str | None = None
    # a cast's class whose every half path writes float16 down: that cast (quoted, with its
    # place). Its weights' dtype (``self.dtype``) is float16 wherever it is half
    float16_only: str | None = None
    # with :attr:`float16_only`, the project opens no autocast region (nor brings a trainer
    # that may): its activations are in its weights' dtype too (autocast would lower them
    # to a dtype of its own, bfloat16 perhaps)
    float16_activations: bool = False
    # a region written for the CPU runs the class (kinds cast and autocast): the CPU's lists
    # apply there too, so only an op on both devices' float32 lists is float32 whatever
    # its input (:meth:`caller_autocast`)
    autocast_cpu: bool = False
    # a premise whose only support is a half path the records cannot follow (a model of
    # unknown class cast, a wrapper whose setting is unread or that is handed one, a use
    # that may cast: :data:`mpcheck.project.closed.UNSEEN`), in an application that does not
    # ask for such premises: no evidence that half reaches the class, so nothing that
    # follows the model's dtype is reported on it
    unseen: bool = False

    @property
    def caller_autocast(self) -> str | None:
        """The autocast region around every run of the class, in its callers (quoted), or
        None: some run is outside one. The class is never cast and run only under autocast
        (kind autocast), or every cast model reaching it is (:attr:`autocast`)."""
        if self.kind == AUTOCAST:
            return self.text
        return self.autocast if self.kind == CAST else None

    def cast_to_other(self, dtype: str) -> tuple[str, str] | None:
        """The half dtype other than ``dtype`` that a cast of the project gives the class,
        and what says so (a value hard-coded to ``dtype`` then meets weights of the other),
        or None."""
        return next(((d, text) for d, text in self.written if d != dtype), None)

    @property
    def float16(self) -> bool:
        """Whether float16 may reach the class: not when every half path that reaches it
        writes bfloat16 down (``.to(torch.bfloat16)``, ``torch_dtype=torch.bfloat16``)."""
        return self.bfloat16 is None

    @property
    def latent(self) -> bool:
        """Only the premise: a finding resting on it is a warning."""
        return self.kind == PREMISE

    @property
    def float32(self) -> bool:
        """Evidence against half: the project only builds the class in float32, runs every
        call of it under autocast (a mix is then autocast's business), never builds it, or
        the code runs at construction, before any cast (:mod:`construction`)."""
        return self.kind in (FLOAT32, AUTOCAST, UNREACHED)


@dataclass(frozen=True)
class DevicePremise:
    """A premise about the device a region runs on, not about half: an autocast region whose
    device is known only at run time and whose dtype only CUDA's autocast takes
    (``torch.autocast(device_type=x.device.type, dtype=torch.float32)``). CUDA computes the
    region's list in that dtype; every other device's autocast turns itself off, and the code
    runs as written there. A finding only that reading gives is latent: a warning stating
    this premise (``text``), never an error, with the region as its place (``node``, whose
    related location says ``note``)."""

    text: str
    node: cst.CSTNode
    note: str


class Evidence:
    """The part that answers :meth:`of_class`, once per class of the file."""

    def __init__(
        self,
        elsewhere: dict[cst.CSTNode, Place],
        uses: ModelUses | None,
        setting: bool = False,
        open_world: bool = False,
    ) -> None:
        self.elsewhere = elsewhere  # the walk's related locations in other files
        self.uses = uses
        self.setting = setting  # ``models-run-in-half = true`` in the configuration
        # ``open-world-premises = true``: premises resting on a half path the records cannot
        # follow are reported too (:attr:`HalfEvidence.unseen`)
        self.open_world = open_world
        self._classes: dict[str, HalfEvidence] = {}

    def of_class(
        self, name: str, anchor: cst.CSTNode, bases: Sequence[str], pretrained: bool
    ) -> HalfEvidence:
        """``bases``: qualified, with those of bases in other project files; ``pretrained``:
        a ``from_pretrained`` model class (a ``ModelMixin`` or ``PreTrainedModel``)."""
        if name not in self._classes:
            self._classes[name] = self._decide(name, anchor, bases, pretrained)
        return self._classes[name]

    def of_function(self, name: str) -> HalfEvidence:
        """A top-level function ``name`` (or a class's code outside a module): the premise,
        unless nothing in the project runs it (:mod:`mpcheck.project.reach`)."""
        if self.uses is not None and not self.uses.function_reached(name):
            text = f"nothing in the project imports, calls or names `{name}`"
            return HalfEvidence(UNREACHED, text)
        if self.uses is not None and self.uses.half_free and not self.setting:
            return HalfEvidence(FLOAT32, HALF_FREE)
        found = None if self.uses is None or self.setting else self.uses.function_float32_text(name)
        if found is not None:  # (its callers' classes decide: none runs in half)
            return HalfEvidence(FLOAT32, found)
        return self.premise(name)

    def of_method(self, owner: str, name: str) -> HalfEvidence | None:
        """Nothing runs the method ``name`` of the class ``owner``: no call of the project
        writes it (:mod:`mpcheck.project.uncalled`); None: something may, or the project says
        every module runs in half (a library: its users call what they like)."""
        if self.uses is None or self.setting or self.uses.method_reached(owner, name):
            return None
        text = f"nothing in the project calls `{owner}.{name}`"
        return HalfEvidence(UNREACHED, text)

    def flag_unset(self, owner: str, name: str) -> bool:
        """Whether nothing sets the constructor flag ``name`` of the class ``owner`` to a true
        value, so ``if self.name:`` never runs (:mod:`mpcheck.project.flags`); never in a
        library, whose users build its classes as they like."""
        return self.uses is not None and not self.setting and not self.uses.flag_set(owner, name)

    def handed(self, name: str) -> HalfEvidence:
        """A sampler or scheduler ``name`` of an application: the model outputs it steps are
        half only if the model that makes them is, which nothing here shows (a premise; in a
        library, its users' pipelines run it in half: no premise is stated there)."""
        text = f"latent: raises if the model whose outputs `{name}` steps runs in half"
        return HalfEvidence(PREMISE, text)

    def premise(self, name: str, node: cst.CSTNode | None = None) -> HalfEvidence:
        """The premise that ``name`` runs in half, naming what supports it (issue 36: "every
        half belief carries its evidence"): the project's opening of its world, or the half
        path that reaches the class; where that has a place, it is a related location at
        the class (``node``)."""
        text = f"latent: raises if `{name}` runs in half without autocast"
        found = self.uses.opening(name) if self.uses is not None else None
        if found is None or not found.text:
            return HalfEvidence(PREMISE, text, None, node, subject=name)
        place = found.place
        if place is not None and node is not None:
            self.elsewhere.setdefault(node, place)
        text = f"{text}; {found.text}"
        only = found.text if self.uses is not None and self.uses.premise_bfloat16(name) else None
        # (an installable package's users cast its models as it shows them cast: a half path
        # of its own it cannot name shows them casting some model, any of them perhaps; and
        # ``models-run-in-half`` says the project's users run every module in half)
        application = self.uses is not None and self.uses.application and not self.setting
        unseen = found.kind in UNSEEN and application and not self.open_world
        return HalfEvidence(
            PREMISE, text, place, node, subject=name, why=found.text, bfloat16=only, unseen=unseen
        )

    def _written(self, name: str) -> tuple[tuple[str, str], ...]:
        """Each half dtype some cast reaching the class ``name`` writes down, with the text
        saying so (the chain of classes and the cast)."""
        if self.uses is None:
            return ()
        found = ((d, self.uses.cast_to(name, d)) for d in ("float16", "bfloat16"))
        return tuple((d, _text(name, r)) for d, r in found if r is not None)

    def _decide(
        self, name: str, anchor: cst.CSTNode, bases: Sequence[str], pretrained: bool
    ) -> HalfEvidence:
        reach = self.uses.of(name) if self.uses is not None else None
        if reach is not None and reach.kind == CAST:
            self.elsewhere[anchor] = reach.place  # the cast: a related location in its file
            written = self._written(name)
            link = _link(name, reach)
            around = self.uses.under_autocast(name) if self.uses is not None else None
            only = self.uses.bfloat16_only(name) if self.uses is not None else None
            only16 = self.uses.float16_only(name) if self.uses is not None else None
            return HalfEvidence(
                CAST,
                _text(name, reach),
                reach.place,
                anchor,
                link,
                written=written,
                autocast=around,
                bfloat16=None if only is None else _text(name, only),
                float16_only=None if only16 is None else _text(name, only16),
                float16_activations=(
                    self.uses is not None and only16 is not None and not self.uses.autocasts
                ),
                autocast_cpu=around is not None and self._on_cpu(name),
            )
        library = _library(bases, pretrained)
        if library is not None and not self._own(name, reach):
            text = f"`{name}` is a `{library}`, which its users run in half"
            return HalfEvidence(LIBRARY, text, None, anchor)
        if self.setting:
            text = "the configuration says every module runs in half (`models-run-in-half`)"
            return HalfEvidence(SETTING, text, None, anchor)
        if reach is not None:
            self.elsewhere[anchor] = reach.place
            note = _link(name, reach)
            text = _text(name, reach)
            # (run only under autocast regions that all lower to bfloat16: no float16)
            bf16 = self.uses is not None and self.uses.autocast_bfloat16(name, reach)
            return HalfEvidence(
                reach.kind,
                text,
                reach.place,
                anchor,
                note,
                bfloat16=text if bf16 else None,
                autocast_cpu=reach.kind == AUTOCAST and self._on_cpu(name),
            )
        if self.uses is not None and not self.uses.reached(name):
            text = f"nothing in the project builds, imports or names `{name}`"
            return HalfEvidence(UNREACHED, text, None, anchor)
        found = self.uses.float32_text(name) if self.uses is not None else None
        if found is not None:  # (no half path reaches it: :meth:`ModelUses.float32_text`)
            return HalfEvidence(FLOAT32, found, None, anchor)
        around = self.uses.under_autocast(name) if self.uses is not None else None
        if around is not None:  # (a base whose every deriving class runs under autocast)
            return HalfEvidence(AUTOCAST, around, None, anchor, autocast_cpu=self._on_cpu(name))
        return self.premise(name, anchor)

    def _on_cpu(self, name: str) -> bool:
        return self.uses is not None and self.uses.autocast_on_cpu(name)

    def _own(self, name: str, reach: Reach | None) -> bool:
        """Whether an application's own evidence outranks a library base's contract: the
        contract says the library's users run the class in half, and in an application
        that shows its builds the project is those users. Its float32 builds (or autocast
        around every call) decide, and a class it never builds does not run."""
        if self.uses is None or not self.uses.application:
            return False
        if reach is not None:
            return reach.kind in (FLOAT32, AUTOCAST)
        return not self.uses.reached(name)


def _library(bases: Sequence[str], pretrained: bool) -> str | None:
    found = library_base(bases)
    return found or ("ModelMixin` or `PreTrainedModel" if pretrained else None)


def _link(name: str, reach: Reach) -> str:
    """``Block`` is built in ``Model``: what the class's own location adds to the place's
    note ("": nothing, the class itself is the one cast)."""
    if not reach.via:
        return ""
    return f"`{name}` is built in " + " in ".join(f"`{v}`" for v in reversed(reach.via))


def _text(name: str, reach: Reach) -> str:
    """``Block`` is built in ``Model``, which is cast ...: the chain from the evidence."""
    if not reach.via:
        return reach.place.text
    return f"{_link(name, reach)}; {reach.place.text}"
