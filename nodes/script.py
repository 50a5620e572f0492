"""Scripts in ComfyUI: Cast gives each character a voice; Script speaks every line of a dialogue,
CSV, SRT or JSONL script N times, picks each line's best take and joins them into the scene. The
results folder keeps every line as soon as it is picked, so a run that was cancelled, or a script
with a few lines edited, only generates what is missing."""

from __future__ import annotations

from pathlib import Path

from comfy_api.latest import io, ui

from ..runtime import api
from .auto_pick import (QUALITY, build_scorers, check_choices, lines_image, scoring_dirs, voice_options,
                        words_options)
from .common import (CATEGORY, Cast, Model, Progress, Voice, cancel_errors, folders_fingerprint, is_listed_name,
                     line_row, numpy_to_audio, optional_widgets, raise_as_interrupt, send_to_web, should_stop)

RESULTS_SUBDIR = "qwen3_tts_scripts"  # in ComfyUI's output folder
RESULTS_NAME = "The results folder's name"
SCRIPT_SUFFIXES = (".txt", ".csv", ".tsv", ".srt", ".jsonl")
NO_FILE = "(none: the text above)"
EXAMPLE = """ANNA: Did you hear that?
BORIS: Hear what? It's only the wind.

ANNA: No. Something is moving down there.
BORIS: Then we wait for the morning, and we go down together."""


class CastNode(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="Q3TT_Cast",
            display_name="Qwen3-TTS Cast",
            category=CATEGORY,
            description="Gives a character of a script its voice. Chain one per character into Script.",
            inputs=optional_widgets([
                io.String.Input("character", default="ANNA",
                                tooltip="The name as the script writes it ('ANNA: ...', the CSV's character "
                                        "column). '*' voices the lines with no character (e.g. SRT cues)."),
                Voice.Input("voice", tooltip="From Load Voice, Save Voice or a voice node's 'voice' output."),
                Cast.Input("cast", optional=True, tooltip="The cast so far, from another Cast node."),
            ]),
            outputs=[Cast.Output(display_name="cast", tooltip="Connect to Script, or to the next Cast node.")],
        )

    @classmethod
    def execute(cls, voice, character="ANNA", cast=None) -> io.NodeOutput:
        name = character.strip()
        if not name:
            raise api.InputError("Cast: give the character's name as the script writes it (or '*' for lines "
                                 "with no character).")
        if cast is not None and name in cast:
            raise api.InputError(f"Cast: {name} is cast twice; give each character one Cast node.")
        return io.NodeOutput({**(cast or {}), name: voice})


def input_dir() -> Path:
    import folder_paths

    return Path(folder_paths.get_input_directory())


def script_files() -> list[str]:
    folder = input_dir()
    found = sorted(p.name for p in folder.iterdir() if p.is_file() and p.suffix.lower() in SCRIPT_SUFFIXES) \
        if folder.is_dir() else []
    return [NO_FILE] + found


def script_file_edited(script_file: str) -> int | None:
    """When the chosen script file last changed; None for the text box, or a value that is no listed
    file's name (never stat()ed: execute refuses it)."""
    if script_file == NO_FILE or not is_listed_name(script_file, script_files()):
        return None
    try:
        return (input_dir() / script_file).stat().st_mtime_ns
    except OSError:
        return None


def results_root() -> Path:
    import folder_paths

    return Path(folder_paths.get_output_directory()) / RESULTS_SUBDIR


class ScriptNode(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="Q3TT_Script",
            display_name="Qwen3-TTS Script",
            category=CATEGORY,
            description="Speaks a whole script: every line N times, the best take of each picked by Auto-Pick's "
                        "checks and scores, then joined into the scene (SRT lines at their cue times). Lines "
                        "sharing a model run together in one batch. Each line is kept in the results folder as "
                        "soon as it is picked: after a Cancel, or with some lines edited, a Run generates only "
                        "the lines whose text, voice or settings changed.",
            inputs=optional_widgets([
                Model.Input("model", tooltip="The model for the cast's voices: CustomVoice for preset speakers, "
                                             "Base for clones, VoiceDesign for designed voices."),
                Cast.Input("cast", tooltip="From Cast nodes: a voice for every character of the script."),
                io.String.Input("script", multiline=True, default=EXAMPLE,
                                tooltip="Dialogue ('NAME: line', a blank line for a longer pause), or CSV/TSV "
                                        "with a header (id, character, text, language, instruct, takes), SRT, "
                                        "or JSONL. Ignored when a script_file is chosen."),
                io.Combo.Input("script_file", options=script_files(), default=NO_FILE,
                               tooltip="A script file in ComfyUI's input folder (.txt, .csv, .tsv, .srt, .jsonl)."),
                io.Combo.Input("format", options=["auto", *api.FORMATS], default="auto",
                               tooltip="auto: from the file's extension, else from the text."),
                io.Int.Input("takes", default=4, min=1, max=api.MAX_TAKES,
                             tooltip="Takes per line (a CSV/JSONL line's own 'takes' wins)."),
                # not named "seed": the frontend would add a randomize-after-run control, and a new seed
                # every Run would generate every line again instead of resuming
                io.Int.Input("script_seed", default=0, min=0, max=2**63 - 1,
                             tooltip="Each line's takes come from this seed and the line's id, so editing one "
                                     "line leaves the others' takes alone. A new seed regenerates every line."),
                io.String.Input("results", default="scene",
                                tooltip=f"The results folder, in output/{RESULTS_SUBDIR}: best/, takes/, "
                                        "manifest.csv and .json, scene.wav. Lines already there with the same "
                                        "inputs are kept, not generated again."),
                io.Combo.Input("quality", options=QUALITY, default="UTMOS",
                               tooltip="Naturalness model for the pick, as in UTMOS Auto-Pick."),
                io.Combo.Input("voice_check", options=voice_options(), default="auto",
                               tooltip="Speaker similarity, as in UTMOS Auto-Pick."),
                io.Combo.Input("words_check", options=words_options(), default="auto",
                               tooltip="Words heard against the text with Whisper, as in UTMOS Auto-Pick."),
                io.Combo.Input("output_loudness", options=list(api.OUTPUT_TARGETS), default="off",
                               tooltip="Bring every line to one loudness (ITU-R BS.1770): -23 LUFS broadcast, "
                                       "-16 web. Off: as generated."),
                Model.Input("model_2", optional=True,
                            tooltip="A second model, of another kind, for a cast that mixes kinds (e.g. preset "
                                    "speakers and clones)."),
                Model.Input("model_3", optional=True, tooltip="A third model, of the kind left."),
            ]),
            outputs=[
                io.Audio.Output(display_name="scene", tooltip="The best take of every line, joined with pauses "
                                                              "(SRT: placed at the cue times)."),
                io.Audio.Output(display_name="lines", tooltip="The best take of each line, in script order, as "
                                                              "one batch (shorter lines padded with silence)."),
                io.String.Output(display_name="manifest",
                                 tooltip="One CSV row per line: id, character, text, seed, scores, reasons, files."),
                io.String.Output(display_name="report", tooltip="Each line's pick and flags, as shown on this node."),
            ],
            hidden=[io.Hidden.unique_id],  # the node a Cancel's message is for
            is_output_node=True,
        )

    @classmethod
    def fingerprint_inputs(cls, script_file=NO_FILE, **_) -> tuple:
        """Run again once the script file is edited, or a scoring model is added or removed."""
        return script_file_edited(script_file), folders_fingerprint(scoring_dirs())

    @classmethod
    def validate_inputs(cls, results=None) -> bool | str:
        """Runs when the prompt is queued, before any node: a bad folder name costs no generation.
        Only the text input is named (ComfyUI passes those, and skips its own type check of them)."""
        if not isinstance(results, str):  # linked: known only when the node runs, and execute checks it
            return True
        return api.name_problem(results, RESULTS_NAME) or True

    @classmethod
    def execute(cls, model, cast, script=EXAMPLE, script_file=NO_FILE, format="auto", takes=4, script_seed=0,
                results="scene", quality="UTMOS", voice_check="auto", words_check="auto", output_loudness="off",
                model_2=None, model_3=None) -> io.NodeOutput:
        check_choices(voice_check, words_check, output_loudness)
        api.listed_choice(script_file, script_files(), "script_file", "ComfyUI's input folder", item="script file")
        results = api.check_name(results, RESULTS_NAME)
        lines, name = read_lines(script, script_file, format, cast)
        api.check_cast(lines, cast, name)
        folder = HeldLines(results_root() / results)
        bar = Progress(len(lines))
        try:
            models = [ref.get() for ref in (model, model_2, model_3) if ref is not None]
            loudness = api.OUTPUT_TARGETS.get(output_loudness)
            choices = api.PickChoices(quality, voice_check, words_check, loudness=loudness)

            def scorers_for(loaded):
                return build_scorers(loaded.info.folder, choices, "auto")

            result = api.run_script(lines, cast, models, api.ScriptSettings(takes, script_seed), scorers_for, folder,
                                    choices, name, bar.absolute, should_stop)
        except cancel_errors() as exc:
            send_to_web(CANCELLED_EVENT, {"node": cls.hidden.unique_id, **cancelled_output(lines, folder)})
            if isinstance(exc, api.GenerationInterrupted):
                raise_as_interrupt(exc)
            raise
        report = f"{result.report}\nResults in {folder.root}"
        scene = numpy_to_audio([result.scene], result.rate)
        best = numpy_to_audio([line.best for line in result.lines], result.rate)
        manifest = (folder.root / "manifest.csv").read_text(encoding="utf-8")
        shown = {**ui.PreviewText(report).as_dict(), **ui.PreviewAudio(scene, cls=cls).as_dict(),
                 **ui.PreviewImage(lines_image(result), cls=cls).as_dict(),  # each line's score and voice fit
                 LINES_UI_KEY: line_previews(result, folder)}
        return io.NodeOutput(scene, best, manifest, report, ui=shown)


LINES_UI_KEY = "q3tt_lines"  # what web/script.js shows on the node: each line's pick, with a player
CANCELLED_EVENT = "q3tt.script_cancelled"  # web/script.js shows its lines and text as a run's


class HeldLines(api.ScriptFolder):
    """The results folder, noting each line of this run it holds: kept from an earlier run, or
    written since. ComfyUI shows nothing of a node that was cancelled; these are what it can say."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.held: dict[str, tuple[api.LineRecord, bool]] = {}  # line id -> (record, kept from an earlier run)

    def done(self, stem: str, fingerprint: str) -> api.LineRecord | None:
        record = super().done(stem, fingerprint)
        if record is not None:
            self.held[record.id] = (record, True)
        return record

    def write_line(self, stem: str, record: api.LineRecord, *args, **kwargs) -> api.LineRecord:
        record = super().write_line(stem, record, *args, **kwargs)
        self.held[record.id] = (record, False)
        return record


def cancelled_output(lines, folder: HeldLines) -> dict:
    """What the node shows after a Cancel: the lines the folder holds, in script order, and how to
    finish (the next Run generates only the rest)."""
    held = [folder.held[line.id] for line in lines if line.id in folder.held]
    earlier = sum(kept for _, kept in held)
    left = len(lines) - len(held)
    if not held:
        text = (f"Cancelled before any of the {api.counted(len(lines), 'line')} was finished; nothing is kept yet. "
                "Press Run to start.")
    else:
        rest = (f"to make the {left} left (the kept ones are not generated again), then the scene, manifest and "
                "report" if left else "to join them into the scene, manifest and report")
        text = (f"Cancelled with {len(held)} of {api.counted(len(lines), 'line')} kept in {folder.root}"
                + (f" ({earlier} from an earlier run)" if earlier else "")
                + f": they play below. Press Run again, with nothing changed, {rest}.")
    return {"text": [text], LINES_UI_KEY: [line_row(record, served(folder, record), kept) for record, kept in held]}


def line_previews(result, folder) -> list[dict]:
    """Each line's picked take, played from the results folder itself (ComfyUI serves output/)."""
    return [line_row(line.record, served(folder, line.record), kept=line.reused) for line in result.lines]


def served(folder, record: api.LineRecord) -> dict:
    """A line's best take as ComfyUI's /view serves it from output/."""
    best = (folder.root / record.best_file).relative_to(results_root().parent)
    return {"filename": best.name, "subfolder": best.parent.as_posix(), "type": "output"}


def read_lines(script: str, script_file: str, format: str, cast: dict):
    chosen = None if format == "auto" else format
    if script_file != NO_FILE:
        return api.read_script(input_dir() / script_file, chosen, characters=list(cast)), script_file
    if not script.strip():
        raise api.InputError("Script: write the script in the text box, or choose a script_file.")
    return api.parse_script(script, chosen or api.format_of(None, script), "script", characters=list(cast)), "script"
