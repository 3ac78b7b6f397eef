"""Everything a rule may import: ``from mpcheck.api import Rule, Severity, Fix, Edit, ...``.

A rule reads like its specification because it only asks questions: what a call is
(:class:`CallSite` and the other sites), what the engine knows of a value (:class:`Fact`,
its :class:`Prec` and :class:`Cause`), what torch does (the tables below) and which torch the
project supports (:attr:`RuleContext.target_torch`, :meth:`RuleContext.torch_has`), and it answers
with :meth:`Rule.report`, optionally with a :class:`Fix` made of :class:`Edit` s. Nothing
here lets a rule derive dtypes itself; when a rule needs a fact the engine lacks, the engine
learns it. Third-party rules (entry point group ``mpcheck.rules``) use the same names.
"""

from __future__ import annotations

from mpcheck.codes import INTERNAL_ERROR, INVALID_SYNTAX, UNUSED_NOQA
from mpcheck.diagnostics import Severity
from mpcheck.engine.averages import STEP_METHODS, accumulator, literal
from mpcheck.engine.binding import input_names
from mpcheck.engine.choices import Branches, Choice, scaler_choices
from mpcheck.engine.evidence import AUTOCAST as EVIDENCE_AUTOCAST
from mpcheck.engine.evidence import CAST as EVIDENCE_CAST
from mpcheck.engine.evidence import LIBRARY as EVIDENCE_LIBRARY
from mpcheck.engine.evidence import SETTING as EVIDENCE_SETTING
from mpcheck.engine.facts import (
    DEFAULT_FLOAT32,
    Cause,
    Fact,
    Kind,
    Origin,
    Prec,
    one_path_factory,
)
from mpcheck.engine.guards import fp16_run_kept
from mpcheck.engine.phases import (
    PhaseProduct,
    TimestepCast,
    phase_product,
    timestep_cast,
)
from mpcheck.engine.sites import (
    Autocast,
    CallSite,
    ClassSite,
    Decorator,
    FunctionSite,
    InnerCall,
    KeptResidualLoad,
    Operand,
    Owner,
    Replacement,
    ReturnSite,
    Scope,
    SetItemSite,
    StoreSite,
    items,
)
from mpcheck.engine.training import (
    FP16_MIN_NORMAL,
    FP16_TINY,
    Action,
    Optimizer,
    OptimizerUse,
    Scaler,
    TrainingSite,
    can_be_fp16,
    never_fp16,
    to_fp16,
)
from mpcheck.knowledge.autocast_ops import policy as autocast_policy
from mpcheck.knowledge.kernels import FFT, NUMPY, SOLVER, Kernelless, kernelless
from mpcheck.knowledge.torch_api import (
    AUTOGRAD_FUNCTIONS,
    CAST_METHODS,
    CHECKED_FILL_FACTORIES,
    CHECKED_SCALAR_WRITES,
    CONTAINER_LAYERS,
    DTYPE_STRICT_WRITES,
    LIBRARY_LAYERS,
    LOSS_LAYERS,
    PASS_THROUGH_LAYERS,
    TAKES_DTYPE,
    UNCHECKED_SCALAR_OPS,
    OpKind,
    is_kernel,
)
from mpcheck.output.module_dtype import module_dtype
from mpcheck.project.callables import SplitRun
from mpcheck.project.names import CANONICAL, children, descendants, dotted
from mpcheck.ruleset.hooks import HOOKS
from mpcheck.ruleset.rule import NodeEdit, NodeFix, Rule, RuleContext

# A fix replaces nodes' source: the rule-side names of what reporters see as positioned edits.
Fix = NodeFix
Edit = NodeEdit

__all__ = [
    "AUTOGRAD_FUNCTIONS",
    "input_names",
    "is_kernel",
    "module_dtype",
    "children",
    "descendants",
    "CANONICAL",
    "CAST_METHODS",
    "CHECKED_FILL_FACTORIES",
    "CHECKED_SCALAR_WRITES",
    "CONTAINER_LAYERS",
    "DEFAULT_FLOAT32",
    "DTYPE_STRICT_WRITES",
    "STEP_METHODS",
    "accumulator",
    "literal",
    "EVIDENCE_AUTOCAST",
    "EVIDENCE_CAST",
    "EVIDENCE_LIBRARY",
    "EVIDENCE_SETTING",
    "FFT",
    "NUMPY",
    "SOLVER",
    "FP16_MIN_NORMAL",
    "FP16_TINY",
    "HOOKS",
    "INTERNAL_ERROR",
    "INVALID_SYNTAX",
    "UNUSED_NOQA",
    "LIBRARY_LAYERS",
    "LOSS_LAYERS",
    "PASS_THROUGH_LAYERS",
    "TAKES_DTYPE",
    "UNCHECKED_SCALAR_OPS",
    "Action",
    "Autocast",
    "Branches",
    "Choice",
    "CallSite",
    "Cause",
    "one_path_factory",
    "scaler_choices",
    "ClassSite",
    "Decorator",
    "Edit",
    "Fact",
    "Fix",
    "FunctionSite",
    "InnerCall",
    "KeptResidualLoad",
    "Kernelless",
    "Kind",
    "OpKind",
    "Operand",
    "Optimizer",
    "OptimizerUse",
    "Origin",
    "Owner",
    "Prec",
    "Replacement",
    "SplitRun",
    "ReturnSite",
    "Rule",
    "RuleContext",
    "Scaler",
    "SetItemSite",
    "StoreSite",
    "Scope",
    "Severity",
    "TrainingSite",
    "autocast_policy",
    "kernelless",
    "phase_product",
    "timestep_cast",
    "PhaseProduct",
    "TimestepCast",
    "can_be_fp16",
    "dotted",
    "fp16_run_kept",
    "items",
    "never_fp16",
    "to_fp16",
]
