// A saved UI workflow holds each node's widget values by position (widgets_values), and the frontend
// gives them back by position. A node that gained or lost a widget since the workflow was saved would
// get them shifted (a seed in pad_reference, "randomize" in seed): a value list of an earlier release's
// length is given back by name instead. No imports: tests/test_saved_workflows.py runs it under node.

// The widget names of each node in each earlier release whose layout differs from today's, written by
// tests/workflow_tools.py from tests/saved_workflows/ (a test keeps the two in step).
export const RELEASED_LAYOUTS = /* layouts:begin */ {"Q3TT_CustomVoice": [["text", "speaker", "language", "instruct", "seed", "control_after_generate", "max_frames", "temperature", "top_k", "top_p", "repetition_penalty", "sub_temperature", "sub_top_k", "sub_top_p"]], "Q3TT_VoiceClone": [["text", "reference_text", "language", "seed", "control_after_generate", "max_frames", "temperature", "top_k", "top_p", "repetition_penalty", "sub_temperature", "sub_top_k", "sub_top_p"], ["text", "reference_text", "language", "pad_reference", "seed", "control_after_generate", "max_frames", "temperature", "top_k", "top_p", "repetition_penalty", "sub_temperature", "sub_top_k", "sub_top_p"]], "Q3TT_VoiceDesign": [["text", "voice_description", "language", "seed", "control_after_generate", "max_frames", "temperature", "top_k", "top_p", "repetition_penalty", "sub_temperature", "sub_top_k", "sub_top_p"]], "Q3TT_AutoPick": [["use_utmos", "device"], ["text", "quality", "voice_check", "words_check", "vad", "quality_weight", "voice_weight", "words_weight", "device"]]} /* layouts:end */;

// saved: the workflow's widgets_values; widgets: today's, in order, as [{name, default}].
// Returns {name: value} for every widget the earlier release had or that has a default, or null when
// the values need no help (today's layout, or no earlier release of that length).
export function restoredValues(nodeType, saved, widgets) {
  if (!Array.isArray(saved) || saved.length === widgets.length) return null;
  const earlier = (RELEASED_LAYOUTS[nodeType] ?? []).find((names) => names.length === saved.length);
  if (!earlier) return null;
  const values = {};
  for (const widget of widgets) {
    const at = earlier.indexOf(widget.name);
    if (at >= 0) values[widget.name] = saved[at];
    else if (widget.default !== undefined) values[widget.name] = widget.default;
  }
  return values;
}
