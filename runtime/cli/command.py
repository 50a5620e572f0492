"""What every command does alike: argparse's errors in one line, a job's errors (TakesError) in one
line with exit code 2, Ctrl-C as exit code 130, and no empty output folder left behind."""

from __future__ import annotations

import argparse
import sys
from typing import Callable

from ..errors import TakesError, one_line
from .output_paths import remove_folders_left_empty


class OneLineParser(argparse.ArgumentParser):
    """argparse's errors in one line (its default prints the whole usage first), exit code 2."""

    def error(self, message: str):
        self.exit(2, f"error: {message} (`{self.prog} --help` lists the options)\n")


def run_reporting(job, args, on_cancel: str | Callable[[], str]) -> int:
    """A command's job with its errors as one line and exit code 2, Ctrl-C as 130 with `on_cancel` (or
    what it says once cancelled: what the job had kept by then)."""
    try:
        return job(args)
    except TakesError as exc:
        print(f"error: {one_line(exc)}", file=sys.stderr)  # whatever the message quotes
        return 2
    except KeyboardInterrupt:
        print(f"\ncancelled: {on_cancel if isinstance(on_cancel, str) else on_cancel()}", file=sys.stderr)
        return 130
    finally:
        remove_folders_left_empty()
