"""Lowering: ``pipeline.py`` lists the passes in order (bound inference and loop-nest
building, simplification, unrolling, flattening, vectorization); each pass is a pure
function over the loop IR in its own module."""
