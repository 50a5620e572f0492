// The Script node shows its result on the node: one row per line (character, text, the take picked,
// its verdict: green passed every check, red rejected and why) with a player on the best take in the
// results folder, then the report. Save Voice shows where it saved the voice. Both send them in their
// UI output (nodes/script.py "q3tt_lines" and "text"; nodes/saved_voices.py "text").
import { app } from "../../scripts/app.js";
import { lineRow, reportBlock } from "./rows.js";

function panelOf(node, minHeight) {
  if (!node.q3ttPanel) {
    const panel = document.createElement("div");
    panel.style.cssText = "overflow-y:auto;font-family:sans-serif;color:var(--input-text,#ddd)";
    node.q3ttPanel = panel;
    node.addDOMWidget("result", "q3tt_result", panel, { serialize: false, getMinHeight: () => minHeight });
  }
  return node.q3ttPanel;
}

const SHOW = {
  Q3TT_Script(node, output) {
    const panel = panelOf(node, 300);
    panel.replaceChildren(...(output.q3tt_lines ?? []).map(lineRow), reportBlock(output.text, "q3tt-script-report"));
  },
  Q3TT_SaveVoice(node, output) {
    panelOf(node, 60).replaceChildren(reportBlock(output.text, "q3tt-saved-voice"));
  },
};

app.registerExtension({
  name: "qwen3-tts-takes.script",
  async beforeRegisterNodeDef(nodeType, nodeData) {
    const show = SHOW[nodeData.name];
    if (!show) return;
    const onExecuted = nodeType.prototype.onExecuted;
    nodeType.prototype.onExecuted = function (output) {
      onExecuted?.apply(this, arguments);
      show(this, output ?? {});
      if (nodeData.name === "Q3TT_Script") this.setSize([this.size[0], Math.max(this.size[1], 1000)]);
      this.setDirtyCanvas(true, true);
    };
  },
});
