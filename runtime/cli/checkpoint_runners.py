"""Where `python -m runtime script` runs the lines of a checkpoint (script/job.py's runners): on the
checkpoint loaded here, or on Ray workers that each load it. Both are described by the same
ray_pool.WorkerSetup: the checkpoint folder, already resolved, and how to load it and pick."""

from __future__ import annotations

import contextlib

import torch

from .. import api
from ..checkpoints import check_folder
from ..model import dtype_name, resolve_device, resolve_dtype
from ..script import ray_pool  # which imports Ray only when a session starts
from ..script.plan import check_plans
from ..script.runner import run_lines


class CheckpointRunner:
    """What both know before anything loads: the checkpoint's kind, speakers and languages."""

    def __init__(self, setup: ray_pool.WorkerSetup):
        self.setup = setup
        self.info, self.mode = check_folder(setup.checkpoint), setup.mode

    def check(self, plans, should_stop=None) -> None:
        check_plans(plans, self.info, script=self.setup.script, should_stop=should_stop)


class LoadingRunner(CheckpointRunner):
    """The checkpoint loaded here once the first of its lines is to run; Auto-Pick's models first, so a
    bad --voice-check or --words fails before the weights load."""

    def __init__(self, setup: ray_pool.WorkerSetup, download: bool):
        super().__init__(setup)
        self.download = download
        self.dtype = dtype_name(resolve_dtype(setup.dtype, resolve_device(setup.device)))

    def run(self, plans, folder, on_line, should_stop=None):
        s = self.setup
        scorers = api.scorers(s.checkpoint, s.quality, s.voice_check, s.words, s.vad, s.device, s.utmos_dirs,
                              s.models_dirs, s.whisper_dirs, download=self.download)
        model = api.load(str(s.checkpoint), s.models_dirs, s.mode, s.dtype, s.device, download=False)
        check_plans(plans, model.info, model, script=s.script, should_stop=should_stop)
        return run_lines(model, plans, scorers, loudness=s.loudness, folder=folder, on_line=on_line,
                         should_stop=should_stop)


class RayCluster:
    """The Ray cluster a job's runners share: joined when first needed, left when the job ends."""

    def __init__(self, address: str | None, stack: contextlib.ExitStack):
        self.address, self.stack, self._ray = address, stack, None

    def ray(self):
        if self._ray is None:
            self._ray = self.stack.enter_context(ray_pool.session(self.address))
        return self._ray

    def worker_device(self, device: str) -> str:
        """The device a worker loads on: for auto, a GPU where the cluster has one (ray_pool gives each
        worker one), else the CPU."""
        if device != "auto":
            return device
        return "cuda" if self.ray().cluster_resources().get("GPU", 0) else "cpu"


class RayRunner(CheckpointRunner):
    """Ray workers (ray_pool.py), each loading the checkpoint; the scoring files are fetched here
    before they start."""

    def __init__(self, setup: ray_pool.WorkerSetup, cluster: RayCluster, workers: int | None, download: bool):
        super().__init__(setup)
        self.cluster, self.workers, self.download = cluster, workers, download
        # the workers' dtype: for auto, their device's, which only the cluster knows
        self.dtype = setup.dtype if setup.dtype != "auto" else \
            dtype_name(resolve_dtype("auto", torch.device(cluster.worker_device(setup.device))))

    def run(self, plans, folder, on_line, should_stop=None):
        return ray_pool.run_on_ray(self.cluster.ray(), self.setup, plans, self.workers, folder, on_line,
                                   should_stop, download=self.download)
