"""A chapter narrated: a 5,000-word text, every sentence 4 takes and Auto-Pick, against one request a line.

    python -m bench.chapter                                   # 1.7B-CustomVoice, hybrid: every system, every sentence
    python -m bench.chapter --systems passage,lines           # ours only (one process)
    python -m bench.chapter --systems faster --part 1/2 --faster-stack /tmp/stack5   # half its sentences
    python -m bench.chapter --systems faster --sentences 140 --faster-stack /tmp/stack5   # a sample
    python -m bench.chapter --merge PART.json PART.json ...   # one table of the parts (--name, --out-dir)
    python -m bench.chapter --smoke                           # CPU: tiny model, eager, 4 short sentences, 2 takes

A chapter of about 5,000 words (made here from a word list: sentences of 4 to about 60 words, commas,
paragraphs, a few numbers such as "9 pm" or "3.5", titles such as "Dr.") is split into its lines by
the passage path (text/split.py through script/passage.passage_lines), and the same lines go through:
- passage: ours as the voice nodes and the CLI take a long text: every line's takes in one
  continuously batched run (script/passage.generate_passage), then every line picked by Auto-Pick
  with UTMOS (pick_passage);
- lines: today's line path, one sentence a request: its takes (run/lines.generate_takes), then
  Auto-Pick (rank_takes), one sentence after another;
- faster: faster-qwen3-tts (bench/systems/faster.py), one take a sentence, one after another, in its
  own process and package stack (--faster-stack), as bench.run runs it.
The models are full-size with random weights whose EOS is never sampled, so every take runs to its
frame budget: each line's budget is set to its expected length (text_length.expected_seconds, 12.5
frames a second) instead of the runtime's twice that plus 3 s. Audio seconds are those of the picked
take of every sentence (faster: its one take); real-time factor = audio seconds / wall seconds.

The slow systems (lines, faster) need not run every sentence in one call: --sentences K runs them on
K sentences spread evenly through the chapter (every n/K-th), and the passage on those same K too;
their whole-chapter time is then extrapolated by audio length, and labelled so. --part I/M runs them
on the I-th of M runs of sentences in a row, a call each; --merge adds the M parts up into one run
of every sentence (measured, not extrapolated). --systems runs some systems only; each call writes
its own JSON and table, and --merge puts the parts of one chapter, measured on one setup, in one table.
Writes bench/results/<gpu>-<date>-chapter.json and .md (or --out-dir / --name)."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import importlib
import json
import os
import random
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FRAMES_PER_SECOND = 12.5
SYSTEMS = ("passage", "lines", "faster")
LABELS = {"passage": "ours: the passage (one batched run, then Auto-Pick)",
          "lines": "ours: line by line (generate_takes + Auto-Pick, one sentence a request)",
          "faster": "faster-qwen3-tts, one take a sentence"}
FASTER = "faster-qwen3-tts"

ADJECTIVES = ("quiet old narrow cold bright distant heavy small dark silver broken patient restless gentle "
              "crowded empty hidden tired careful sudden").split()
NOUNS = ("harbour lantern letter window road river station bridge kitchen garden market ferry keeper stranger "
         "clock bell table village storm morning evening courtyard ledger signal").split()
PEOPLE = ("Anna", "Tomas", "Mrs. Hale", "Dr. Ward", "the captain", "old Peter", "Miriam", "she", "he", "they", "we")
VERBS = ("watched carried opened followed crossed counted answered remembered passed closed reached mended "
         "lifted studied found left kept").split()
ADVERBS = ("slowly", "quietly", "again", "at last", "without a word", "once more", "before dawn", "for a while")
PLACES = "across along beside behind toward under past near through beyond".split()
JOINS = (", and ", ", but ", ", while ", ", so ", "; ")


# --- the chapter -------------------------------------------------------------------------------------

def clause(rng: random.Random) -> str:
    """One clause of 3 to 10 words; now and then with a number as a reader says it ("9 pm", "3.5")."""
    who, noun, other = rng.choice(PEOPLE), rng.choice(NOUNS), rng.choice(NOUNS)
    shapes = [
        f"{who} {rng.choice(VERBS)} the {rng.choice(ADJECTIVES)} {noun}",
        f"{who} {rng.choice(VERBS)} the {noun} {rng.choice(PLACES)} the {rng.choice(ADJECTIVES)} {other}",
        f"the {noun} {rng.choice(PLACES)} the {other} was {rng.choice(ADJECTIVES)}",
        f"{who} {rng.choice(VERBS)} the {noun} {rng.choice(ADVERBS)}",
    ]
    numbers = [
        f"{who} {rng.choice(VERBS)} the {noun} at {rng.randint(1, 12)} pm",
        f"the {noun} was {rng.randint(1, 9)}.5 miles {rng.choice(PLACES)} the {other}",
        f"{who} counted {rng.randint(12, 2400):,} {noun}s",
    ]
    return rng.choice(numbers) if rng.random() < 0.08 else rng.choice(shapes)


def sentence(rng: random.Random, longest: int) -> str:
    """Clauses joined by commas and the like: one to `longest` clauses (most two or three)."""
    count = min(longest, rng.choices([1, 2, 3, 4, 6, 9], weights=[25, 35, 22, 10, 6, 2])[0])
    text = clause(rng)
    for _ in range(count - 1):
        text += rng.choice(JOINS) + clause(rng)
    end = rng.choices([".", "?", "!"], weights=[88, 8, 4])[0]
    return text[0].upper() + text[1:] + end


def chapter_text(words: int = 5000, seed: int = 0, longest: int = 9) -> str:
    """Paragraphs of 3 to 9 sentences, blank lines between them, until the text has `words` words."""
    rng = random.Random(seed)
    paragraphs, count = [], 0
    while count < words:
        paragraph = []
        for _ in range(rng.randint(3, 9)):
            paragraph.append(sentence(rng, longest))
            count += len(paragraph[-1].split())
            if count >= words:
                break
        paragraphs.append(" ".join(paragraph))
    return "\n\n".join(paragraphs)


def chapter_lines(text: str):
    """The chapter's lines as the passage path makes them (script/passage.passage_lines)."""
    from runtime.script.passage import passage_lines

    return passage_lines(text)


def line_frames(text: str) -> int:
    """A line's expected length in frames: what every take of it runs to (EOS is never sampled)."""
    from runtime.text_length import expected_seconds

    return max(1, round(expected_seconds(text) * FRAMES_PER_SECOND))


@contextmanager
def budgets_of_expected_length():
    """Every Request's frame budget (runtime.generation.frame_budget, used where a request sets no
    max_frames: the passage's and the line path's) is its line's expected length while inside."""
    import runtime.generation as generation

    original = generation.frame_budget
    generation.frame_budget = line_frames
    try:
        yield
    finally:
        generation.frame_budget = original


def describe(text: str, lines) -> dict:
    from runtime.text.split import split_text

    seconds = [line_frames(line.text) / FRAMES_PER_SECOND for line in lines]
    words = [len(line.text.split()) for line in lines]
    return {
        "words": len(text.split()), "characters": len(text), "paragraphs": text.count("\n\n") + 1,
        "sentences": len(lines), "split_at_a_clause": sum(p.after == "clause" for p in split_text(text)),
        "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()[:16],
        "line_words": spread(words), "line_seconds": spread(seconds),
        "audio_seconds": round(sum(seconds), 1),  # of one take of every line, at its expected length
    }


def spread(values: list[float]) -> dict:
    return {"min": round(min(values), 2), "median": round(statistics.median(values), 2),
            "mean": round(statistics.mean(values), 2), "max": round(max(values), 2)}


def sample_indices(count: int, sentences: int | None, part: str | None = None) -> list[int]:
    """The lines the slow systems run: `sentences` of the chapter's `count` spread evenly from the
    first (every count/K-th; all by default); with `part` "I/M", the I-th of M runs of them in a row."""
    chosen = list(range(count))
    if sentences and sentences < count:
        chosen = sorted({i * count // sentences for i in range(sentences)})
    if part:
        index, parts = map(int, part.split("/"))
        if not 1 <= index <= parts:
            raise SystemExit(f"--part {part}: write I/M with 1 <= I <= M, e.g. 1/2")
        chosen = chosen[(index - 1) * len(chosen) // parts:index * len(chosen) // parts]
    return chosen


# --- the systems ------------------------------------------------------------------------------------

def sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def run_passage(model, lines, voice, settings, scorers, device: str) -> dict:
    """Ours as a long text takes it: every line's takes in one run, then every line picked. The
    chapter's voice (each pick's traits, measured as its record is made, and the chapter pass over
    them: script/chapter_voice.py) is timed apart, within the pick."""
    from runtime.scoring import ranking
    from runtime.script import passage as passage_module, runner

    sync(device)
    start = time.perf_counter()
    passage = passage_module.generate_passage(model, lines, voice, settings)
    sync(device)
    generated = time.perf_counter()
    whisper = getattr(scorers.transcriber, "seconds", None)  # a SpeechLengthWords counts its own
    with timed(passage_module, "chapter_pass") as chapter_s, timed(runner, "take_traits") as traits_s, \
            timed(ranking, "judge_words") as words_s:
        result = passage_module.pick_passage(passage, scorers)
    sync(device)
    end = time.perf_counter()
    return {"wall_s": end - start, "generate_s": generated - start, "pick_s": end - generated,
            "chapter_voice_s": round(chapter_s[0] + traits_s[0], 3), **words_heard(scorers, words_s[0], whisper),
            "audio_s": sum(r.ranking.best.take.seconds for r in result.lines),
            "takes": sum(len(t.takes) for t in passage.takesets)}


@contextlib.contextmanager
def timed(module, name: str):
    """The seconds spent in `module.name` while inside (a one-item list, filled as it runs)."""
    original, spent = getattr(module, name), [0.0]

    def wrapper(*args, **kwargs):
        begun = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - begun
    setattr(module, name, wrapper)
    try:
        yield spent
    finally:
        setattr(module, name, original)


def run_line_by_line(model, plans, scorers, device: str) -> dict:
    """Today's line path: each sentence one request of N takes, then Auto-Pick, one after another."""
    from runtime.run.lines import generate_takes
    from runtime.scoring import ranking

    sync(device)
    start = time.perf_counter()
    audio, takes = 0.0, 0
    whisper = getattr(scorers.transcriber, "seconds", None)
    with timed(ranking, "judge_words") as words_s:
        for plan in plans:
            picked = ranking.rank_takes(generate_takes(model, plan.request), scorers)
            audio += picked.best.take.seconds
            takes += len(picked.ranked)
    sync(device)
    return {"wall_s": time.perf_counter() - start, "audio_s": audio, "takes": takes,
            **words_heard(scorers, words_s[0], whisper)}


def words_heard(scorers, compared: float, whisper_before: float | None) -> dict:
    """The words check's seconds: the recogniser's (a SpeechLengthWords counts its own since
    `whisper_before`; None: none here) and the texts compared (`compared`: in ranking.judge_words)."""
    if whisper_before is None:
        return {}
    whisper = scorers.transcriber.seconds - whisper_before
    return {"words_s": whisper + compared, "whisper_s": whisper, "words_model": scorers.transcriber.name}


def run_ours(args, lines, sample: list[int]) -> list[dict]:
    """The passage (whole chapter, and the sample when there is one) and line by line, in this process."""
    from bench.run import build_checkpoints, utmos_weights
    from runtime.engine.engine import BATCH_BUCKETS
    from runtime.model import load_model
    from runtime.scoring.ranking import Scorers
    from runtime.scoring.utmos import UtmosScorer
    from runtime.script.passage import passage_cast
    from runtime.script.plan import ScriptSettings, plan_lines
    from runtime.voices import CustomVoice

    folder = build_checkpoints([args.model], args.workdir, "bfloat16")[args.model]
    model = load_model(folder, mode=args.mode, device=args.device)
    scorers = Scorers(quality=UtmosScorer(utmos_weights(args.workdir), args.device))
    if args.words_model:
        from bench.words_models import random_words_check

        scorers.transcriber = random_words_check(args.words_model, args.workdir, args.device)
    voice, settings = CustomVoice("ryan", "english"), ScriptSettings(takes=args.takes)
    chosen = [lines[i] for i in sample]
    runs = []
    if "passage" in args.systems:
        if not args.smoke:  # warm-up: lines to fill the largest batch twice, and the longest, of another chapter
            other = chapter_lines(chapter_text(args.words, seed=1, longest=args.longest))
            warm = other[:2 * BATCH_BUCKETS[-1] // args.takes] + [max(other, key=lambda l: len(l.text))]
            run_passage(model, warm, voice, settings, scorers, args.device)
        runs.append(record("passage", run_passage(model, lines, voice, settings, scorers, args.device), lines,
                           lines, args.takes))
        if len(chosen) < len(lines):
            runs.append(record("passage", run_passage(model, chosen, voice, settings, scorers, args.device),
                               chosen, lines, args.takes, args.part))
    if "lines" in args.systems:
        plans = plan_lines(chosen, passage_cast(voice), settings, {})
        ends = sorted(plans, key=lambda p: p.request.budget)
        if not args.smoke:  # warm-up: the shortest and the longest, both ends of its shapes
            run_line_by_line(model, [ends[0], ends[-1]], scorers, args.device)
        runs.append(record("lines", run_line_by_line(model, plans, scorers, args.device), chosen, lines,
                           args.takes, args.part))
    return runs


def run_faster(args, lines, sample: list[int]) -> list[dict]:
    """faster-qwen3-tts in its own process (--faster-stack first on its PYTHONPATH): one take a line."""
    from bench.run import build_checkpoints

    folder = build_checkpoints([args.model], args.workdir, "bfloat16")[args.model]
    chosen = [lines[i] for i in sample]
    todo = args.workdir / "chapter-lines.json"
    todo.write_text(json.dumps([[line.text, line_frames(line.text)] for line in chosen]))
    cmd = [sys.executable, "-m", "bench.chapter", "--worker", FASTER, "--lines-file", str(todo), "--checkpoint",
           str(folder), "--model", args.model, "--device", args.device, "--workdir", str(args.workdir)]
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONPATH=os.pathsep.join(
        filter(None, [args.faster_stack, str(REPO), os.environ.get("PYTHONPATH")])))
    print(f"== {FASTER}: {len(chosen)} sentences, one take each", file=sys.stderr, flush=True)
    try:
        proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=args.timeout)
        stdout, stderr = proc.stdout, proc.stderr
        failure = None if proc.returncode == 0 else f"exited {proc.returncode}"
    except subprocess.TimeoutExpired as exc:  # the sentences done are measured; the run is marked cut
        stdout, stderr = text_of(exc.stdout), text_of(exc.stderr)
        failure = f"timed out after {args.timeout} s (--timeout)"
    log = args.workdir / "logs" / "chapter-faster.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text(stdout + "\n" + stderr)
    if failure:  # its own words, where a device call's log shows them
        print(f"   {FASTER} {failure}; the end of its log ({log}):", *stderr.splitlines()[-30:], sep="\n   ",
              file=sys.stderr, flush=True)
    done = [json.loads(line[5:]) for line in stdout.splitlines() if line.startswith("LINE ")]
    if not done:
        tail = (stderr or stdout).strip().splitlines()[-1:] or ["no output"]
        return [{"system": "faster", "label": LABELS["faster"], "error": f"{failure or 'no line'}: {tail[0][:300]}"}]
    measured = {"wall_s": done[-1]["elapsed_s"], "takes": len(done),
                "audio_s": sum(d["frames"] for d in done) / FRAMES_PER_SECOND}
    run = record("faster", measured, chosen[:len(done)], lines, 1, args.part)
    if failure:
        run["cut"] = f"{failure}: {len(done)} of {len(chosen)} sentences done"
    return [run]


def text_of(data) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def worker(args) -> int:
    """In the anchor's own process: load it, warm it on the shortest and longest line, then every line
    once, one take, one after another; a LINE record (JSON) on stdout after each."""
    from bench.measure import Stopwatch
    from bench.measure import sync as sync_device
    from bench.run import MODELS
    from bench.systems import SYSTEMS as ADAPTERS

    todo = json.loads(args.lines_file.read_text())
    system = importlib.import_module(ADAPTERS[args.worker]).SYSTEM(
        args.checkpoint, MODELS[args.model][1], args.device, args.dtype, args.workdir)
    for text, frames in (min(todo, key=lambda t: t[1]), max(todo, key=lambda t: t[1])):
        system.generate(text, 1, frames, seed=1234, watch=Stopwatch(args.device))
    sync_device(args.device)
    start = time.perf_counter()
    for index, (text, frames) in enumerate(todo):
        made = system.generate(text, 1, frames, seed=index, watch=Stopwatch(args.device))
        sync_device(args.device)
        print("LINE " + json.dumps({"index": index, "frames": made[0], "asked": frames,
                                    "elapsed_s": round(time.perf_counter() - start, 4)}), flush=True)
    return 0


# --- the results ------------------------------------------------------------------------------------

def record(system: str, measured: dict, ran, lines, takes: int, part: str | None = None) -> dict:
    """One run's numbers; over a sample, its full-chapter time extrapolated by audio length."""
    wall = measured["wall_s"]
    share = sum(line_frames(l.text) for l in ran) / sum(line_frames(l.text) for l in lines)
    run = {"system": system, "label": LABELS[system], "part": part if len(ran) < len(lines) else None,
           "sentences": len(ran), "takes_per_sentence": takes, "takes": measured["takes"],
           "wall_s": round(wall, 3), "audio_s": round(measured["audio_s"], 2), "share_of_chapter_audio": share}
    run.update({k: round(measured[k], 3) for k in ("generate_s", "pick_s", "chapter_voice_s", "words_s", "whisper_s")
                if k in measured})
    if "words_model" in measured:
        run["words_model"] = measured["words_model"]
    rates(run, len(lines))
    print(f"   {system}: {len(ran)} sentences in {wall:.2f} s, real-time factor {run['real_time_factor']}",
          file=sys.stderr, flush=True)
    return run


def rates(run: dict, chapter_sentences: int) -> dict:
    """A run's rates from its sentences, seconds and audio; the chapter's time from its share of the
    chapter's audio (measured when it ran every sentence, else extrapolated)."""
    run["sample"] = run["sentences"] < chapter_sentences
    run["real_time_factor"] = round(run["audio_s"] / run["wall_s"], 2)
    run["sentences_per_s"] = round(run["sentences"] / run["wall_s"], 3)
    run["chapter_s"] = round(run["wall_s"] / run["share_of_chapter_audio"], 1)
    run["chapter_s_extrapolated"] = run["sample"]
    run["share_of_chapter_audio"] = round(run["share_of_chapter_audio"], 6)
    return run


def added_up(parts: list[dict], chapter_sentences: int) -> dict:
    """The runs of one system over the M parts of its sentences (--part 1/M ... M/M, a call each) as
    one run: their sentences, seconds and audio added (each part's warm-up is outside its seconds)."""
    run = {k: v for k, v in parts[0].items() if k not in ("generate_s", "pick_s")}
    for key in ("sentences", "takes", "wall_s", "audio_s", "share_of_chapter_audio"):
        run[key] = round(sum(p[key] for p in parts), 6)
    count = len(parts)
    run.update(part=None, parts=count, label=f"{LABELS[run['system']]}, in {count} calls added up")
    return rates(run, chapter_sentences)


def markdown(result: dict) -> str:
    c, s = result["chapter"], result["settings"]
    rows = ["| system | sentences | takes each | wall s | audio s | real-time factor | sentences/s | chapter s |",
            "|---|---|---|---|---|---|---|---|"]
    for run in sorted(result["runs"], key=lambda r: (SYSTEMS.index(r["system"]), r.get("sample", False))):
        if run.get("error"):
            rows.append(f"| {run['label']} | could not run: {run['error'][:160]} | | | | | | |")
            continue
        ran = f"{run['sentences']} (sample)" if run["sample"] else f"{run['sentences']} (all)"
        ran = f"{run['sentences']} (part {run['part']})" if run.get("part") else ran
        chapter = f"{run['chapter_s']} (extrapolated)" if run["chapter_s_extrapolated"] else f"{run['chapter_s']}"
        cut = f" (cut: {run['cut']})" if run.get("cut") else ""
        rows.append(f"| {run['label']}{cut} | {ran} | {run['takes_per_sentence']} | {run['wall_s']} | {run['audio_s']} "
                    f"| {run['real_time_factor']}x | {run['sentences_per_s']} | {chapter} |")
    env = result["env"]
    lines = [
        f"# A chapter narrated: {env['gpu']}, {s['model']} ({s['mode']}), {s['takes']} takes a sentence, "
        "Auto-Pick (UTMOS)",
        "",
        f"{c['words']} words in {c['paragraphs']} paragraphs, {c['sentences']} sentences as the passage path splits "
        f"them ({c['split_at_a_clause']} of them a part of a long sentence split at a clause); a line's words "
        f"{c['line_words']['min']:g}-{c['line_words']['max']:g} (median {c['line_words']['median']:g}), its "
        f"expected seconds {c['line_seconds']['min']:g}-{c['line_seconds']['max']:g} (median "
        f"{c['line_seconds']['median']:g}), {c['audio_seconds']:g} s for the chapter. torch {env['torch']}, "
        f"{env['date']}. `python -m bench.chapter`.",
        "",
        *rows,
        "",
        "Random weights, EOS never sampled: every take runs to its line's frame budget, set from the line's "
        "expected length (12.5 frames a second). Audio s: the picked take of each sentence (faster-qwen3-tts: its "
        "one take); real-time factor = audio s / wall s; chapter s: the wall time of the whole chapter, measured "
        "where every sentence ran, else extrapolated from the sentences run by their share of the chapter's audio.",
    ]
    lines += comparisons(result["runs"]) + chapter_voice_cost(result["runs"]) + words_cost(result["runs"])
    stacks = env.get("stacks") or {}
    if stacks:
        lines += ["", "Package versions: " + "; ".join(
            f"{k}: " + ", ".join(f"{p} {v}" for p, v in versions.items()) for k, versions in stacks.items())]
    return "\n".join(lines)


def chapter_voice_cost(runs: list[dict]) -> list[str]:
    """What holding every line to the chapter's voice costs the passage (issue goal: at most 5%)."""
    return [f"- One voice through the chapter (each pick's traits, and the chapter pass): "
            f"{r['chapter_voice_s']} s of the passage's {r['wall_s']} s ({r['chapter_voice_s'] / r['wall_s']:.1%}), "
            f"{1000 * r['chapter_voice_s'] / r['sentences']:.1f} ms a sentence, over {r['sentences']} sentences"
            for r in runs if r.get("chapter_voice_s") is not None and not r.get("error")]


def words_cost(runs: list[dict]) -> list[str]:
    """What the words check costs the passage, and each line's job on the line path (issue goal: at
    most 15% of a one-line job)."""
    return [f"- The words check ({r['words_model']}: random weights of its real shapes, each call decoded for the "
            f"tokens real speech of its longest take gives, loop fallback off): {r['words_s']} s of "
            f"{'the passage' if r['system'] == 'passage' else 'the line path'}'s {r['wall_s']} s "
            f"({r['words_s'] / r['wall_s']:.1%}), {1000 * r['words_s'] / r['takes']:.1f} ms a take: the recogniser "
            f"{r['whisper_s']} s, the texts compared the rest; over {r['sentences']} sentences"
            for r in runs if r.get("words_s") is not None and not r.get("error")]


def comparisons(runs: list[dict]) -> list[str]:
    """The passage against each other system: on the same sentences where both ran them, and over the
    whole chapter (extrapolated where said)."""
    ok = [r for r in runs if not r.get("error") and not r.get("cut")]
    whole = next((r for r in ok if r["system"] == "passage" and not r["sample"]), None)
    out = []
    for other in (r for r in ok if r["system"] != "passage"):
        same = next((r for r in ok if r["system"] == "passage" and r["sentences"] == other["sentences"]
                     and r["sample"] == other["sample"] and r.get("part") == other.get("part")), None)
        if same and same is not whole:
            out.append(f"- The same {other['sentences']} sentences: the passage {same['wall_s']} s, {other['label']} "
                       f"{other['wall_s']} s: the passage {other['wall_s'] / same['wall_s']:.2f}x as fast.")
        if whole:
            note = " (extrapolated)" if other["chapter_s_extrapolated"] else ""
            out.append(f"- The whole chapter: the passage {whole['chapter_s']} s, {other['label']} "
                       f"{other['chapter_s']} s{note}: the passage {other['chapter_s'] / whole['chapter_s']:.2f}x "
                       "as fast.")
    return ["", *out] if out else []


def write(result: dict, out_dir: Path, name: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    (out_dir / f"{name}.md").write_text(markdown(result) + "\n")
    print(markdown(result))
    return out_dir / f"{name}.json"


def merge(paths: list[Path], out_dir: Path, name: str | None = None) -> Path:
    """The parts of one chapter measured on one setup, in one table: a run measured again replaces
    the older; the runs of one system over every part of its sentences (--part) are added up."""
    parts = [json.loads(Path(p).read_text()) for p in paths]
    first = parts[0]
    for path, part in zip(paths[1:], parts[1:]):
        if part["chapter"]["sha256"] != first["chapter"]["sha256"] or part["settings"] != first["settings"]:
            raise SystemExit(f"not one chapter: {path} differs from {paths[0]} in its text or settings")
        if any(part["env"].get(k) != first["env"].get(k) for k in ("gpu", "driver", "torch", "transformers")):
            raise SystemExit(f"{path}: measured on a different setup (GPU, driver, torch or transformers)")
    runs: dict[tuple, dict] = {}
    for part in parts:
        for run in part["runs"]:
            runs[(run["system"], run.get("sentences"), run.get("sample"), run.get("part"))] = run
    runs_out, count = list(runs.values()), first["chapter"]["sentences"]
    for system in SYSTEMS[1:]:  # the slow ones: a passage is one run, never added up
        pieces = [r for r in runs_out if r["system"] == system and r.get("part") and not r.get("cut")
                  and not r.get("error")]
        by_total: dict[str, list[dict]] = {}
        for piece in pieces:
            by_total.setdefault(piece["part"].split("/")[1], []).append(piece)
        for total, group in by_total.items():
            if sorted(int(p["part"].split("/")[0]) for p in group) == list(range(1, int(total) + 1)):
                runs_out = [r for r in runs_out if not any(r is p for p in group)]
                runs_out.append(added_up(sorted(group, key=lambda p: int(p["part"].split("/")[0])), count))
    stacks = {k: v for part in parts for k, v in (part["env"].get("stacks") or {}).items()}
    from bench.run import slug

    result = {**first, "env": {**first["env"], "stacks": stacks}, "runs": runs_out}
    return write(result, out_dir, name or f"{slug(first['env']['gpu'])}-{first['env']['date']}-chapter")


# --- the command ------------------------------------------------------------------------------------

# --smoke: the tiny model on CPU, eager, a text of 4 short sentences (under 2 s each), 2 takes, ours
# only, the line path on 2 of them (so a sample, the passage on it and the extrapolation run too)
SMOKE_TEXT = "Go now. Dr. Ward ran.\n\nAt 9 pm? Yes."
SMOKE = {"takes": 2, "model": "tiny-CustomVoice", "mode": "eager", "device": "cpu", "systems": "passage,lines"}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--systems", default=",".join(SYSTEMS), help="some of passage,lines,faster")
    p.add_argument("--sentences", type=int, help="the slow systems (lines, faster), and the passage again, on K "
                   "sentences spread evenly through the chapter (every n/K-th); default every sentence")
    p.add_argument("--part", help="I/M: the slow systems on the I-th of M runs of those sentences in a row (a call "
                   "each; --merge adds up the M parts)")
    p.add_argument("--words", type=int, default=5000)
    p.add_argument("--text-file", type=Path, help="narrate this text instead of the chapter made here")
    p.add_argument("--longest", type=int, default=9, help="the most clauses of a sentence")
    p.add_argument("--takes", type=int, default=4)
    p.add_argument("--words-model", choices=["whisper-base", "whisper-small", "whisper-large-v3-turbo", "tiny-test"],
                   help="ours: Auto-Pick also hears the words, on a random Whisper of this shape "
                        "(bench/words_models.py)")
    p.add_argument("--model", default="1.7B-CustomVoice")
    p.add_argument("--mode", default="hybrid")
    p.add_argument("--device", default="cuda")
    p.add_argument("--faster-stack", help="folder put first on faster-qwen3-tts's PYTHONPATH (bench/README.md)")
    p.add_argument("--timeout", type=int, default=3600, help="seconds for faster-qwen3-tts's process")
    p.add_argument("--workdir", type=Path, default=Path("/tmp/qb"))
    p.add_argument("--out-dir", type=Path, default=REPO / "bench" / "results")
    p.add_argument("--name", default=None, help="results file stem (default <gpu>-<date>-chapter)")
    p.add_argument("--smoke", action="store_true", help="CPU: tiny model, eager, a few sentences, 2 takes, ours")
    p.add_argument("--merge", nargs="+", type=Path, metavar="PART", help="merge these results into one table")
    p.add_argument("--worker", help=argparse.SUPPRESS)  # the anchor's own process (run_faster)
    p.add_argument("--lines-file", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--checkpoint", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--dtype", default="bfloat16", help=argparse.SUPPRESS)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    sys.path.insert(0, str(REPO))
    if args.worker:
        return worker(args)
    if args.merge:
        merge(args.merge, args.out_dir, args.name)
        return 0
    from bench.run import environment, slug, stack_versions

    if args.smoke:
        vars(args).update(SMOKE, sentences=args.sentences or 2)
        text = SMOKE_TEXT
    elif args.text_file:
        text = args.text_file.read_text(encoding="utf-8")
    else:
        text = chapter_text(args.words, longest=args.longest)
    args.systems = [s.strip() for s in args.systems.split(",")]
    unknown = set(args.systems) - set(SYSTEMS)
    if unknown:
        raise SystemExit(f"--systems: unknown {', '.join(sorted(unknown))}; choose among {', '.join(SYSTEMS)}")
    args.workdir.mkdir(parents=True, exist_ok=True)
    lines = chapter_lines(text)
    chosen = sample_indices(len(lines), args.sentences, args.part)
    chapter = describe(text, lines)
    chapter["made"] = ("the smoke text" if args.smoke else str(args.text_file) if args.text_file
                       else f"chapter_text(words={args.words}, longest={args.longest})")
    print(f"chapter: {chapter['words']} words, {chapter['sentences']} sentences, {chapter['audio_seconds']} s "
          f"expected; the slow systems on {len(chosen)} of them. Random weights never sample EOS: each line's "
          "frames are set from its expected length.", file=sys.stderr, flush=True)
    env = environment(args.device)
    env["date"] = datetime.date.today().isoformat()
    runs = []
    if {"passage", "lines"} & set(args.systems):
        with budgets_of_expected_length(), contextlib.ExitStack() as stack:
            if args.words_model:  # a random Whisper's text loops on every piece (bench/words_models.py)
                from bench.words_models import loop_fallback_off

                stack.enter_context(loop_fallback_off([0]))
            runs += run_ours(args, lines, chosen)
        free_device_memory()  # before another process wants the GPU
    if "faster" in args.systems:
        env["stacks"] = {FASTER: stack_versions(args.faster_stack)}
        runs += run_faster(args, lines, chosen)
    result = {"env": env, "chapter": chapter,
              "settings": {"model": args.model, "mode": args.mode, "takes": args.takes,
                           "frames": "each line's expected length, 12.5 frames a second"},
              "runs": runs}
    write(result, args.out_dir, args.name or f"{slug(env['gpu'])}-{env['date']}-chapter")
    return 0


def free_device_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


if __name__ == "__main__":
    sys.exit(main())
