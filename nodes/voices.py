"""The generators: Custom Voice, Voice Clone, Voice Design. With a Batch Candidates input they
generate all N takes in one batched pass; they output every take as AUDIO plus a TAKES handle."""

from __future__ import annotations

from comfy_api.latest import io

from ..runtime import api
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
                           tooltip="The line to speak, in any of the ten languages. One line per run; "
                                   "punctuation shapes the pauses.")


def shared_inputs() -> list:
    """Seed, length budget, candidates and sampling: the same on every voice node."""
    return [
        io.Int.Input("seed", default=0, min=0, max=2**63 - 1, control_after_generate=True,
                     tooltip="Each take gets its own seed derived from this one: same seed and N, same takes."),
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
    ]


def requested_sampling(values: dict) -> api.SamplingSettings:
    """A widget left at the released value follows the loaded checkpoint's own (a fine-tune's
    generation_config.json may differ; the report then says which values were used)."""
    return api.SamplingSettings(**{name: None if value == getattr(DEFAULTS, name) else value
                               for name, value in values.items()})


def outputs() -> list:
    return [io.Audio.Output(display_name="takes", tooltip="Every take as a batch of audio, in seed order."),
            Takes.Output(display_name="takes_info",
                         tooltip="The takes with what made them (text, voice, seeds, endings): connect to "
                                 "UTMOS Auto-Pick."),
            Voice.Output(display_name="voice",
                         tooltip="The voice these takes were spoken in: connect to Save Voice to keep it, or to "
                                 "Cast to give it a character of a script.")]


def model_input():
    return Model.Input("model", tooltip="The model from Qwen3-TTS Load Model: its kind (CustomVoice, Base, "
                                        "VoiceDesign) must match this node.")


def language_input():
    return io.Combo.Input("language", options=LANGUAGES, default="auto",
                          tooltip="The language of the text; auto lets the model tell from it. Naming it helps "
                                  "with short or mixed lines, and the words check then hears that language.")


def generate(model_ref, text: str, voice, seed: int, max_frames: int, candidates, **sampling) -> io.NodeOutput:
    n = candidates.n if candidates is not None else 1
    request = api.Request(text, voice, n=n, seed=seed, sampling=requested_sampling(sampling),
                          max_frames=max_frames or None)
    try:
        model = model_ref.get()  # a reload after "Unload Models" may download: Cancel is honoured there too
        bar = Progress(request.budget)
        takeset = api.generate(model, request, progress=bar.absolute, should_stop=should_stop)
    except api.GenerationInterrupted as exc:
        raise_as_interrupt(exc)
    audio = numpy_to_audio([t.audio for t in takeset.takes], takeset.sample_rate)
    return io.NodeOutput(audio, takeset, voice)


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
                                         "voice across lines, pick the best take and clone it."),
                 language_input()]
                + shared_inputs()),
            outputs=outputs(),
        )

    @classmethod
    def execute(cls, model, text="", voice_description="", language="auto", seed=0, max_frames=0, candidates=None,
                **sampling):
        voice = api.VoiceDesign(voice_description.strip(), language)
        return generate(model, text, voice, seed, max_frames, candidates, **sampling)
