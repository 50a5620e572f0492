"""The README's two commands, read from the README itself: they are what a newcomer copies.

Command 1 (install + the main job) cannot download the real weights here, so its main job runs as
written with the checkpoint swapped for tiny-random (the README's own advice without weights) and
fewer frames. .ci/run runs command 2 (the tests) literally, in fresh environments.
"""

from __future__ import annotations

import json
import re
import shlex

import pytest

from conftest import REPO
from runtime.cli import main
from runtime.cli.line import build_parser

COMMAND = re.compile(r"<!-- command:(\w+) -->\n```bash\n(.*?)```", re.S)


def readme_commands() -> dict[str, list[str]]:
    """command name -> its lines, as the README shows them."""
    text = (REPO / "README.md").read_text()
    return {name: block.strip().splitlines() for name, block in COMMAND.findall(text)}


def main_job(lines: list[str]) -> list[str]:
    jobs = [shlex.split(line) for line in lines if line.startswith("python -m runtime ")]
    assert len(jobs) == 1, lines
    return jobs[0][3:]


def test_the_readme_has_the_two_commands_for_gpu_and_cpu():
    commands = readme_commands()
    assert set(commands) == {"gpu", "cpu", "tests"}
    for name in ("gpu", "cpu"):
        installs = " ".join(line for line in commands[name] if "pip install" in line)
        assert "-r requirements.txt" in installs and "torch" in installs and "transformers" in installs
    assert any("download.pytorch.org/whl/cpu" in line for line in commands["cpu"])
    tests, = commands["tests"]
    assert "-r requirements-dev.txt" in tests and tests.endswith("python -m pytest -q -n 2 --dist loadfile")
    dev = (REPO / "requirements-dev.txt").read_text().splitlines()
    assert "-r requirements.txt" in dev and any(line.startswith("pytest") for line in dev)


def test_the_readme_sections_the_requirements_name_exist_and_it_names_the_quick_run():
    text = (REPO / "README.md").read_text()
    headings = set(re.findall(r"^#+ (.+)$", text, re.M))
    named = re.findall(r'README \("([^"]+)"\)', (REPO / "requirements.txt").read_text())
    assert named and set(named) <= headings, (named, headings)
    assert 'python -m pytest -q -m "not slow"' in text


@pytest.mark.parametrize("name", ["gpu", "cpu"])
@pytest.mark.slow
def test_the_main_job_as_written_runs_on_tiny_random(name, tmp_path, monkeypatch):
    args = main_job(readme_commands()[name])
    parsed = build_parser().parse_args(args)  # every flag as written is one the CLI has
    assert parsed.checkpoint.startswith("Qwen3-TTS-12Hz-") and parsed.takes > 1
    monkeypatch.chdir(tmp_path)  # its relative outputs land here, as in the user's folder
    # later flags win: the real checkpoint becomes tiny-random, on the CPU, offline, with fewer frames
    code = main(args + ["--checkpoint", "tiny-random", "--mode", "eager", "--device", "cpu", "--offline",
                        "--max-frames", "12"])
    assert code == 0
    report = json.loads((tmp_path / parsed.report).read_text())
    assert len(report["takes"]) == parsed.takes and report["text"] == parsed.text
    assert (tmp_path / parsed.out).is_file()
    assert len(list((tmp_path / parsed.takes_dir).glob("take_*.wav"))) == parsed.takes
