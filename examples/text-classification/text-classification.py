"""Classify news (AG News) or Wikipedia abstracts (DBpedia) with a small transformer encoder
trained with the Learner (autodiff+ndarray), on a WordPiece tokenizer trained on the training
texts; save both, then classify a few sentences.

``--backend autodiff+cuda`` (or any autodiff backend) trains elsewhere; the sentences are then
classified on the backend it wraps (``cuda``)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers

import burnish as bn
from burnish import optim
from burnish.data import (
    AgNewsDataset,
    ChecksumError,
    DataError,
    DataLoader,
    DbPediaDataset,
    InMemoryDataset,
    PartialDataset,
    ShuffledDataset,
)
from burnish.train import AccuracyMetric, LearnerBuilder, LossMetric, TrainingInterrupted

sys.path.insert(0, str(Path(__file__).parent))
from model import TextBatcher, TextClassifierConfig  # noqa: E402

DATASETS = {"ag_news": AgNewsDataset, "dbpedia": DbPediaDataset}
PAD, UNK, CLS = "[PAD]", "[UNK]", "[CLS]"

#: Sentences classified at the end, unless --text gives others.
SENTENCES = {
    "ag_news": [
        "The striker scored twice as the champions won the cup final on Sunday.",
        "Shares fell sharply after the bank reported lower quarterly profits.",
        "The new chip doubles battery life in laptops, the software company said.",
        "Rebels and government troops agreed to a ceasefire after talks in the capital.",
    ],
    "dbpedia": [
        "Acme Corporation is an American manufacturer of tools founded in 1920.",
        "The red fox is a small carnivorous mammal of the family Canidae.",
        "Abbey Road is the eleventh studio album by the English rock band the Beatles.",
        "Springfield is a small village in the county of Essex, England.",
    ],
}


def load_splits(name: str, data: Path | None, limit: int | None) -> tuple:
    """The training and test splits of dataset ``name``, from ``data`` or the cache (downloaded
    when missing), shuffled with a fixed seed (DBpedia's files are sorted by class) and cut to
    ``limit`` training and ``limit // 4`` test texts."""
    dataset = DATASETS[name]
    try:
        train_set, test_set = dataset("train", root=data), dataset("test", root=data)
    except ChecksumError:
        raise
    except DataError as error:
        sys.exit(f"text-classification.py: {error}\n(--data DIR: a folder holding the "
                 f"dataset's train.csv and test.csv)")
    classes = dataset.classes
    train_set, test_set = ShuffledDataset(train_set, seed=0), ShuffledDataset(test_set, seed=1)
    if limit:
        train_set = PartialDataset(train_set, 0, limit)
        test_set = PartialDataset(test_set, 0, max(limit // 4, 1))
    return train_set, test_set, classes


def train_tokenizer(texts: list[str], vocab_size: int, max_length: int) -> Tokenizer:
    """A WordPiece tokenizer (BERT's lowercasing normaliser and pre-tokenizer) trained on
    ``texts``: ``[CLS]`` first, truncated and padded with ``[PAD]`` to ``max_length`` ids."""
    tokenizer = Tokenizer(models.WordPiece(unk_token=UNK))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=[PAD, UNK, CLS],
                                        show_progress=sys.stderr.isatty())
    tokenizer.train_from_iterator(texts, trainer, length=len(texts))
    configure(tokenizer, max_length)
    return tokenizer


def configure(tokenizer: Tokenizer, max_length: int) -> None:
    """Put ``[CLS]`` before each text, truncate and pad to ``max_length`` ids."""
    cls_id = tokenizer.token_to_id(CLS)
    tokenizer.post_processor = processors.TemplateProcessing(single=f"{CLS} $A",
                                                             special_tokens=[(CLS, cls_id)])
    tokenizer.enable_truncation(max_length)
    tokenizer.enable_padding(pad_id=tokenizer.token_to_id(PAD), pad_token=PAD, length=max_length)


def encode(tokenizer: Tokenizer, texts: list[str]) -> np.ndarray:
    """The token ids of ``texts``, int32 ``[len(texts), max_length]`` (half the memory of int64
    for DBpedia's 560,000 texts; the batcher makes int64 tensors)."""
    return np.array([encoding.ids for encoding in tokenizer.encode_batch(texts)], dtype=np.int32)


def encoded(tokenizer: Tokenizer, dataset) -> InMemoryDataset:
    """The items of ``dataset`` as ``(token_ids, label)``, tokenized once up front."""
    items = list(dataset)
    ids = encode(tokenizer, [item.text for item in items])
    return InMemoryDataset([(row, item.label) for row, item in zip(ids, items)])


def train(args: argparse.Namespace) -> float:
    """Train the tokenizer and the classifier, save both in ``args.out``; return the test
    accuracy."""
    train_set, test_set, classes = load_splits(args.dataset, args.data, args.limit)
    print(f"{args.dataset}: {len(train_set)} training and {len(test_set)} test texts, "
          f"{len(classes)} classes", flush=True)
    started = time.perf_counter()
    tokenizer = train_tokenizer([item.text for item in train_set], args.vocab_size,
                                args.max_length)
    train_items, test_items = encoded(tokenizer, train_set), encoded(tokenizer, test_set)
    print(f"tokenizer: {tokenizer.get_vocab_size()} WordPiece tokens, trained and applied in "
          f"{time.perf_counter() - started:.1f}s", flush=True)

    config = TextClassifierConfig(
        vocab_size=tokenizer.get_vocab_size(), classes=len(classes), max_length=args.max_length,
        d_model=args.d_model, n_heads=args.heads, n_layers=args.layers, d_ff=2 * args.d_model,
        pooling=args.pooling,
    )
    bn.seed(0)
    device = bn.backend(args.backend).default_device()
    model = config.init(device)
    # Batches made where each step runs (training on the autodiff device, testing on the one it
    # wraps), so that the captured steps copy nothing between backends.
    batcher = TextBatcher(pad_id=tokenizer.token_to_id(PAD))
    train_loader = DataLoader(train_items, batcher, args.batch_size, shuffle=True, device=device)
    test_loader = DataLoader(test_items, batcher, 256, device=model.valid().head.weight.device)
    steps = args.epochs * len(train_loader)
    schedule = optim.CosineAnnealingLr(args.lr, steps, warmup_iters=min(100, steps // 10))
    learner = (LearnerBuilder(args.out)
               .metrics(LossMetric(), AccuracyMetric())
               .num_epochs(args.epochs)
               .checkpoint(keep_last=1)
               .build(model, optim.AdamW(weight_decay=0.01), schedule))
    started = time.perf_counter()
    try:
        model = learner.fit(train_loader, test_loader, resume=args.resume)
    except TrainingInterrupted as interrupted:
        print(f"interrupted; run again with --resume to continue from {interrupted.checkpoint}")
        sys.exit(130)
    accuracy = learner.valid_metrics[1].value()
    args.out.mkdir(parents=True, exist_ok=True)
    model.valid().save(args.out / "model.safetensors")
    config.save(args.out / "config.json")
    tokenizer.save(str(args.out / "tokenizer.json"))
    (args.out / "classes.json").write_text(json.dumps(classes) + "\n")
    print(f"test accuracy {accuracy:.2f}% ({len(test_set)} texts, chance "
          f"{100 / len(classes):.0f}%) after {time.perf_counter() - started:.0f}s of training; "
          f"model, tokenizer and config saved in {args.out}")
    return accuracy


def classify(args: argparse.Namespace) -> None:
    """Load what ``train`` saved and print the class of each sentence."""
    device = bn.backend(args.backend.removeprefix("autodiff+")).default_device()
    config = TextClassifierConfig.load(args.out / "config.json")
    model = config.init(device).load(args.out / "model.safetensors").valid()
    tokenizer = Tokenizer.from_file(str(args.out / "tokenizer.json"))
    classes = json.loads((args.out / "classes.json").read_text())
    sentences = args.text or SENTENCES[args.dataset]
    batch = TextBatcher(tokenizer.token_to_id(PAD)).batch(
        [(ids, 0) for ids in encode(tokenizer, sentences)], device)
    probabilities = bn.functional.softmax(model(batch.tokens, batch.mask_pad), -1).to_numpy()
    for sentence, row in zip(sentences, probabilities):
        best = int(row.argmax())
        print(f"{classes[best]:>10} ({row[best]:.0%})  {sentence}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dataset", choices=sorted(DATASETS), default="ag_news")
    parser.add_argument("--data", type=Path, default=None,
                        help="folder holding the dataset's train.csv and test.csv (nothing is "
                             "downloaded); default: the cache, downloaded into it when missing")
    parser.add_argument("--out", type=Path, default=Path("runs/text-classification"),
                        help="where the model, tokenizer, checkpoints and logs go")
    parser.add_argument("--backend", default="autodiff+ndarray",
                        help="an autodiff backend to train on (autodiff+ndarray; e.g. "
                             "autodiff+cuda); sentences are classified on the backend it wraps")
    parser.add_argument("--limit", type=int, default=None,
                        help="train on this many texts only (and test on a quarter as many)")
    parser.add_argument("--vocab-size", type=int, default=8000, help="WordPiece vocabulary size")
    parser.add_argument("--max-length", type=int, default=64,
                        help="tokens per text, [CLS] included (longer texts are cut)")
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--pooling", choices=["mean", "first"], default="mean",
                        help="mean of the token vectors, or the [CLS] token's")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3, help="peak of the cosine schedule")
    parser.add_argument("--resume", action="store_true", help="continue an interrupted run")
    parser.add_argument("--infer-only", action="store_true",
                        help="skip training: classify with the model saved in --out")
    parser.add_argument("--text", action="append",
                        help="a sentence to classify (repeat for more); default: a few examples")
    args = parser.parse_args()
    if not args.backend.startswith("autodiff+"):
        parser.error(f"--backend must be an autodiff backend to train, e.g. autodiff+"
                     f"{args.backend}; got {args.backend!r}")
    if not args.infer_only:
        train(args)
    classify(args)


if __name__ == "__main__":
    main()
