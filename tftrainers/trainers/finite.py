"""Refusing an update whose losses or new weights are not finite (inside the compiled call).

    def _update_all(...):                        # a compiled update
        kept = FiniteGuard(variables)            # every variable the update changes
        saved = kept.snapshot()                  # first thing in the graph
        ...gradient steps...
        finite = kept.restore_unless_finite(saved, losses)   # last thing: bool scalar
        return stats, weights, finite

    if not finite: raise NonFiniteUpdateError(...)            # in Python, after the call

One NaN in a gradient spreads to every weight in a step or two, and from there into each
checkpoint that follows. The guard keeps the weights AND the optimizer state (Adam's
moments and step count) from before the update when anything it produced is NaN or inf, so
the run can stop with its last finite weights and save them. The snapshot lives only in
the graph: no read-back per update.
"""
from __future__ import annotations

from typing import Dict, Mapping, Sequence

import numpy as np
import tensorflow as tf


class NonFiniteUpdateError(RuntimeError):
    """An update produced NaN or inf and was undone; one line for the user."""


class FiniteGuard:
    """Snapshots and, when needed, restores a fixed list of variables in a graph.

    Args:
        variables: every variable the update may change (duplicates are dropped).
    """

    def __init__(self, variables: Sequence[tf.Variable]):
        seen, unique = set(), []
        for variable in variables:
            if id(variable) not in seen:
                seen.add(id(variable))
                unique.append(variable)
        self.variables = unique

    def snapshot(self):
        """The variables' current values (graph tensors)."""
        return [tf.identity(tf.convert_to_tensor(variable)) for variable in self.variables]

    def restore_unless_finite(self, saved, tensors: Sequence[tf.Tensor]) -> tf.Tensor:
        """Puts ``saved`` back unless ``tensors`` (losses) and every floating variable are
        finite; returns whether they were (a bool scalar)."""
        checks = [tf.reduce_all(tf.math.is_finite(t)) for t in tensors]
        checks += [tf.reduce_all(tf.math.is_finite(tf.convert_to_tensor(v)))
                   for v in self.variables if tf.as_dtype(v.dtype).is_floating]
        finite = tf.reduce_all(tf.stack(checks)) if checks else tf.constant(True)

        def restore():
            for variable, value in zip(self.variables, saved):
                variable.assign(value)
            return tf.constant(False)

        return tf.cond(finite, lambda: tf.constant(True), restore)


def refusal_message(step: int, stats: Mapping[str, float]) -> str:
    """Why the update at ``step`` was refused: the first non-finite stat, or the weights."""
    bad = [name for name, value in stats.items() if not np.isfinite(value)]
    what = f"{bad[0]} is {stats[bad[0]]}" if bad else "the new weights hold NaN or inf"
    return (f"the update at step {step} was refused: {what}; the weights and optimizer state "
            f"from before it are kept (are rewards or observations huge, or the learning "
            f"rate too high?)")


def variables_of(trackables: Mapping[str, object]) -> Dict[int, tf.Variable]:
    """Every variable of ``trackables`` (tf.Modules, Keras layers), by id."""
    return {id(v): v for obj in trackables.values() for v in getattr(obj, "variables", ())}
