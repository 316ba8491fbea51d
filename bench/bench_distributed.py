"""Data parallelism through ``burnish.distributed.init()``: processes started as torchrun starts
them (environment variables only), NCCL bootstrapped through the rendezvous on MASTER_ADDR.

    python bench/bench_distributed.py                      # 1 GPU, then 2: gpt and mnist
    python bench/bench_distributed.py --nproc 4 --models gpt --steps 50
    python bench/bench_distributed.py --json dist.json
    torchrun --nproc-per-node 2 bench/bench_distributed.py --worker gpt   # one world, by torchrun
    python bench/bench_distributed.py --small --backend autodiff+ndarray --launcher mpiexec

Without ``--worker`` the script is its own launcher: for each world size (1, then ``--nproc``)
it starts that many copies of itself with ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` set, as torchrun does, and nothing
else; each joins with ``burnish.distributed.init("nccl")`` on ``cuda:LOCAL_RANK``. With
``--small --backend autodiff+ndarray --launcher mpiexec`` the same code runs on tiny sizes over
MPI on a CPU (a check of the script, not a measurement).

- **gpt**: bench_train.py's GPT-style model (6 blocks, d_model 512, seq 256, vocab 8192), batch
  ``--batch`` (16) per GPU, AdamW. Each rank times ``--steps`` training steps after
  ``--warmup``: forward, backward with gradient buckets all-reduced as they are ready
  (``GradientReducer``), AdamW. Reported: tokens/s of the whole world and its ratio to one
  GPU's without data parallelism (a plain step, no communicator; the target: at least 1.8x on
  two GPUs), and the same with the reducer's buckets all started after backward (as for a
  communicator that cannot overlap) and with ``all_reduce_gradients`` after backward (one
  collective per dtype). Before timing, the ranks check that
  their reduced gradients equal one process's gradients of the whole (world x batch) batch.
- **mnist**: examples/mnist's CNN trained by the Learner for ``--epochs`` epochs on the MNIST
  test set shipped in burnish-train (8000 images to train, 2000 to validate; the full MNIST
  when ``BURNISH_MNIST_DIR`` is set), global batch 64 split over the ranks by
  ``ShardedLoader``: the validation accuracy of each world size, which should agree within a
  point (dropout draws differ with the shard shapes).

The exit status is 1 when a check fails (gradients, accuracy, every rank holding the same
model).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def launch(world: int, worker_args: list[str], timeout: float, launcher: str = "env"
           ) -> list[dict]:
    """``world`` copies of this script as ``--worker``, torchrun's variables set (or started by
    ``mpiexec``); their JSON results in rank order."""
    port = free_port()
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-distributed-{os.getpid()}-{port}"
    out.mkdir(parents=True, exist_ok=True)
    processes = []
    if launcher == "mpiexec":
        mpiexec = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or "mpiexec"
        processes.append(subprocess.Popen(
            [mpiexec, "-n", str(world), sys.executable, __file__, *worker_args, "--out",
             str(out)]))
    for rank in range(world if launcher == "env" else 0):
        env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": str(world),
               "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        processes.append(subprocess.Popen(
            [sys.executable, __file__, *worker_args, "--out", str(out)], env=env))
    # As torchrun's agent does: when a rank fails, the others (which may wait in a collective
    # for it) are stopped after a grace period; so are all of them after the timeout.
    deadline = time.monotonic() + timeout
    failed_at = None
    while any(p.poll() is None for p in processes):
        codes = [p.poll() for p in processes]
        if failed_at is None and any(code not in (None, 0) for code in codes):
            failed_at = time.monotonic()
        if time.monotonic() > deadline or (failed_at and time.monotonic() > failed_at + 10):
            for process in processes:
                process.kill()
            late = "ran past" if failed_at is None else "failed; the others were stopped after"
            raise SystemExit(f"world {world}: a rank {late} {timeout if failed_at is None else 10}"
                             f" s (exit codes {[p.wait() for p in processes]})")
        time.sleep(0.2)
    codes = [p.returncode for p in processes]
    if any(codes):
        raise SystemExit(f"world {world}: exit codes {codes}")
    return [json.loads((out / f"rank-{rank}.json").read_text()) for rank in range(world)]


# -- the ranks -----------------------------------------------------------------------------------


def join(args: argparse.Namespace):
    """This rank's communicator and device: NCCL on ``cuda:LOCAL_RANK`` for a cuda backend,
    else MPI (the ranks then come from mpiexec: ``--launcher mpiexec``)."""
    import burnish as bn
    from burnish.distributed import init

    backend = bn.backend(args.backend)
    if args.backend.split("+")[-1] == "cuda":
        comm = init("nccl")
        return comm, backend.devices()[comm.device.index]
    return init("mpi"), backend.default_device()


def gpt_worker(args: argparse.Namespace) -> dict:
    import train_models as models

    import burnish as bn
    from burnish import Tensor
    from burnish.distributed import GradientReducer

    comm, device = join(args)
    rank, world = comm.rank, comm.world_size
    spec = models.SPECS["gpt"]
    sizes = dict(spec.small if args.small else spec.full)
    sizes["batch"] = args.batch
    bn.seed(0)
    model = comm.broadcast_module(models.burnish_model("gpt", sizes, device))
    loss_of = models.burnish_loss("gpt", sizes, device)
    optimizer = models.burnish_optimizer(spec, False)
    params = sum(p.val().numel() for p in model.params())
    # Every rank draws the same world x batch sequences and takes its slice.
    rng = np.random.default_rng(0)
    ids = rng.integers(0, sizes["vocab"], (world * args.batch, sizes["seq"] + 1))
    mine = slice(rank * args.batch, (rank + 1) * args.batch)
    x, y = (Tensor.from_data(ids[mine, :-1], device), Tensor.from_data(ids[mine, 1:], device))

    reducer = GradientReducer(comm, model)
    check = None
    if world > 1:  # the reduced gradients against this process's of the whole batch
        with reducer.overlap(model):
            grads = loss_of(model, x, y).backward()
        grads = reducer.gradients(grads)
        full = loss_of(model, Tensor.from_data(ids[:, :-1], device),
                       Tensor.from_data(ids[:, 1:], device)).backward()
        check = max(float(np.abs(p.val().grad(grads).to_numpy()
                                 - p.val().grad(full).to_numpy()).max())
                    for p in model.params())

    def step(model, mode: str):
        if mode == "plain":  # one GPU without data parallelism: the baseline
            loss = loss_of(model, x, y)
            return optimizer.step(spec.lr, model, loss.backward()), loss
        if mode in ("overlap", "reducer_after"):
            with reducer.overlap(model):
                loss = loss_of(model, x, y)
                grads = loss.backward()
            grads = reducer.gradients(grads)
        else:
            loss = loss_of(model, x, y)
            grads = comm.all_reduce_gradients(loss.backward(), model)
        return optimizer.step(spec.lr, model, grads), loss

    results = {"rank": rank, "world": world, "params": params, "grad_check": check,
               "buckets": len(reducer.buckets)}
    modes = ("overlap", "reducer_after", "after_backward", *(["plain"] if world == 1 else []))
    # Rounds of every mode in turn, the best block of each kept: the host's speed drifts
    # between blocks, and this way each mode meets the same drift.
    for _ in range(args.rounds):
        for mode in modes:
            # The reducer's buckets all after the pass, as for a communicator that cannot
            # overlap.
            reducer.overlap_backward = mode == "overlap"
            for _ in range(args.warmup):
                model, loss = step(model, mode)
            loss.item()
            comm.barrier()
            start = time.perf_counter()
            for _ in range(args.steps):
                model, loss = step(model, mode)
            loss.item()  # waits for the GPU
            comm.barrier()
            took = time.perf_counter() - start
            tokens = args.steps * world * args.batch * sizes["seq"] / took
            if tokens > results.get(mode, {}).get("tokens_per_s", 0.0):
                results[mode] = {"steps_per_s": args.steps / took, "tokens_per_s": tokens}
    checksum = sum(float(p.val().sum().item()) for p in model.params())
    results["checksum"] = checksum
    comm.close()
    return results


def mnist_worker(args: argparse.Namespace) -> dict:
    import burnish as bn
    from burnish import optim
    from burnish.data import MnistBatcher, MnistDataset, PartialDataset
    from burnish.distributed import ShardedLoader
    from burnish.train import AccuracyMetric, LearnerBuilder, LossMetric

    sys.path.insert(0, str(HERE.parent / "examples" / "mnist"))
    from model import CnnConfig

    comm, device = join(args)
    if os.environ.get("BURNISH_MNIST_DIR"):
        root = os.environ["BURNISH_MNIST_DIR"]
        train_set, valid_set = MnistDataset("train", root=root), MnistDataset("test", root=root)
    else:
        test = MnistDataset("test", embedded=True)
        train_set, valid_set = PartialDataset(test, 0, 8000), PartialDataset(test, 8000, 10000)
        if args.small:
            train_set, valid_set = PartialDataset(test, 0, 640), PartialDataset(test, 640, 1140)
    bn.seed(0)
    model = CnnConfig().init(device)
    share = {"rank": comm.rank, "world_size": comm.world_size}
    train = ShardedLoader(train_set, MnistBatcher(), 64, shuffle=True, seed=1, device=device,
                          **share)
    valid = ShardedLoader(valid_set, MnistBatcher(), 500, device=device, **share)
    run_dir = Path(args.out) / f"mnist-{comm.world_size}"
    start = time.perf_counter()
    learner = (LearnerBuilder(run_dir).metrics(LossMetric(), AccuracyMetric())
               .num_epochs(args.epochs).checkpoint(keep_last=1).output("none")
               .distributed(comm).build(model, optim.Adam(), 1e-3))
    model = learner.fit(train, valid)
    took = time.perf_counter() - start
    checksum = sum(float(p.val().sum().item()) for p in model.params())
    return {"rank": comm.rank, "world": comm.world_size, "seconds": took, "checksum": checksum,
            "accuracy": learner.log.epochs["valid"]["accuracy"][-1]}


WORKERS = {"gpt": gpt_worker, "mnist": mnist_worker}


# -- the report ----------------------------------------------------------------------------------


def report(name: str, runs: dict[int, list[dict]], small: bool = False
           ) -> tuple[list[str], bool]:
    """The section of model ``name`` and whether its checks passed (``small``: a few steps of
    tiny models, whose accuracies say nothing)."""
    lines, ok = [f"## {name}"], True
    for world, ranks in runs.items():
        sums = {round(r["checksum"], 3) for r in ranks}
        if len(sums) > 1:
            ok = False
            lines.append(f"FAIL: world {world}: the ranks' models differ (checksums {sums})")
    if name == "gpt":
        plain = runs[1][0]["plain"]["tokens_per_s"]
        lines.append(f"parameters: {runs[1][0]['params']:,}; buckets of 25 MiB: "
                     f"{runs[1][0]['buckets']}; one GPU without data parallelism: "
                     f"{plain:,.0f} tokens/s")
        lines.append("| GPUs | tokens/s (overlap) | x 1 GPU | reducer after backward | "
                     "x 1 GPU | all_reduce_gradients after backward | x 1 GPU | max grad diff "
                     "vs whole batch |")
        lines.append("|---|---|---|---|---|---|---|---|")
        for world, ranks in runs.items():
            first = ranks[0]
            check = max((r["grad_check"] or 0.0) for r in ranks) if world > 1 else None
            if check is not None and check > 1e-3:
                ok = False
            figures = " | ".join(f"{first[k]['tokens_per_s']:,.0f} | "
                                 f"{first[k]['tokens_per_s'] / plain:.2f}"
                                 for k in ("overlap", "reducer_after", "after_backward"))
            lines.append(f"| {world} | {figures} | "
                         f"{'-' if check is None else f'{check:.2e}'} |")
        lines.append("(x 1 GPU: over one GPU's tokens/s without data parallelism, at the same "
                     "batch per GPU; the goal for 2 GPUs is 1.8)")
    else:
        lines.append("| GPUs | validation accuracy | seconds |")
        lines.append("|---|---|---|")
        accuracies = []
        for world, ranks in runs.items():
            accuracies.append(ranks[0]["accuracy"])
            lines.append(f"| {world} | {ranks[0]['accuracy']:.2f}% | {ranks[0]['seconds']:.1f} |")
        if max(accuracies) - min(accuracies) > 1.0 and not small:
            ok = False
            lines.append("FAIL: the accuracies differ by more than a point")
    return lines, ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nproc", type=int, default=2, help="GPUs of the larger world")
    parser.add_argument("--models", nargs="+", default=["gpt", "mnist"], choices=list(WORKERS))
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=1,
                        help="timed blocks per mode, taken in turn; the best is reported")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch", type=int, default=16, help="GPT sequences per GPU")
    parser.add_argument("--epochs", type=int, default=2, help="MNIST epochs")
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--backend", default="autodiff+cuda",
                        help="another backend runs on MPI (with --launcher mpiexec)")
    parser.add_argument("--launcher", choices=["env", "mpiexec"], default="env",
                        help="env: the ranks get torchrun's variables; mpiexec: MPI starts them")
    parser.add_argument("--small", action="store_true",
                        help="tiny sizes: a check of the script, on a CPU backend too")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--worker", choices=list(WORKERS), help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:  # one rank, started by this script or by torchrun
        result = WORKERS[args.worker](args)
        if args.out:
            Path(args.out, f"rank-{result['rank']}.json").write_text(json.dumps(result))
        else:
            print(json.dumps(result))
        return 0
    common = ["--steps", str(args.steps), "--warmup", str(args.warmup), "--rounds",
              str(args.rounds), "--batch",
              str(args.batch), "--epochs", str(args.epochs), "--backend", args.backend,
              *(["--small"] if args.small else [])]
    lines, ok, everything = [], True, {}
    for name in args.models:
        runs = {world: launch(world, ["--worker", name, *common], args.timeout, args.launcher)
                for world in sorted({1, args.nproc})}
        everything[name] = runs
        section, passed = report(name, runs, args.small)
        lines += section + [""]
        ok &= passed
        print("\n".join(section), flush=True)
    if args.json:
        args.json.write_text(json.dumps(everything, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
