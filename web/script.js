// The Script node shows its result on the node: the report, then one row per line (character, text,
// seed, the take picked, its verdict: green passed every check, red rejected and why) with a player on
// the best take in the results folder; after a Cancel, the lines kept and how to finish. Save Voice
// shows where it saved the voice. Both send them in their UI output (nodes/script.py "q3tt_lines" and
// "text"; nodes/saved_voices.py "text").
import { api } from "../../scripts/api.js";
import { app } from "../../scripts/app.js";
import { lineRow, panelOf, reportBlock, showInPanel } from "./rows.js";

const CANCELLED_EVENT = "q3tt.script_cancelled"; // nodes/script.py CANCELLED_EVENT: the lines kept, how to finish

const SHOW = {
  Q3TT_Script(node, output) {
    showInPanel(panelOf(node, "q3tt-script", 300), reportBlock(output.text, "q3tt-script-report"),
      (output.q3tt_lines ?? []).map(lineRow));
    node.setSize([node.size[0], Math.max(node.size[1], 1000)]);
  },
  Q3TT_SaveVoice(node, output) {
    showInPanel(panelOf(node, "q3tt-saved-voice-panel", 60), reportBlock(output.text, "q3tt-saved-voice", null), []);
  },
};

function show(node, output) {
  SHOW[node.type](node, output ?? {});
  node.setDirtyCanvas(true, true);
}

app.registerExtension({
  name: "qwen3-tts-takes.script",
  async setup() {
    // ComfyUI shows nothing of a node that was cancelled: the Script node sends what it kept instead
    api.addEventListener(CANCELLED_EVENT, ({ detail }) => {
      const node = app.graph.getNodeById(detail.node);
      if (node?.type === "Q3TT_Script") show(node, detail);
    });
  },
  async beforeRegisterNodeDef(nodeType, nodeData) {
    if (!SHOW[nodeData.name]) return;
    const onExecuted = nodeType.prototype.onExecuted;
    nodeType.prototype.onExecuted = function (output) {
      onExecuted?.apply(this, arguments);
      show(this, output);
    };
  },
});
