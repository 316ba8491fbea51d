"""The Learner: epochs of training and validation with metrics, checkpoints and resuming."""

from __future__ import annotations

import contextlib
import copy
import math
import shutil
import signal
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import burnish as bn
from burnish.dtype import get_dtype
from burnish.optim import ConstantLr, GradientsAccumulator, GradScaler, LrScheduler
from burnish.train import data_parallel
from burnish.train.checkpoint import Checkpointer, CheckpointInfo
from burnish.train.early_stopping import EarlyStopping
from burnish.train.metric import Metric, StepInfo
from burnish.train.metric_log import MetricLog
from burnish.train.progress import PlainProgress, summary_table
from burnish.train.renderer import Renderer, StepProgress, check_renderer
from burnish.train.step import StepFn, classification_step


class TrainingInterrupted(KeyboardInterrupt):
    """Raised by ``fit`` after Ctrl-C, once the current step ended and a checkpoint was written.

    ``model`` is the model as trained so far and ``checkpoint`` the folder to resume from.
    """

    def __init__(self, model: Any, checkpoint: Path | None):
        super().__init__(f"training interrupted; checkpoint in {checkpoint}")
        self.model = model
        self.checkpoint = checkpoint


@dataclass
class Position:
    """Where a run stands: the epoch in progress (from 1), its training batches done, optimizer
    steps taken, and whether the epoch's validation is done too."""

    epoch: int = 1
    iteration: int = 0
    step: int = 0
    epoch_done: bool = False


class Learner:
    """Trains a model over epochs; made by ``LearnerBuilder.build``.

    Each training step seeds burnish's random generators from ``seed`` and the step's number
    (so dropout is the same in a resumed run), runs ``train_step(model, batch)``, backpropagates
    ``output.loss``, and every ``grads_accumulation`` batches (and at the epoch's end) steps the
    optimizer with the schedule's rate. Validation runs ``valid_step(model.valid(), batch)``.

    With ``capture`` (the default) and a backend that can capture (``burnish.capture``), the
    training step (forward, backward and the optimizer's update together, when gradients are
    not accumulated) and the validation step are captured and replayed; an optimizer with a
    ``capturable`` flag (Adam, AdamW) gets it set, and a changing schedule's rate is passed to
    the step as a tensor. The first log line says whether capture is on. A step that cannot be
    captured runs eagerly, with the warning that says why.

    What the run shows goes to ``renderer`` (a ``Renderer``: see its docstring for the calls
    and their order).

    With a ``communicator`` (``LearnerBuilder.distributed``, or a process started by a launcher)
    the model trains data-parallel: every rank starts from rank 0's weights, each step's
    gradients are averaged over the ranks during the backward pass (``GradientReducer``),
    epoch metrics are summed over the ranks' samples, rank 0 alone renders and writes logs and
    checkpoints, every rank resumes from them, and early stopping decides alike on every rank.
    Give each rank its share of the data with ``burnish.distributed.ShardedLoader``. Steps are
    not captured then.
    """

    def __init__(self, run_dir: Path, model: Any, optimizer: Any, scheduler: LrScheduler, *,
                 train_metrics: Sequence[Metric], valid_metrics: Sequence[Metric],
                 num_epochs: int, grads_accumulation: int, checkpointer: Checkpointer | None,
                 early_stopping: EarlyStopping | None, train_step: StepFn, valid_step: StepFn,
                 seed: int, renderer: Renderer, capture: bool = True,
                 autocast: bn.DType | None = None, scaler: GradScaler | None = None,
                 communicator: Any = None):
        self.communicator = communicator
        self._reducer: Any = None
        self.rank = 0 if communicator is None else communicator.rank
        self.run_dir = run_dir
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.train_metrics = list(train_metrics)
        self.valid_metrics = list(valid_metrics)
        self.num_epochs = num_epochs
        self.grads_accumulation = grads_accumulation
        self.checkpointer = checkpointer
        self.early_stopping = early_stopping
        #: Mixed precision: the dtype the steps' forward passes run under (``burnish.autocast``)
        #: and the float16 loss scaler.
        self.autocast = autocast
        self.scaler = scaler if scaler is not None and scaler.enabled else None
        self.train_step = _autocast(train_step, autocast)
        self.valid_step = _autocast(valid_step, autocast)
        self.seed = seed
        self.renderer = renderer
        self.capture = capture
        self._captured: tuple[Any, Any] | None = None  # the captured training and valid steps
        self.log = MetricLog(self._log_dir())
        self.position = Position()
        self._stop_requested = False
        self._resumed_metrics: list[dict[str, Any]] | None = None

    # -- resuming --------------------------------------------------------------------------------

    def resume(self, checkpoint: CheckpointInfo | None = None) -> bool:
        """Load the latest checkpoint (or ``checkpoint``) of the run; False when there is none."""
        if self.checkpointer is None:
            raise ValueError("resuming needs checkpoints: call LearnerBuilder.checkpoint()")
        info = checkpoint or self.checkpointer.latest()
        if info is None:
            return False
        self.model = self.checkpointer.load(info, self.model, self.optimizer, self.scheduler)
        self.position = Position(info.epoch, info.iteration, info.step, info.epoch_done)
        if self.early_stopping is not None:
            self.early_stopping.load_state(info.state.get("early_stopping", {}))
        if self.scaler is not None and "grad_scaler" in info.state:
            self.scaler.load_state_dict(info.state["grad_scaler"])
        self.log.rewind(info.epoch, info.iteration, info.epoch_done)
        self._resumed_metrics = info.state.get("train_metrics")
        return True

    # -- the loop --------------------------------------------------------------------------------

    def fit(self, train_loader: Iterable[Any], valid_loader: Iterable[Any] | None = None,
            resume: bool = False) -> Any:
        """Train for the remaining epochs and return the trained model.

        ``resume=True`` continues from the latest checkpoint when there is one; a run that starts
        from scratch clears the ``logs/`` and ``checkpoints/`` of ``run_dir``. Ctrl-C (SIGINT,
        in the main thread) finishes the current optimizer step, writes a checkpoint and raises
        ``TrainingInterrupted``; a second Ctrl-C interrupts at once.
        """
        if not (resume and self.resume()) and self.position == Position():
            self._start_fresh()
        if self.communicator is not None:
            self.model = self.communicator.broadcast_module(self.model)
            self._reducer = data_parallel.reducer(self.communicator, self.model)
        start = self.position
        epoch = start.epoch + 1 if start.epoch_done else start.epoch
        self.renderer.note(self._prepare_capture())
        self.renderer.start(self.num_epochs)
        self._clock = _RunClock(self, train_loader, valid_loader)
        with self._sigint_handler():
            try:
                while epoch <= self.num_epochs:
                    skip = start.iteration if epoch == start.epoch and not start.epoch_done else 0
                    self._train_epoch(epoch, train_loader, skip)
                    if valid_loader is not None:
                        self._valid_epoch(epoch, valid_loader)
                    stop = self._end_epoch(epoch)
                    if stop:
                        break
                    epoch += 1
            finally:
                self.log.close()
                self.renderer.close()
        self.renderer.finish(self.summary())
        return self.model

    def _prepare_capture(self) -> str:
        """Capture the steps where the backend can; what to tell the user about it."""
        self._captured = None
        if not self.capture:
            return "capture: off (LearnerBuilder.capture(False))"
        if self.communicator is not None:
            return (f"capture: off (data-parallel: rank {self.rank} of "
                    f"{self.communicator.world_size}; gradients are reduced during backward)")
        params = self.model.params() if hasattr(self.model, "params") else []
        if not params:
            return "capture: off (the model has no parameters to find its device by)"
        device = params[0].device
        if device.backend.capturer(device) is None:
            return (f"capture: off (backend {device.backend.name!r} cannot capture; the steps "
                    f"run eagerly)")
        if self.grads_accumulation > 1:
            return "capture: off (gradients are accumulated over several batches)"
        if self.scaler is not None:
            return ("capture: off (float16 loss scaling reads whether the gradients are finite "
                    "on every step)")
        if hasattr(self.optimizer, "capturable"):
            self.optimizer.capturable = True
        self._device = device
        self._constant_rate = isinstance(self.scheduler, ConstantLr)
        self._captured = (bn.capture(_training(self.train_step, self.optimizer)),
                          bn.capture(self.valid_step))
        return (f"capture: on ({device.backend.name}): the training and validation steps are "
                f"recorded once and replayed")

    def _rate(self, lr: float) -> Any:
        """The learning rate as the captured step takes it: a number when it never changes,
        else a tensor (a changing number would make every step a new signature)."""
        if self._constant_rate:
            return lr
        native = self._device.native  # the optimizer steps the inner (autodiff's) tensors
        return bn.Tensor.full([], float(lr), device=native if isinstance(native, bn.Device)
                              else self._device)

    def _log_dir(self) -> Path:
        """Where this rank's metric logs go: ``run_dir`` (rank 0's ``logs/``), or the rank's
        own folder under it for the other ranks (their step values are their shares')."""
        return self.run_dir if self.rank == 0 else self.run_dir / "ranks" / str(self.rank)

    def _start_fresh(self) -> None:
        self.log.close()
        self.log = MetricLog(self._log_dir())
        if self.rank == 0:
            for folder in (self.log.directory, self.run_dir / "checkpoints"):
                shutil.rmtree(folder, ignore_errors=True)
        if self.communicator is not None:
            self.communicator.barrier()  # no rank writes before rank 0 has cleared the run

    def _train_epoch(self, epoch: int, loader: Iterable[Any], skip: int) -> None:
        _set_epoch(loader, epoch)
        for metric in self.train_metrics:
            metric.clear()
        if skip and self._resumed_metrics:
            for metric, state in zip(self.train_metrics, self._resumed_metrics):
                metric.load_state(state)
        total = _length(loader)
        accumulator = GradientsAccumulator()
        pending = 0
        iteration = skip
        first = 1
        if skip and hasattr(loader, "load_state_dict"):  # a DataLoader starts at a position
            loader.load_state_dict({"epoch": epoch, "position": skip})
            first = skip + 1
        for iteration, batch in enumerate(loader, first):
            if iteration <= skip:  # other iterables: read the batches done and leave them
                continue
            # Each rank its own draws (dropout masks), as one process draws one per sample.
            bn.seed(self.seed * 1_000_003 + self.position.step * 1_009 + pending
                    + self.rank * 7_919)
            last = total is not None and iteration == total
            lr = self.scheduler.lr(self.scheduler.iteration)
            if self._captured is not None:  # forward, backward and update as one captured step
                self.model, output = self._captured[0](self.model, batch,
                                                       self._rate(self.scheduler.step()))
                self.position.step += 1
            else:
                output = self.train_step(self.model, batch)
                loss = output.loss if self.scaler is None else self.scaler.scale(output.loss)
                if self._reducer is not None and self.grads_accumulation == 1:
                    with self._reducer.overlap(self.model):
                        grads = loss.backward()
                    grads = self._reducer.gradients(grads)
                else:
                    grads = loss.backward()
                pending += 1
                if pending == self.grads_accumulation or last:
                    if self.grads_accumulation > 1:
                        accumulator.accumulate(self.model, grads)
                        grads = accumulator.grads()
                        if self.communicator is not None:
                            grads = self.communicator.all_reduce_gradients(grads, self.model)
                    self._optimizer_step(grads)
                    pending = 0
                else:
                    accumulator.accumulate(self.model, grads)
            self.position.epoch, self.position.iteration = epoch, iteration
            self.position.epoch_done = False
            info = StepInfo(epoch, iteration, lr)
            self._update("train", self.train_metrics, output, batch, info, total)
            if self._stop_requested and pending == 0:
                self._interrupt()
        if pending:  # a loader without len: step on what the epoch's last batches gave
            grads = accumulator.grads()
            if self.communicator is not None:
                grads = self.communicator.all_reduce_gradients(grads, self.model)
            self._optimizer_step(grads)
        self.position.iteration = iteration

    def _optimizer_step(self, grads: Any) -> None:
        """The optimizer's update (through the loss scaler, which skips it on inf or NaN)."""
        if self.scaler is None:
            self.model = self.optimizer.step(self.scheduler.step(), self.model, grads)
        else:
            self.model = self.scaler.step(self.optimizer, self.scheduler.step(), self.model,
                                          grads)
            self.scaler.update()
        self.position.step += 1

    def _valid_epoch(self, epoch: int, loader: Iterable[Any]) -> None:
        _set_epoch(loader, epoch)
        for metric in self.valid_metrics:
            metric.clear()
        model = self.model.valid() if hasattr(self.model, "valid") else self.model
        total = _length(loader)
        valid_step = self.valid_step if self._captured is None else self._captured[1]
        for iteration, batch in enumerate(loader, 1):
            output = valid_step(model, batch)
            self._update("valid", self.valid_metrics, output, batch,
                         StepInfo(epoch, iteration, None), total)
            if self._stop_requested:
                break  # the epoch's checkpoint is written without validation metrics

    def _update(self, split: str, metrics: Sequence[Metric], output: Any, batch: Any,
                info: StepInfo, total: int | None) -> None:
        """Update and log the metrics of one step, then tell the renderer."""
        values, step_values = {}, {}
        for metric in metrics:
            value = metric.update(output, batch, info)
            self.log.log_step(split, metric.name, info.epoch, info.iteration, value)
            values[metric.name], step_values[metric.name] = metric.value(), value
        self._clock.tick()
        self.renderer.step(StepProgress(split, info.epoch, self.num_epochs, info.iteration,
                                        total, values, step_values, self._clock.remaining(),
                                        info.lr))

    def _end_epoch(self, epoch: int) -> bool:
        interrupted = self._stop_requested
        epoch_values: dict[str, float] = {}
        splits = [("train", self.train_metrics)]
        if not interrupted:
            splits.append(("valid", self.valid_metrics))
        for split, metrics in splits:
            if self.communicator is not None:  # the epoch's values over every rank's samples
                summed = data_parallel.sum_states(self.communicator,
                                                  [metric.state() for metric in metrics])
                for metric, state in zip(metrics, summed):
                    metric.load_state(state)
            values = {metric.name: metric.value() for metric in metrics if metric.weight}
            if values:
                self.log.log_epoch(split, values)
                self.renderer.epoch_end(split, epoch, values)
            epoch_values.update({f"{split}/{name}": value for name, value in values.items()})
        if interrupted:
            self._interrupt()
        self.position.epoch_done = True
        stop = False
        if self.early_stopping is not None:
            stop = self.early_stopping.update(epoch_values)
            if self.communicator is not None:
                stop = data_parallel.agree(self.communicator, stop)
        self._checkpoint(epoch_values)
        return stop

    def _checkpoint(self, metrics: dict[str, float]) -> Path | None:
        if self.checkpointer is None:
            return None
        position = self.position
        suffix = "" if position.epoch_done else f"-iteration-{position.iteration}"
        state: dict[str, Any] = {}
        if self.early_stopping is not None:
            state["early_stopping"] = self.early_stopping.state()
        if self.scaler is not None:
            state["grad_scaler"] = self.scaler.state_dict()
        if not position.epoch_done:  # the epoch's averages go on from here when resumed
            state["train_metrics"] = [metric.state() for metric in self.train_metrics]
        info = CheckpointInfo(f"epoch-{position.epoch}{suffix}", position.epoch,
                              position.iteration, position.step, position.epoch_done,
                              {k: v for k, v in metrics.items() if math.isfinite(v)}, state)
        if self.communicator is None:
            return self.checkpointer.save(info, self.model, self.optimizer, self.scheduler)
        # Rank 0 writes; the others wait for it, so that every rank can resume from it.
        path = (self.checkpointer.save(info, self.model, self.optimizer, self.scheduler)
                if self.rank == 0 else None)
        self.communicator.barrier()
        return path

    def _interrupt(self) -> None:
        path = self._checkpoint({})
        self.log.close()
        raise TrainingInterrupted(self.model, path)

    def request_stop(self) -> None:
        """Stop after the current optimizer step, as Ctrl-C does (for another thread or a
        callback)."""
        self._stop_requested = True

    @contextlib.contextmanager
    def _sigint_handler(self) -> Iterator[None]:
        self._stop_requested = False
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum: int, frame: Any) -> None:
            if self._stop_requested:
                raise KeyboardInterrupt
            self._stop_requested = True

        previous = signal.signal(signal.SIGINT, handler)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def summary(self) -> str:
        """The table of every split's metrics (last and best epoch values), and the steps the
        loss scaler skipped, if it skipped any."""
        better = {m.name: m.higher_is_better for m in self.train_metrics + self.valid_metrics}
        table = summary_table(self.log.epochs, better)
        if self.scaler is not None and self.scaler.skipped_steps:
            table += (f"\nfloat16 loss scaling: {self.scaler.skipped_steps} steps skipped (inf "
                      f"or NaN gradients); scale now {self.scaler.get_scale():g}")
        return table


class _RunClock:
    """Estimates the run's remaining time from the time its steps took so far."""

    def __init__(self, learner: Learner, train: Iterable[Any], valid: Iterable[Any] | None):
        train_total = _length(train) or 0
        valid_total = (_length(valid) or 0) if valid is not None else 0
        position = learner.position
        epochs_left = learner.num_epochs - position.epoch + (0 if position.epoch_done else 1)
        done_in_epoch = 0 if position.epoch_done else position.iteration
        self.left = max(epochs_left * (train_total + valid_total) - done_in_epoch, 0)
        self.started = time.monotonic()
        self.done = 0

    def tick(self) -> None:
        self.done += 1
        self.left = max(self.left - 1, 0)

    def remaining(self) -> float:
        if self.done < 3:  # the first steps (warm-up, first batches) say little
            return math.inf
        return (time.monotonic() - self.started) / self.done * self.left


def _training(train_step: StepFn, optimizer: Any) -> Any:
    """One whole training step, as ``burnish.capture`` records it: forward, backward and the
    optimizer's update; returns the new model and the step's output."""

    def train(model: Any, batch: Any, lr: Any) -> tuple[Any, Any]:
        output = train_step(model, batch)
        grads = output.loss.backward()
        return optimizer.step(lr, model, grads), output

    return train


def _autocast(step: StepFn, dtype: bn.DType | None) -> StepFn:
    """``step`` with its forward pass under ``burnish.autocast(dtype)`` (``step`` itself
    without a dtype)."""
    if dtype is None:
        return step

    def autocast_step(model: Any, batch: Any) -> Any:
        with bn.autocast(dtype):
            return step(model, batch)

    return autocast_step


def _set_epoch(loader: Any, epoch: int) -> None:
    if hasattr(loader, "set_epoch"):
        loader.set_epoch(epoch)


def _length(loader: Any) -> int | None:
    try:
        return len(loader)
    except TypeError:
        return None


class LearnerBuilder:
    """Configures a ``Learner`` (Burn's ``LearnerBuilder``); every method returns the builder.

    ``run_dir`` receives ``checkpoints/`` and ``logs/``.
    """

    def __init__(self, run_dir: str | Path):
        self.run_dir = Path(run_dir)
        self._train_metrics: list[Metric] = []
        self._valid_metrics: list[Metric] = []
        self._num_epochs = 1
        self._grads_accumulation = 1
        self._checkpoint: dict[str, Any] | None = None
        self._early_stopping: EarlyStopping | None = None
        self._train_step: StepFn = classification_step
        self._valid_step: StepFn = classification_step
        self._seed = 0
        self._output: str | Renderer = "auto"
        self._capture = True
        self._autocast: bn.DType | None = None
        self._scaler: GradScaler | None = None
        self._communicator: Any = None
        self._distributed: bool | None = None

    def distributed(self, communicator: Any = None, enabled: bool = True) -> LearnerBuilder:
        """Train data-parallel over ``communicator`` (a ``burnish.distributed.Communicator``;
        by default ``burnish.distributed.init()``, the job the process was started in).
        Without this call a process started by a launcher of several ranks (``WORLD_SIZE``,
        ``OMPI_COMM_WORLD_SIZE``, ``PMI_SIZE`` or ``SLURM_NTASKS`` above 1) joins its job at
        ``build``; ``distributed(enabled=False)`` trains alone even then."""
        self._communicator = communicator
        self._distributed = bool(enabled)
        return self

    def metrics(self, *metrics: Metric) -> LearnerBuilder:
        """Track ``metrics`` on both splits (each split gets its own copy)."""
        self._train_metrics += [copy.deepcopy(m) for m in metrics]
        self._valid_metrics += [copy.deepcopy(m) for m in metrics]
        return self

    def train_metrics(self, *metrics: Metric) -> LearnerBuilder:
        """Track ``metrics`` while training only."""
        self._train_metrics += metrics
        return self

    def valid_metrics(self, *metrics: Metric) -> LearnerBuilder:
        """Track ``metrics`` while validating only."""
        self._valid_metrics += metrics
        return self

    def num_epochs(self, num_epochs: int) -> LearnerBuilder:
        if num_epochs < 1:
            raise ValueError(f"num_epochs must be at least 1, got {num_epochs}")
        self._num_epochs = num_epochs
        return self

    def grads_accumulation(self, steps: int) -> LearnerBuilder:
        """Sum the gradients of ``steps`` batches before each optimizer step."""
        if steps < 1:
            raise ValueError(f"grads_accumulation must be at least 1, got {steps}")
        self._grads_accumulation = steps
        return self

    def checkpoint(self, keep_last: int = 2, best_by: str | None = None) -> LearnerBuilder:
        """Write a checkpoint after each epoch (and on Ctrl-C) under ``run_dir/checkpoints``,
        keeping the ``keep_last`` newest and the best by ``best_by`` (``"valid/loss"``; a bare
        name means the validation split's)."""
        self._checkpoint = {"keep_last": keep_last, "best_by": best_by}
        return self

    def early_stopping(self, metric: str, patience: int, mode: str = "auto",
                       min_delta: float = 0.0) -> LearnerBuilder:
        """Stop when ``metric`` (``"valid/loss"``; a bare name means the validation split's)
        has not improved for ``patience`` epochs; ``mode`` is ``"min"``, ``"max"`` or ``"auto"``
        (the metric's own direction)."""
        self._early_stopping = EarlyStopping(_qualified(metric), patience, mode, min_delta)
        return self

    def step(self, train_step: StepFn, valid_step: StepFn | None = None) -> LearnerBuilder:
        """Use ``train_step(model, batch)`` (and ``valid_step``, the same by default) instead of
        ``model.forward_classification(batch)``."""
        self._train_step = train_step
        self._valid_step = valid_step or train_step
        return self

    def seed(self, seed: int) -> LearnerBuilder:
        self._seed = seed
        return self

    def capture(self, enabled: bool = True) -> LearnerBuilder:
        """Capture the training and validation steps where the backend can (the default; see
        ``burnish.capture``); ``capture(False)`` runs every step eagerly."""
        self._capture = bool(enabled)
        return self

    def mixed_precision(self, dtype: bn.DType | str = "bfloat16",
                        scaler: GradScaler | None = None) -> LearnerBuilder:
        """Train in mixed precision: the training and validation steps run under
        ``burnish.autocast(dtype)`` (products and convolutions in ``dtype``, float32 weights and
        reductions; see the book's mixed-precision page). ``"bfloat16"`` needs nothing else;
        ``"float16"`` scales the loss with ``scaler`` (a ``burnish.optim.GradScaler``; a default
        one when not given), whose step is skipped on inf or NaN gradients and whose state the
        checkpoints keep. A scaler reads the gradients' verdict every step, so those steps are
        not captured."""
        low = get_dtype(dtype)
        if low.name not in ("bfloat16", "float16"):
            raise ValueError(f"mixed_precision takes bfloat16 or float16, got {low.name}")
        if scaler is not None and not isinstance(scaler, GradScaler):
            raise TypeError(f"mixed_precision's scaler must be a burnish.optim.GradScaler, got "
                            f"{type(scaler).__name__}")
        self._autocast = low
        self._scaler = scaler if scaler is not None else (
            GradScaler() if low.name == "float16" else None)
        return self

    def output(self, kind: str) -> LearnerBuilder:
        """A built-in output: ``"auto"`` (a dashboard on a terminal when rich is installed, else
        plain lines), ``"plain"``, ``"dashboard"`` or ``"none"``. ``renderer(obj)`` gives one of
        your own instead."""
        if not isinstance(kind, str):
            raise TypeError(f"output takes auto, plain, dashboard or none, got a "
                            f"{type(kind).__name__}: give a renderer of your own to "
                            f"LearnerBuilder.renderer()")
        if kind not in ("auto", "plain", "dashboard", "none"):
            raise ValueError(f"output must be auto, plain, dashboard or none, got {kind!r}")
        self._output = kind
        return self

    def renderer(self, renderer: Renderer) -> LearnerBuilder:
        """Send the run's progress to ``renderer`` (a ``burnish.train.Renderer``, or any object
        with its methods) instead of a built-in output; raises ``TypeError`` naming the methods
        it lacks."""
        check_renderer(renderer)
        self._output = renderer
        return self

    def build(self, model: Any, optimizer: Any, lr: float | LrScheduler) -> Learner:
        """The learner of ``model`` with ``optimizer`` and a learning rate or schedule."""
        scheduler = lr if isinstance(lr, LrScheduler) else ConstantLr(float(lr))
        checkpointer = None
        metrics = {m.name: m for m in self._train_metrics + self._valid_metrics}
        if self._checkpoint is not None:
            best_by = self._checkpoint["best_by"]
            best_by = None if best_by is None else _qualified(best_by)
            higher = best_by is not None and metrics.get(
                best_by.split("/", 1)[1], Metric()).higher_is_better
            checkpointer = Checkpointer(self.run_dir / "checkpoints",
                                        self._checkpoint["keep_last"], best_by, higher)
        if self._early_stopping is not None:
            self._early_stopping.resolve_mode(metrics)
        communicator = self._communicator
        if communicator is None and (self._distributed or (
                self._distributed is None and data_parallel.launched_by_job())):
            communicator = data_parallel.join()
        output = self._output
        if communicator is not None and communicator.rank != 0 and isinstance(output, str):
            output = "none"  # rank 0 shows the run
        return Learner(self.run_dir, model, optimizer, scheduler,
                       train_metrics=self._train_metrics, valid_metrics=self._valid_metrics,
                       num_epochs=self._num_epochs, grads_accumulation=self._grads_accumulation,
                       checkpointer=checkpointer, early_stopping=self._early_stopping,
                       train_step=self._train_step, valid_step=self._valid_step,
                       seed=self._seed, renderer=make_renderer(output),
                       capture=self._capture, autocast=self._autocast, scaler=self._scaler,
                       communicator=communicator)


def _qualified(metric: str) -> str:
    return metric if "/" in metric else f"valid/{metric}"


def make_renderer(kind: str | Renderer) -> Renderer:
    """The renderer for ``kind`` (see ``LearnerBuilder.output``), or ``kind`` itself when it is
    a renderer."""
    if not isinstance(kind, str):
        return kind
    if kind == "none":
        return Renderer()
    if kind == "plain":
        return PlainProgress()
    import sys

    wants_dashboard = kind == "dashboard" or sys.stdout.isatty()
    if wants_dashboard:
        try:
            from burnish.train.dashboard import Dashboard
        except ImportError:  # rich is not installed
            return PlainProgress()
        return Dashboard()
    return PlainProgress()
