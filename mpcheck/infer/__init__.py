"""The dtype-provenance engine, one concern per module; imports only point downwards.

Read in this order: :mod:`frames` (what the walk carries), :mod:`reporting` (when a
site reaches the rules), :mod:`binding`, :mod:`promotion`, :mod:`buffers` and
:mod:`scripts` (pure helpers),
:mod:`base` (the walk's state and public interface), then the layers of the walk:
:mod:`autocast`, :mod:`functions`, :mod:`modules`, :mod:`tensors`,
:mod:`expressions`, :mod:`statements`, :mod:`ambient` (module methods walked again under
a trainer's autocast), and :mod:`analysis`, which drives a file.
:mod:`training_loop` follows scalers and optimizers through the public interface.

This package's ``__init__`` imports nothing, so importing one part never drags in the rest.
"""
