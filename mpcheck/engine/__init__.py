"""The dtype-provenance engine: parts composed by :mod:`analysis`; imports only point downwards.

Read in this order: :mod:`frames` (what the walk carries), :mod:`reporting` (when a
site reaches the rules), :mod:`binding`, :mod:`promotion`, :mod:`buffers`, :mod:`aliases`
(with :mod:`tensor_use`: one :mod:`body_uses` walk) and :mod:`scripts` (pure helpers),
:mod:`base` (the walk's state and the recursion points every part reaches the others
through), then the parts, each given the parts it asks questions of:

- :mod:`autocast` (``Regions``): autocast regions and contexts;
- :mod:`functions` (``Definitions``): the file's classes and functions, their summaries;
- :mod:`modules` (``Modules``): modules, what they are built as, cast to and return;
- :mod:`casts` and :mod:`tensors` (``Casts``, ``Tensors``): what torch calls, casts and
  tensor methods do to dtypes, reading the table of :mod:`mpcheck.knowledge.ops`;
- :mod:`expressions` (``Expressions``): the expression evaluator;
- :mod:`statements` (``Statements``): the statement interpreter (frames, branches, loops, joins);
- :mod:`ambient` (``Ambient``): module methods walked again under a trainer's autocast;
- :mod:`emitter` (``SiteEmitter``): the sites the rules receive.
- :mod:`construction` (``Construction``): code that runs when the model is built, before
  any cast: evidence of float32 (:mod:`mpcheck.project.construction` finds it).

:mod:`analysis` (``FileAnalysis``) builds the parts and drives a file.
:mod:`training_loop` follows scalers and optimizers through the recursion points.

This package's ``__init__`` imports nothing, so importing one part never drags in the rest.
"""
