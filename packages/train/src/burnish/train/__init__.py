"""burnish.train: the Learner, its metrics, checkpoints and renderers (Burn's burn-train)."""

from burnish.train.checkpoint import Checkpointer, CheckpointInfo
from burnish.train.classification_metrics import (
    AccuracyMetric,
    FScoreMetric,
    LossMetric,
    PrecisionMetric,
    RecallMetric,
    TopKAccuracyMetric,
)
from burnish.train.early_stopping import EarlyStopping
from burnish.train.learner import Learner, LearnerBuilder, TrainingInterrupted
from burnish.train.metric import Metric, StepInfo
from burnish.train.metric_log import read_epochs, read_metric_log
from burnish.train.plot import plot_metrics
from burnish.train.progress import PlainProgress, summary_table
from burnish.train.renderer import Renderer, StepProgress
from burnish.train.step import ClassificationOutput, RegressionOutput, classification_step
from burnish.train.system_metrics import (
    CpuUseMetric,
    IterationSpeedMetric,
    LearningRateMetric,
    MemoryUseMetric,
)

__all__ = [
    "AccuracyMetric",
    "CheckpointInfo",
    "Checkpointer",
    "ClassificationOutput",
    "CpuUseMetric",
    "EarlyStopping",
    "FScoreMetric",
    "IterationSpeedMetric",
    "Learner",
    "LearnerBuilder",
    "LearningRateMetric",
    "LossMetric",
    "MemoryUseMetric",
    "Metric",
    "PlainProgress",
    "plot_metrics",
    "PrecisionMetric",
    "RecallMetric",
    "RegressionOutput",
    "Renderer",
    "StepInfo",
    "StepProgress",
    "TopKAccuracyMetric",
    "TrainingInterrupted",
    "classification_step",
    "read_epochs",
    "read_metric_log",
    "summary_table",
]
