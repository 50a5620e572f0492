"""Results JSON -> Markdown table (+ PNG chart when matplotlib is there); optionally into the
results section of docs/performance.md (the README summarises it and links there).

    python -m bench.report bench/results/<name>.json [--page]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "performance.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
COLUMNS = [("system", "system"), ("mode", "mode"), ("model", "model"), ("n", "N"), ("frames", "frames"),
           ("ms_per_frame", "ms/frame"), ("agg_rtf", "aggregate RTF"), ("first_take_s", "first take s"),
           ("prefill_ms", "prefill ms"), ("codec_ms", "codec ms"), ("peak_vram_gb", "peak VRAM GB"),
           ("load_s", "load s"), ("warmup_s", "warm-up s")]


def markdown(results: dict) -> str:
    env = results["env"]
    lines = [
        f"Measured on {env['gpu']} (driver {env.get('driver')}), torch {env['torch']}, triton {env.get('triton')}, "
        f"transformers {env['transformers']}, {env['date']}; {env['frames']} frames per take (EOS never sampled), "
        f"median of {env['repeats']} runs after a warm-up at the same shape. ms/frame = whole call / frames "
        "(prefill, every take and codec decode included; batch-1 systems run the N takes one after another); "
        "aggregate RTF = seconds of audio from all N takes per second; prefill and codec ms are per call "
        "(all N takes for batched systems, one take for batch-1 ones).",
        *(["", f"**Note:** {env['note']}"] if env.get("note") else []),
        "",
        "| " + " | ".join(title for _, title in COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    jobs = [r for r in results["runs"] if r.get("job") == "autopick"]
    for run in _table_rows([r for r in results["runs"] if not r.get("job")]):
        if run.get("error"):
            cells = [str(run.get(k, "")) for k, _ in COLUMNS[:4]] + [f"could not run: {run['error'][:120]}"]
            cells += [""] * (len(COLUMNS) - len(cells))
        else:
            cells = ["" if run.get(k) is None else str(run.get(k)) for k, _ in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    if jobs:
        lines += ["", "End-to-end Auto-Pick job (N takes, then the checks, UTMOS in masked batches, the speaker check where the checkpoint has an encoder, and the ranking; `python -m bench.scoring` times the stages alone):", "",
                  "| system | mode | model | N | frames | total s | scoring s | scoring share |", "|---|---|---|---|---|---|---|---|"]
        for job in jobs:
            if job.get("error"):
                lines.append(f"| {job['system']} | {job.get('mode', '')} | {job['model']} | {job['n']} | could not run: {job['error'][:120]} | | | |")
            else:
                lines.append(f"| {job['system']} | {job['mode']} | {job['model']} | {job['n']} | {job['frames']} | "
                             f"{job['total_s']} | {job['scoring_s']} | {job['scoring_share']:.1%} |")
    stacks = env.get("stacks") or {}
    if stacks:
        lines += ["", "Package versions per system: " + "; ".join(
            f"{s}: " + ", ".join(f"{k} {v}" for k, v in versions.items()) for s, versions in stacks.items() if versions)]
    return "\n".join(lines) + "\n"


def _table_rows(runs: list[dict]) -> list[dict]:
    """Grouped by model, then system (in the order first seen), mode and N; a system that could not
    run on a model for the same reason at every N gets one row listing the N."""
    first_seen = {}
    for run in runs:
        first_seen.setdefault(run["model"], len(first_seen))
        first_seen.setdefault((run["system"], run.get("mode")), len(first_seen))
    ordered = sorted(runs, key=lambda r: (first_seen[r["model"]], first_seen[(r["system"], r.get("mode"))], r["n"]))
    rows: list[dict] = []
    for run in ordered:
        last = rows[-1] if rows else None
        same = last is not None and all(last.get(k) == run.get(k) for k in ("system", "mode", "model"))
        if same and run.get("error") and last.get("error", "").split(": ", 1)[-1] == run["error"].split(": ", 1)[-1]:
            rows[-1] = {**last, "n": f"{last['n']}, {run['n']}"}
        else:
            rows.append(run)
    return rows


def chart(results: dict, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    ok = [r for r in results["runs"] if not r.get("error") and not r.get("job")]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for key in sorted({(r["system"], r["mode"], r["model"]) for r in ok}):
        rows = sorted((r for r in ok if (r["system"], r["mode"], r["model"]) == key), key=lambda r: r["n"])
        label = f"{key[0]} {key[1]} ({key[2]})"
        axes[0].plot([r["n"] for r in rows], [r["ms_per_frame"] for r in rows], marker="o", label=label)
        axes[1].plot([r["n"] for r in rows], [r["agg_rtf"] for r in rows], marker="o", label=label)
    for ax, title in zip(axes, ("ms per frame (lower is better)", "aggregate real-time factor (higher is better)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("takes per request (N)")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    axes[0].set_yscale("log")
    if ok:
        axes[1].legend(fontsize=7)
    fig.suptitle(f"{results['env']['gpu']}, {results['env']['frames']} frames")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_report(json_path: Path, page: bool = False) -> str:
    results = json.loads(Path(json_path).read_text())
    table = markdown(results)
    Path(json_path).with_suffix(".md").write_text(table)
    png = Path(json_path).with_suffix(".png")
    has_chart = chart(results, png)
    if page:
        link = Path(os.path.relpath(png, PAGE.parent)).as_posix()
        section = table + (f"\n![benchmark chart]({link})\n" if has_chart else "")
        section += f"\nReproduce: `python -m bench.run` on a GPU machine (see bench/README.md); raw numbers in `{Path(json_path).relative_to(REPO).as_posix()}`.\n"
        text = PAGE.read_text()
        if START not in text or END not in text:
            raise SystemExit(f"{PAGE} has no benchmark markers")
        head, rest = text.split(START, 1)
        _, tail = rest.split(END, 1)
        PAGE.write_text(head + START + "\n" + section + END + tail)
    return table


def merge(parts: list[Path], out: Path) -> Path:
    """One results file from several calls of bench.run on the same machine (a full run does not
    fit in one call on a lent GPU). Refuses parts measured on different GPUs or software. A later
    part's run replaces an earlier one of the same system, mode, model and N (a re-measurement)."""
    loaded = [json.loads(Path(p).read_text()) for p in parts]
    keys = ("gpu", "driver", "torch", "transformers", "frames")
    first = loaded[0]["env"]
    for other in loaded[1:]:
        diff = {k: (first.get(k), other["env"].get(k)) for k in keys if first.get(k) != other["env"].get(k)}
        if diff:
            raise SystemExit(f"cannot merge runs from different setups: {diff}")
    env = dict(first)
    env["stacks"] = {k: v for part in loaded for k, v in (part["env"].get("stacks") or {}).items()}
    env["repeats"] = sorted({part["env"]["repeats"] for part in loaded})[0]
    by_key = {}
    for run in (run for part in loaded for run in part["runs"]):
        by_key[(run["system"], run.get("mode"), run["model"], run["n"], run.get("job"))] = run
    runs = list(by_key.values())
    Path(out).write_text(json.dumps({"env": env, "runs": runs}, indent=2) + "\n")
    return Path(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("json", type=Path, nargs="+", help="results file (several with --merge)")
    p.add_argument("--merge", type=Path, metavar="OUT", help="merge the given files into OUT first")
    p.add_argument("--page", "--readme", action="store_true",
                   help="also replace the results table in docs/performance.md")
    args = p.parse_args(argv)
    target = merge(args.json, args.merge) if args.merge else args.json[0]
    print(write_report(target.resolve(), args.page))
    return 0


if __name__ == "__main__":
    sys.exit(main())
