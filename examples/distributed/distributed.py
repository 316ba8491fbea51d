"""Data-parallel training with the Learner: an MLP on MNIST, on one process or on every rank of
a job started by mpiexec, srun or a torchrun-style launcher (see README.md)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import burnish as bn
from burnish import Tensor, nn, optim
from burnish.data import MnistBatch, MnistBatcher, MnistDataset, PartialDataset
from burnish.distributed import ShardedLoader, detect_job
from burnish.train import AccuracyMetric, ClassificationOutput, LearnerBuilder, LossMetric


class Mlp(nn.Module):
    """``[batch, 1, 28, 28]`` images to ``[batch, 10]`` logits through one hidden layer."""

    hidden: nn.Linear
    output: nn.Linear

    def forward(self, images: Tensor) -> Tensor:
        return self.output(nn.Relu()(self.hidden(images.reshape([images.shape[0], -1]))))

    def forward_classification(self, batch: MnistBatch) -> ClassificationOutput:
        logits = self(batch.images.to_device(self.hidden.weight.device))
        targets = batch.targets.to_device(logits.device)
        return ClassificationOutput(nn.CrossEntropyLoss()(logits, targets), logits, targets)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", default="autodiff+ndarray",
                        help="autodiff+cuda: rank r trains on cuda:LOCAL_RANK through NCCL")
    parser.add_argument("--data", type=Path, default=os.environ.get("BURNISH_MNIST_DIR"),
                        help="folder of the MNIST IDX files (default: the test set shipped in "
                             "burnish-train, 8,000 digits to train on and 2,000 to validate)")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=64, help="the global batch")
    parser.add_argument("--run-dir", type=Path, default=Path("runs/distributed"))
    parser.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    args = parser.parse_args()

    job = detect_job()  # rank and world size from the launcher; a world of one without one
    if args.data and any(args.data.glob("train-images-idx3-ubyte*")):
        train_set = MnistDataset("train", root=args.data)
        valid_set = MnistDataset("test", root=args.data)
    else:  # a folder of the test set alone, or the copy burnish-train ships: 8,000 and 2,000
        test = (MnistDataset("test", root=args.data) if args.data
                else MnistDataset("test", embedded=True))
        train_set, valid_set = PartialDataset(test, 0, 8000), PartialDataset(test, 8000, 10000)
    backend = bn.backend(args.backend)
    device = (backend.devices()[job.local_rank] if args.backend.endswith("cuda")
              else backend.default_device())
    bn.seed(0)  # the ranks' own weights are replaced by rank 0's when training starts
    model = Mlp(hidden=nn.LinearConfig(784, 128).init(device),
                output=nn.LinearConfig(128, 10).init(device))
    share = {"rank": job.rank, "world_size": job.world_size}
    train = ShardedLoader(train_set, MnistBatcher(), args.batch_size, shuffle=True,
                          device=device, **share)
    valid = ShardedLoader(valid_set, MnistBatcher(), 500, device=device, **share)
    learner = (LearnerBuilder(args.run_dir)
               .metrics(LossMetric(), AccuracyMetric())
               .num_epochs(args.epochs)
               .checkpoint(keep_last=1)
               .output("plain")
               .build(model, optim.Adam(), 1e-3))  # joins the job when there is one
    learner.fit(train, valid, resume=args.resume)
    if job.rank == 0:
        accuracy = learner.log.epochs["valid"]["accuracy"][-1]
        print(f"{job.world_size} rank(s) ({job.launcher}): validation accuracy {accuracy:.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
