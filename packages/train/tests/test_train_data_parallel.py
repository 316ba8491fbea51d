"""The Learner under a launcher, without burnish-distributed's collectives: joining is asked for
by the launcher's variables, and a missing package is named. (Training on 2 and 4 ranks is in
packages/distributed/tests, under mpiexec.)"""

import sys

import pytest

from burnish import nn, optim
from burnish.train import LearnerBuilder
from burnish.train.data_parallel import launched_by_job


@pytest.mark.parametrize("variable", ["WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE",
                                      "SLURM_NTASKS"])
def test_a_launcher_of_several_ranks_is_seen(monkeypatch, variable):
    for name in ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)
    assert not launched_by_job()
    monkeypatch.setenv(variable, "1")
    assert not launched_by_job()
    monkeypatch.setenv(variable, "2")
    assert launched_by_job()


def test_without_burnish_distributed_the_package_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setitem(sys.modules, "burnish.distributed", None)  # as if not installed
    model = nn.LinearConfig(2, 2).init("autodiff+ndarray")
    with pytest.raises(ImportError, match=r"pip install 'burnish\[distributed\]'"):
        LearnerBuilder(tmp_path).build(model, optim.Sgd(), 0.1)
    learner = LearnerBuilder(tmp_path).distributed(enabled=False).build(model, optim.Sgd(), 0.1)
    assert learner.communicator is None
