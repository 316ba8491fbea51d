"""Train a small causal transformer on characters of text with the Learner (autodiff+ndarray),
then write new text from a prompt, sampling with a temperature and top-k.

The text is AG News (news titles and descriptions: ``--data DIR`` holding its train.csv, else
downloaded into the cache) or any UTF-8 file (``--text FILE``). Tokens are characters: the
vocabulary is the set of characters of the training text. ``--backend autodiff+wgpu`` (any
autodiff backend) trains elsewhere; the text is then sampled on the backend it wraps."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import burnish as bn
from burnish import optim
from burnish.data import AgNewsDataset, DataError, DataLoader, InMemoryDataset
from burnish.train import AccuracyMetric, LearnerBuilder, LossMetric, TrainingInterrupted

sys.path.insert(0, str(Path(__file__).parent))
from model import LanguageModelConfig, TextBatcher, generate  # noqa: E402

#: The share of the text held out for validation (its end).
VALID_SHARE = 0.1


def read_text(args: argparse.Namespace) -> str:
    """The training text: ``--text``'s file, else AG News's training articles (title and
    description, one a line), cut to ``--limit`` characters."""
    if args.text is not None:
        text = args.text.read_text(encoding="utf-8")
        return text[:args.limit] if args.limit else text
    try:
        news = (AgNewsDataset("train", root=args.data) if args.data is not None
                else AgNewsDataset("train"))
    except DataError as error:
        sys.exit(f"text-generation.py: {error}\n(--text FILE trains on a text file of yours)")
    lines, size = [], -1  # the length of the lines joined by newlines
    for item in news:
        lines.append(item.text)
        size += len(item.text) + 1
        if args.limit and size >= args.limit:
            break
    text = "\n".join(lines)
    return text[:args.limit] if args.limit else text


def windows(ids: np.ndarray, block_size: int) -> list[np.ndarray]:
    """Windows of ``block_size + 1`` token ids, one every ``block_size // 2`` tokens."""
    stride = max(block_size // 2, 1)
    starts = range(0, len(ids) - block_size, stride)
    return [ids[s:s + block_size + 1] for s in starts]


def train(args: argparse.Namespace, text: str, vocab: list[str]) -> LanguageModelConfig:
    """Fit the model on the text's windows; save it and its vocabulary in ``--out``."""
    index = {c: i for i, c in enumerate(vocab)}
    ids = np.array([index[c] for c in text], dtype=np.int64)
    cut = int(len(ids) * (1 - VALID_SHARE))
    train_windows = windows(ids[:cut], args.block_size)
    valid_windows = windows(ids[cut:], args.block_size)
    if not train_windows or not valid_windows:
        sys.exit(f"text-generation.py: the text has {len(text)} characters, too few for windows "
                 f"of {args.block_size + 1} (--block-size smaller, or more text)")
    print(f"{len(text):,} characters, a vocabulary of {len(vocab)}; "
          f"{len(train_windows):,} training and {len(valid_windows):,} validation windows of "
          f"{args.block_size + 1}", flush=True)
    bn.seed(0)
    config = LanguageModelConfig(len(vocab), args.block_size, args.d_model, args.heads,
                                 args.layers, args.dropout)
    device = bn.backend(args.backend).default_device()
    model = config.init(device)
    # Batches made where each step runs (validation runs model.valid(), on the backend that
    # autodiff wraps): moving them there inside a step would read them back to the host.
    train_loader = DataLoader(InMemoryDataset(train_windows), TextBatcher(), args.batch_size,
                              shuffle=True, device=device)
    valid_loader = DataLoader(InMemoryDataset(valid_windows), TextBatcher(), args.batch_size,
                              device=inference_device(args.backend))
    steps = args.epochs * len(train_loader)
    schedule = optim.CosineAnnealingLr(args.lr, steps, warmup_iters=min(100, steps // 10))
    learner = (LearnerBuilder(args.out)
               .metrics(LossMetric(), AccuracyMetric())
               .num_epochs(args.epochs)
               .checkpoint(keep_last=1)
               .build(model, optim.AdamW(weight_decay=0.01), schedule))
    started = time.perf_counter()
    try:
        model = learner.fit(train_loader, valid_loader, resume=args.resume)
    except TrainingInterrupted as interrupted:
        print(f"interrupted; run again with --resume to continue from {interrupted.checkpoint}")
        sys.exit(130)
    loss, accuracy = (m.value() for m in learner.valid_metrics)
    path = model.valid().save(args.out / "model.safetensors")
    (args.out / "vocab.json").write_text(json.dumps({"vocab": vocab,
                                                     "config": config.to_dict()}))
    print(f"validation loss {loss:.3f}, next-character accuracy {accuracy:.1f}% after "
          f"{time.perf_counter() - started:.0f}s; model saved to {path}")
    return config


def sample(args: argparse.Namespace, config: LanguageModelConfig, vocab: list[str]) -> str:
    """The prompt and ``--length`` characters sampled after it, printed and written to
    ``--out/sample.txt``."""
    model = config.init(inference_device(args.backend))
    model = model.load(args.out / "model.safetensors").valid()
    index = {c: i for i, c in enumerate(vocab)}
    bn.seed(args.seed)
    progress = _progress(args.length)
    with progress:
        ids = generate(model, [index[c] for c in args.prompt], args.length, config.block_size,
                       args.temperature, args.top_k, progress.advance)
    text = args.prompt + "".join(vocab[i] for i in ids)
    (args.out / "sample.txt").write_text(text, encoding="utf-8")
    top = "all" if args.top_k is None else args.top_k
    print(f"--- sample: temperature {args.temperature}, top-k {top}, {args.length} characters "
          f"after the prompt ---")
    print(text)
    print("--- end of sample ---")
    return text


def inference_device(backend: str) -> bn.Device:
    """The device of the backend an autodiff backend wraps: ``autodiff+wgpu`` samples on
    ``wgpu``."""
    return bn.backend(backend.removeprefix("autodiff+")).default_device()


class _progress:
    """A rich progress bar on a terminal (when rich is installed), else nothing."""

    def __init__(self, total: int):
        self.bar = None
        if sys.stdout.isatty():
            try:
                from rich.progress import Progress
            except ImportError:
                return
            self.bar = Progress(transient=True)
            self.task = self.bar.add_task("sampling", total=total)

    def __enter__(self):
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()

    def advance(self, _step: int) -> None:
        if self.bar is not None:
            self.bar.advance(self.task)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--data", type=Path, default=None,
                        help="folder holding AG News's train.csv (default: download it into "
                             "the cache)")
    source.add_argument("--text", type=Path, default=None,
                        help="train on this UTF-8 text file instead of AG News")
    parser.add_argument("--limit", type=int, default=500_000,
                        help="train on this many characters of the text at most (0: all)")
    parser.add_argument("--out", type=Path, default=Path("runs/text-generation"),
                        help="where checkpoints, logs, the model and the sample go")
    parser.add_argument("--backend", default="autodiff+ndarray",
                        help="an autodiff backend to train on (autodiff+ndarray; e.g. "
                             "autodiff+wgpu); the text is sampled on the backend it wraps")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3, help="peak of the cosine schedule")
    parser.add_argument("--block-size", type=int, default=64, help="characters of context")
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run")
    parser.add_argument("--prompt", default=None,
                        help="the text the sample starts with (default: \"The \", or the "
                             "text's first character where \"The \" has characters the text "
                             "lacks)")
    parser.add_argument("--length", type=int, default=300, help="characters to sample")
    parser.add_argument("--temperature", type=float, default=0.8,
                        help="divides the logits: lower is more conservative")
    parser.add_argument("--top-k", type=int, default=10,
                        help="sample among the k likeliest characters (0: all)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sampling")
    args = parser.parse_args()
    if not args.backend.startswith("autodiff+"):
        parser.error(f"--backend must be an autodiff backend to train, e.g. autodiff+"
                     f"{args.backend}; got {args.backend!r}")
    if args.temperature <= 0:
        parser.error(f"--temperature must be positive, got {args.temperature}")
    if args.length < 0 or args.top_k < 0:
        parser.error("--length and --top-k must not be negative")
    args.top_k = args.top_k or None
    text = read_text(args)
    vocab = sorted(set(text))
    if args.prompt is None:
        args.prompt = "The " if set("The ") <= set(vocab) else text[0]
    unknown = sorted(set(args.prompt) - set(vocab))
    if unknown:
        parser.error(f"--prompt has characters that are not in the text's vocabulary: "
                     f"{''.join(unknown)!r}")
    if not args.prompt:
        args.prompt = text[0]
    args.out.mkdir(parents=True, exist_ok=True)
    config = train(args, text, vocab)
    sample(args, config, vocab)


if __name__ == "__main__":
    main()
