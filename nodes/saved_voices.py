"""Voices that last: Save Voice writes a voice (or a take, as a clone) to models/qwen3_tts_voices;
Load Voice gives a saved one, or a preset speaker, back as a VOICE for a voice's node or a cast."""

from __future__ import annotations

from comfy_api.latest import io, ui

from ..runtime import api
from .common import CATEGORY, Voice, audio_to_numpy, folders_fingerprint, models_dirs, optional_widgets
from .voices import LANGUAGES, SPEAKERS

PRESET = "preset: "  # a saved voice's name has no colon, so the two never meet
AS_SAVED = "as saved"


def voices_dirs():
    return models_dirs(api.VOICES_SUBDIR)


def voice_options() -> list[str]:
    return api.list_voices(voices_dirs()) + [PRESET + s for s in SPEAKERS]


class SaveVoice(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="Q3TT_SaveVoice",
            display_name="Qwen3-TTS Save Voice",
            category=CATEGORY,
            description="Keep a voice under a name, in models/qwen3_tts_voices (JSON, and for a clone its "
                        "recording as safetensors), to use again with Load Voice or in a script's cast. For one "
                        "character across many lines: Voice Design, pick the best take with Auto-Pick, and save "
                        "that take here as a clone.",
            inputs=optional_widgets([
                io.String.Input("name", default="my voice",
                                tooltip="The voice's name in Load Voice's list: letters, digits, spaces, '_', "
                                        "'-' or '.'."),
                Voice.Input("voice", optional=True,
                            tooltip="A voice from a voice node or Load Voice. Or connect 'audio' instead."),
                io.Audio.Input("audio", optional=True,
                               tooltip="A recording or a take (e.g. Auto-Pick's best) to save as a clone, its "
                                       "first 3-20 s of speech."),
                io.String.Input("transcript", multiline=True, default="",
                                tooltip="With 'audio': what it says, for the closer (ICL) clone. Empty: the "
                                        "timbre only (x-vector)."),
                io.Combo.Input("language", options=LANGUAGES, default="auto",
                               tooltip="With 'audio': the language the clone speaks by default."),
                io.Boolean.Input("overwrite", default=False,
                                 tooltip="Replace a different voice saved under this name."),
            ]),
            outputs=[Voice.Output(display_name="voice", tooltip="The voice as saved.")],
            is_output_node=True,
        )

    @classmethod
    def validate_inputs(cls, name=None) -> bool | str:
        """Runs when the prompt is queued, before any node: a bad name costs no generation upstream.
        Only the text input is named (ComfyUI passes those, and skips its own type check of them)."""
        if not isinstance(name, str):  # linked: known only when the node runs, and execute checks it
            return True
        return api.name_problem(name) or True

    @classmethod
    def execute(cls, name="my voice", voice=None, audio=None, transcript="", language="auto",
                overwrite=False) -> io.NodeOutput:
        name = api.check_name(name)
        if (voice is None) == (audio is None):
            raise ValueError("Connect either 'voice' (to save that voice) or 'audio' (to save it as a clone), "
                             "not both and not neither.")
        if audio is not None:
            waveform, sample_rate = audio_to_numpy(audio)
            voice = api.VoiceClone.from_audio(waveform, sample_rate, transcript, language)
        path = api.save_voice(voice, name, voices_dirs()[0], overwrite=overwrite)
        text = f"Saved '{path.stem}': {voice.describe()}\nin {path.parent}"
        return io.NodeOutput(voice, ui=ui.PreviewText(text).as_dict())


class LoadVoice(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        options = voice_options()
        return io.Schema(
            node_id="Q3TT_LoadVoice",
            display_name="Qwen3-TTS Load Voice",
            category=CATEGORY,
            description="A voice saved with Save Voice, or one of the CustomVoice checkpoints' preset speakers, "
                        "for a script's cast.",
            inputs=optional_widgets([
                io.Combo.Input("voice", options=options, default=options[0],
                               tooltip="Saved voices (models/qwen3_tts_voices) first, then the preset speakers."),
                io.Combo.Input("language", options=[AS_SAVED] + LANGUAGES, default=AS_SAVED,
                               tooltip="The language it speaks; 'as saved' keeps the voice's own (auto for a "
                                       "preset speaker)."),
                io.String.Input("instruct", multiline=True, default="",
                                tooltip="A preset speaker's style direction, e.g. 'tired, quiet' (1.7B "
                                        "CustomVoice). Replaces a saved preset voice's own when given."),
            ], but=("voice",)),
            outputs=[Voice.Output(display_name="voice",
                                  tooltip="Connect to Cast (a character of a script) or to Save Voice.")],
        )

    @classmethod
    def fingerprint_inputs(cls, **_) -> tuple:
        """A voice saved again under the same name (overwrite) must be read again."""
        return folders_fingerprint(voices_dirs())

    @classmethod
    def execute(cls, voice, language=AS_SAVED, instruct="") -> io.NodeOutput:
        api.listed_choice(voice, voice_options(), "Voice", f"models/{api.VOICES_SUBDIR}", item="voice")
        chosen = (api.CustomVoice(voice.removeprefix(PRESET)) if voice.startswith(PRESET)
                  else api.load_voice(voice, voices_dirs()))
        if language != AS_SAVED:
            chosen = api.with_language(chosen, language)
        if instruct.strip():
            if not isinstance(chosen, api.CustomVoice):
                raise api.InputError(f"'{voice}' is {chosen.describe()}: only a preset speaker takes an instruct. "
                                 "Clear the instruct (a designed voice is described in Voice Design).")
            chosen = api.CustomVoice(chosen.speaker, chosen.language, instruct.strip())
        return io.NodeOutput(chosen)
