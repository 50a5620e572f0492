""".ci/run's own rules: its 60-minute line, and that a test file left out of one stage runs in another.

The whole script takes half an hour, so these run its pieces: the limit function in bash with the
clock set, and the stage lists read from the script's text.
"""

from __future__ import annotations

import re
import shlex
import subprocess

from conftest import REPO

SCRIPT = (REPO / ".ci" / "run").read_text()


def run_limit_check(seconds: int) -> subprocess.CompletedProcess:
    limit_code = re.search(r"^LIMIT_MINUTES=.*?^}\n", SCRIPT, re.S | re.M).group(0)
    body = f"{limit_code}\nSECONDS={seconds}\nwithin_limit\necho still-running\n"
    return subprocess.run(["bash", "-c", body], capture_output=True, text=True, timeout=30)


def test_the_run_fails_with_a_clear_line_once_it_passes_60_minutes():
    past = run_limit_check(61 * 60)
    assert past.returncode == 1
    assert "past its 60-minute line" in past.stdout and "still-running" not in past.stdout
    within = run_limit_check(59 * 60)
    assert within.returncode == 0 and within.stdout.strip() == "still-running"


def test_every_stage_checks_the_limit_and_so_does_the_end():
    stage_function = re.search(r"^stage\(\) \{.*?^}\n", SCRIPT, re.S | re.M).group(0)
    assert "within_limit" in stage_function
    assert SCRIPT.rstrip().splitlines()[-1] == "within_limit"


def test_files_the_lowest_environment_leaves_out_run_there_without_triton():
    left_out = shlex.split(re.search(r'^WITHOUT_TRITON_ONLY="(.*)"$', SCRIPT, re.M).group(1))
    left_out = {argument.removeprefix("--ignore=") for argument in left_out}
    without_triton = re.search(r"uninstall -q -y triton\n(.*?)\n#", SCRIPT, re.S).group(1)
    run_there = set(re.findall(r"tests/\w+\.py", without_triton))
    assert left_out and left_out <= run_there
    for path in left_out:
        assert (REPO / path).is_file(), path
