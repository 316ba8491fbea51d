"""The renderer protocol: what the Learner tells the output of a run, and when."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: The methods the Learner calls on a renderer, in the order of a run's first calls.
RENDERER_METHODS = ("note", "start", "step", "epoch_end", "close", "finish")


@dataclass(frozen=True)
class StepProgress:
    """Where a run stands after one batch of training or validation (``Renderer.step``).

    - ``split``: ``"train"`` or ``"valid"``.
    - ``epoch``: the epoch in progress, from 1; ``num_epochs``: the run's epochs.
    - ``iteration``: the batch just done within the split's epoch, from 1; ``total``: the
      split's batches in an epoch (``None`` for a loader without ``len``).
    - ``values``: each metric's running average over the epoch so far, by metric name;
      ``step_values``: each metric's value on this batch alone.
    - ``remaining``: the run's remaining time in seconds, estimated from the time its steps took
      so far (``math.inf`` during the first steps, when it is not known yet).
    - ``lr``: the learning rate of a training step (``None`` while validating).
    """

    split: str
    epoch: int
    num_epochs: int
    iteration: int
    total: int | None
    values: dict[str, float] = field(default_factory=dict)
    step_values: dict[str, float] = field(default_factory=dict)
    remaining: float = math.inf
    lr: float | None = None


class Renderer:
    """The output of a ``Learner``: give one to ``LearnerBuilder.renderer(obj)``.

    ``fit`` calls, in this order: ``note(line)`` for each line to say before the run,
    ``start(num_epochs)``, then for each epoch ``step(progress)`` after every training batch
    and then every validation batch, ``epoch_end(split, epoch, values)`` once per split after the
    epoch's validation (train first); at the end, or when the run stops early (Ctrl-C, an
    error), ``close()``; then, after a run that completed, ``finish(summary)``. A resumed run
    starts its steps at the batch it resumes from.

    A base class rather than a ``typing.Protocol`` because every method has a sensible default,
    doing nothing: a renderer subclasses ``Renderer`` and overrides only what it shows (a line
    per epoch needs ``epoch_end`` alone), and methods added to the protocol later come with a
    default, so existing renderers keep working. ``Renderer()`` itself prints nothing
    (``LearnerBuilder.output("none")``). The Learner also takes an object that does not
    subclass it, provided it has all of the methods; ``PlainProgress`` and the rich
    ``Dashboard`` are the built-in renderers.

    The methods run in the training thread, between steps: a slow one slows training.
    """

    def note(self, line: str) -> None:
        """A line said once, before ``start`` (what the Learner chose, such as whether the
        steps are captured)."""

    def start(self, num_epochs: int) -> None:
        """The run begins; it runs until epoch ``num_epochs`` (also when resumed mid-run)."""

    def step(self, progress: StepProgress) -> None:
        """A batch of training or validation is done: ``progress`` says where the run is."""

    def epoch_end(self, split: str, epoch: int, values: dict[str, float]) -> None:
        """The epoch's final metric values of ``split`` (``"train"`` or ``"valid"``), by name;
        metrics that measured nothing this epoch are left out."""

    def close(self) -> None:
        """The run stopped, completed or not (called from a ``finally``): release the terminal,
        files or threads the renderer holds."""

    def finish(self, summary: str) -> None:
        """The run completed: ``summary`` is the table of each split's metrics, last and best
        epoch values (``Learner.summary()``). Not called when the run was interrupted."""


def check_renderer(renderer: object) -> None:
    """Raise ``TypeError`` unless ``renderer`` is an object with every method of ``Renderer``,
    naming the ones it lacks."""
    if isinstance(renderer, type):
        raise TypeError(f"a renderer must be an instance, got the class {renderer.__name__}: "
                        f"pass {renderer.__name__}(...)")
    missing = [name for name in RENDERER_METHODS if not callable(getattr(renderer, name, None))]
    if missing:
        raise TypeError(
            f"a renderer needs the methods {', '.join(RENDERER_METHODS)}; "
            f"{type(renderer).__name__} lacks {', '.join(missing)} (subclass "
            f"burnish.train.Renderer to get a default that does nothing for each)")
