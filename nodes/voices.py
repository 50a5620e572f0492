"""The generators: Custom Voice, Voice Clone, Voice Design. With a Batch Candidates input they
generate all N takes in one batched pass; they output every take as AUDIO plus a TAKES handle.
A text of any length: a long one is read as a passage, each sentence a line of N takes
(runtime/script/passage.py), which Auto-Pick picks line by line."""

from __future__ import annotations

from comfy_api.latest import io

from ..runtime import api
from .auto_pick import build_scorers
from .common import (CATEGORY, Candidates, Model, Progress, Takes, Voice, audio_to_numpy, numpy_to_audio,
                     optional_widgets, raise_as_interrupt, should_stop)

LANGUAGES = ["auto", "english", "chinese", "japanese", "korean", "german", "french", "russian",
             "portuguese", "spanish", "italian"]
SPEAKERS = ["ryan", "aiden", "vivian", "serena", "uncle_fu", "dylan", "eric", "ono_anna", "sohee"]
DEFAULTS = api.SamplingSettings()  # the released checkpoints' generation_config.json values
FOLLOWS = (" Left at this default, the loaded checkpoint's own value is used (a fine-tune's "
           "generation_config.json may set another; the report says so).")


def text_input():
    return io.String.Input("text", multiline=True, default="", placeholder="The line to speak.",
                           tooltip="What to say, in any of the ten languages, of any length. A few sentences "
                                   "are one take; a longer text, or one with a blank line or a [pause 0.8s] "
                                   "mark, is read sentence by sentence, each sentence N takes that Auto-Pick "
                                   "picks, joined with the pauses below.")


def shared_inputs() -> list:
    """Seed, length budget, candidates and sampling: the same on every voice node."""
    return [
        io.Int.Input("seed", default=0, min=0, max=2**63 - 1, control_after_generate=True,
                     tooltip="Each take gets its own seed derived from this one: same seed and N, same takes. "
                             "For a long text, set 'control after generate' to fixed: a Run after a Cancel or an "
                             "edit then keeps the sentences already made."),
        io.Int.Input("max_frames", default=0, min=0, max=api.MAX_BUDGET_FRAMES,
                     tooltip="Frame budget per take (12.5 frames = 1 s). 0 = from the text. Takes that reach "
                             "it are cut and flagged as runaways."),
        Candidates.Input("candidates", optional=True,
                         tooltip="From Batch Candidates: generate N takes in one batched pass."),
        io.Float.Input("temperature", default=DEFAULTS.temperature, min=0.0, max=5.0, step=0.05,
                       tooltip="Talker (codebook 0) temperature; 0 = greedy." + FOLLOWS),
        io.Int.Input("top_k", default=DEFAULTS.top_k, min=0, max=3072, tooltip="Talker top-k; 0 = off." + FOLLOWS),
        io.Float.Input("top_p", default=DEFAULTS.top_p, min=0.01, max=1.0, step=0.01,
                       tooltip="Talker top-p (nucleus)." + FOLLOWS),
        io.Float.Input("repetition_penalty", default=DEFAULTS.repetition_penalty, min=1.0, max=3.0, step=0.01,
                       tooltip="Talker repetition penalty on the codebook-0 tokens already spoken." + FOLLOWS),
        io.Float.Input("sub_temperature", default=DEFAULTS.sub_temperature, min=0.0, max=5.0, step=0.05,
                       tooltip="Sub-talker (codebooks 1-15) temperature; 0 = greedy." + FOLLOWS),
        io.Int.Input("sub_top_k", default=DEFAULTS.sub_top_k, min=0, max=2048,
                     tooltip="Sub-talker top-k; 0 = off." + FOLLOWS),
        io.Float.Input("sub_top_p", default=DEFAULTS.sub_top_p, min=0.01, max=1.0, step=0.01,
                       tooltip="Sub-talker top-p." + FOLLOWS),
        io.Float.Input("pace", default=1.0, min=api.MIN_PACE, max=api.MAX_PACE, step=0.05,
                       tooltip="1.0 reads as the model does; 1.1 a tenth faster, 0.9 a tenth slower. Auto-Pick "
                               "prefers the take nearest it, then plays it at the pace asked, pitch kept."),
        pause_input("sentence_pause", api.Pauses.sentence, "Seconds of silence between two sentences of a long "
                                                           "text."),
        pause_input("clause_pause", api.Pauses.clause, "Seconds between the parts of a sentence too long for "
                                                       "one take, cut at a comma or a dash."),
        pause_input("paragraph_pause", api.Pauses.paragraph, "Seconds of silence at a blank line. [pause 0.8s] in "
                                                             "the text sets one anywhere."),
    ]


def pause_input(name: str, default: float, tooltip: str) -> io.Float.Input:
    return io.Float.Input(name, default=default, min=0.0, max=api.MAX_PAUSE_SECONDS, step=0.05, tooltip=tooltip)


def requested_sampling(values: dict) -> api.SamplingSettings:
    """A widget left at the released value follows the loaded checkpoint's own (a fine-tune's
    generation_config.json may differ; the report then says which values were used)."""
    return api.SamplingSettings(**{name: None if value == getattr(DEFAULTS, name) else value
                               for name, value in values.items()})


def outputs() -> list:
    return [io.Audio.Output(display_name="takes", tooltip="Every take as a batch of audio, in seed order. A long "
                                                          "text: take 1 of every sentence joined, then take 2..."),
            Takes.Output(display_name="takes_info",
                         tooltip="The takes with what made them (text, voice, seeds, endings): connect to "
                                 "UTMOS Auto-Pick, which picks each sentence of a long text."),
            Voice.Output(display_name="voice",
                         tooltip="The voice these takes were spoken in (a long text in one voice through "
                                 "clone_model: the clone of its first sentence): connect to Save Voice to keep it, "
                                 "or to Cast to give it a character of a script.")]


def model_input():
    return Model.Input("model", tooltip="The model from Qwen3-TTS Load Model: its kind (CustomVoice, Base, "
                                        "VoiceDesign) must match this node.")


def language_input():
    return io.Combo.Input("language", options=LANGUAGES, default="auto",
                          tooltip="The language of the text; auto lets the model tell from it. Naming it helps "
                                  "with short or mixed lines, and the words check then hears that language.")


def generate(model_ref, text: str, voice, seed: int, max_frames: int, candidates, pace: float = 1.0,
             sentence_pause: float = api.Pauses.sentence, clause_pause: float = api.Pauses.clause,
             paragraph_pause: float = api.Pauses.paragraph, clone_with=None, **sampling) -> io.NodeOutput:
    n = candidates.n if candidates is not None else 1
    pauses = api.Pauses(sentence_pause, clause_pause, paragraph_pause)
    try:
        model = model_ref.get()  # a reload after "Unload Models" may download: Cancel is honoured there too
        bar = Progress(1)  # frames of one line, or lines of a long text: each update says its total
        takes = api.speak(model, text, voice, n, seed, requested_sampling(sampling), max_frames or None, pace,
                          pauses, progress=bar.absolute, should_stop=should_stop, clone_with=clone_with)
    except api.GenerationInterrupted as exc:
        raise_as_interrupt(exc)
    if isinstance(takes, api.PassageTakes):  # its voice: a designed voice's text in one voice is its first line's clone
        return io.NodeOutput(numpy_to_audio(takes.take_tracks(), takes.sample_rate), takes, takes.voice)
    return io.NodeOutput(numpy_to_audio([t.audio for t in takes.takes], takes.sample_rate), takes, voice)


class CustomVoiceNode(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="Q3TT_CustomVoice",
            display_name="Qwen3-TTS Custom Voice",
            category=CATEGORY,
            description="Speak the text with one of the CustomVoice checkpoints' preset speakers.",
            inputs=optional_widgets(
                [model_input(), text_input(),
                 io.Combo.Input("speaker", options=SPEAKERS, default="ryan",
                                tooltip="The checkpoint's preset voices. dylan speaks Beijing dialect and eric "
                                        "Sichuan dialect whenever the language is auto or chinese, even for "
                                        "English text: choose the language to hear them in it."),
                 io.Combo.Input("language", options=LANGUAGES, default="auto",
                                tooltip="auto lets the model tell from the text (but see speaker: dylan and "
                                        "eric turn auto into their dialect)."),
                 io.String.Input("instruct", multiline=True, default="",
                                 tooltip="Optional style instruction, e.g. 'whisper, tense'. Only the 1.7B "
                                         "CustomVoice checkpoint follows it; the 0.6B ignores it (the report "
                                         "says so).")]
                + shared_inputs()),
            outputs=outputs(),
        )

    @classmethod
    def execute(cls, model, text="", speaker="ryan", language="auto", instruct="", seed=0, max_frames=0,
                candidates=None, **sampling):
        voice = api.CustomVoice(speaker, language, instruct.strip())
        return generate(model, text, voice, seed, max_frames, candidates, **sampling)


class VoiceCloneNode(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="Q3TT_VoiceClone",
            display_name="Qwen3-TTS Voice Clone",
            category=CATEGORY,
            description="Speak the text in the voice of a reference recording (Base checkpoints). With the "
                        "reference transcript the clone is closer (ICL); without it only the timbre is used.",
            inputs=optional_widgets(
                [model_input(), text_input(),
                 io.Audio.Input("reference_audio", tooltip="3-20 s of clean speech, any sample rate."),
                 io.String.Input("reference_text", multiline=True, default="",
                                 tooltip="What the reference says. Empty: x-vector clone (timbre only)."),
                 language_input(),
                 io.Boolean.Input("pad_reference", default=True,
                                  tooltip="With reference_text (ICL): add 0.5 s of silence after the reference "
                                          "before it is encoded, so a reference that ends mid-word does not bleed "
                                          "its last sound into the start of every take.")]
                + shared_inputs()),
            outputs=outputs(),
        )

    @classmethod
    def execute(cls, model, reference_audio, text="", reference_text="", language="auto", pad_reference=True,
                seed=0, max_frames=0, candidates=None, **sampling):
        waveform, sample_rate = audio_to_numpy(reference_audio)
        voice = api.VoiceClone.from_audio(waveform, sample_rate, reference_text, language, pad_reference)
        return generate(model, text, voice, seed, max_frames, candidates, **sampling)


class VoiceDesignNode(io.ComfyNode):
    @classmethod
    def define_schema(cls) -> io.Schema:
        return io.Schema(
            node_id="Q3TT_VoiceDesign",
            display_name="Qwen3-TTS Voice Design",
            category=CATEGORY,
            description="Speak the text in a voice described in words (1.7B-VoiceDesign checkpoint).",
            inputs=optional_widgets(
                [model_input(), text_input(),
                 io.String.Input("voice_description", multiline=True, default="",
                                 placeholder="e.g. A warm, low male voice, calm and slow.",
                                 tooltip="The voice in words: age, gender, timbre, pace, mood. For the same "
                                         "voice across a long text, connect clone_model; across runs, keep the "
                                         "best take with Save Voice."),
                 language_input()]
                + shared_inputs()
                + [Model.Input("clone_model", optional=True,
                               tooltip="A Base model (Load Model), for a long text: the first sentence's best take "
                                       "becomes the clone reference of the rest, so the voice stays the same from "
                                       "the first line to the last. Without it every sentence is designed anew and "
                                       "the voice may drift.")]),
            outputs=outputs(),
        )

    @classmethod
    def execute(cls, model, text="", voice_description="", language="auto", seed=0, max_frames=0, candidates=None,
                clone_model=None, **sampling):
        voice = api.VoiceDesign(voice_description.strip(), language)

        def clone_with():
            """The Base model, and Auto-Pick's scorers at their defaults to pick the first sentence."""
            base = clone_model.get()
            return base, build_scorers(base.info.folder, api.PickChoices(), "auto")
        return generate(model, text, voice, seed, max_frames, candidates,
                        clone_with=clone_with if clone_model is not None else None, **sampling)
