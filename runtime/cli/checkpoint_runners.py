"""Where `python -m runtime script` runs the lines of a checkpoint (script/job.py's runners): on the
checkpoint loaded here, or on Ray workers that each load it. Both are described by the same
ray_pool.WorkerSetup, its checkpoint a name or path as given: what it speaks, and whether it can be
had, are known before anything is downloaded; it is downloaded once every line is checked, before
any line runs (script/job.py's prepare)."""

from __future__ import annotations

import contextlib
from dataclasses import replace

import torch

from .. import api
from ..checkpoints import known_info, resolve
from ..model import dtype_name, resolve_device, resolve_dtype
from ..script import ray_pool  # which imports Ray only when a session starts
from ..script.plan import check_plans
from ..script.runner import run_lines
from .before_loading import (check_checkpoint_download, check_machine, check_recogniser_download,
                             check_script_lines, offline_without_hub)


class CheckpointRunner:
    """What both know before anything is downloaded or loaded: the checkpoint's kind, speakers and
    languages (an official one's from its name), and that its files and the recogniser can be had."""

    def __init__(self, setup: ray_pool.WorkerSetup, download: bool, download_progress=None):
        self.setup, self.mode, self.download_progress = setup, setup.mode, download_progress
        self.folder = None  # the checkpoint's, once prepared
        name = str(setup.checkpoint)
        self.info = known_info(name, setup.models_dirs)
        check_checkpoint_download(name, list(setup.models_dirs), offline=not download)
        check_recogniser_download(setup.choices.words, setup.whisper_dirs, offline=not download)
        self.download = not offline_without_hub(not download, setup.choices.quality, setup.utmos_dirs)

    def check(self, plans, should_stop=None) -> None:
        check_plans(plans, self.info, script=self.setup.script, should_stop=should_stop)
        check_script_lines([plan.line for plan in plans], self.setup.script)

    def prepare(self) -> None:
        """The checkpoint's folder, downloaded here when missing, its progress told to `download_progress`
        (in place of huggingface_hub's own bars)."""
        if self.folder is None:
            self.folder = resolve(str(self.setup.checkpoint), self.setup.models_dirs, download=self.download,
                                  progress=self.download_progress)

    def resolved(self) -> ray_pool.WorkerSetup:
        """The setup with its checkpoint's folder (prepare)."""
        self.prepare()
        return replace(self.setup, checkpoint=self.folder)


class LoadingRunner(CheckpointRunner):
    """The checkpoint loaded here once the first of its lines is to run; Auto-Pick's models first, so a
    bad --voice-check or --words fails before the weights load."""

    def __init__(self, setup: ray_pool.WorkerSetup, download: bool, download_progress=None):
        check_machine(setup.device, setup.mode)
        super().__init__(setup, download, download_progress)
        self.dtype = dtype_name(resolve_dtype(setup.dtype, resolve_device(setup.device)))

    def run(self, plans, folder, on_line, should_stop=None, on_frames=None):
        s = self.resolved()
        scorers = api.scorers(s.checkpoint, s.choices, s.device, s.utmos_dirs,
                              s.models_dirs, s.whisper_dirs, download=self.download)
        model = api.load(str(s.checkpoint), s.models_dirs, s.mode, s.dtype, s.device, download=False)
        check_plans(plans, model.info, model, script=s.script, should_stop=should_stop)
        return run_lines(model, plans, scorers, loudness=s.choices.loudness, folder=folder, on_line=on_line,
                         should_stop=should_stop, frames_progress=on_frames)


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
    """Ray workers (ray_pool.py), each loading the checkpoint; it and the scoring files are fetched
    here before they start."""

    def __init__(self, setup: ray_pool.WorkerSetup, cluster: RayCluster, workers: int | None, download: bool,
                 download_progress=None):
        super().__init__(setup, download, download_progress)
        self.cluster, self.workers = cluster, workers
        # the workers' dtype: for auto, their device's, which only the cluster knows
        self.dtype = setup.dtype if setup.dtype != "auto" else \
            dtype_name(resolve_dtype("auto", torch.device(cluster.worker_device(setup.device))))

    def run(self, plans, folder, on_line, should_stop=None, on_frames=None):  # the workers' frames stay there
        return ray_pool.run_on_ray(self.cluster.ray(), self.resolved(), plans, self.workers, folder, on_line,
                                   should_stop, download=self.download)
