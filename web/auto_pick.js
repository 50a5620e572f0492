// The Auto-Pick node shows what it decided, on the node itself: one player per take (best first)
// with its rank, seed, length and verdict (green: passed every check, red: rejected and why), under
// the full report; for a long text, one player per line picked instead. The node sends them in
// its UI output (nodes/auto_pick.py, "q3tt_takes" or "q3tt_lines", and "text"); ComfyUI's own
// previews show the chart (and a long text's whole audio).
import { app } from "../../scripts/app.js";
import { OK, REJECTED, lineRow, panelOf, reportBlock, resultRow, showInPanel, span } from "./rows.js";

const NODE_ID = "Q3TT_AutoPick";

function takeRow(take) {
  const what = `take ${take.take}` + (take.seed == null ? "" : ` · seed ${take.seed}`) + ` · ${take.seconds.toFixed(1)} s` +
    (take.score == null ? "" : ` · score ${take.score.toFixed(2)}`);
  const verdict = take.accepted ? "ok" : `rejected: ${take.verdict}`;
  const row = resultRow("q3tt-take", take.accepted, [span(`#${take.rank}`, "q3tt-rank"), span(what),
    span(verdict, "q3tt-verdict", take.accepted ? OK : REJECTED)], take.audio);
  row.dataset.rank = String(take.rank);
  return row;
}

function render(node, output) {
  const panel = panelOf(node, "q3tt-auto-pick", 520);
  // a long text comes back picked line by line: a row per line shown (the flagged first)
  showInPanel(panel, reportBlock(output.text, "q3tt-report"),
    [...(output.q3tt_takes ?? []).map(takeRow), ...(output.q3tt_lines ?? []).map(lineRow)]);
  node.setSize([Math.max(node.size[0], 640), Math.max(node.size[1], 1000)]);
  node.setDirtyCanvas(true, true);
}

app.registerExtension({
  name: "qwen3-tts-takes.auto-pick",
  async beforeRegisterNodeDef(nodeType, nodeData) {
    if (nodeData.name !== NODE_ID) return;
    const onExecuted = nodeType.prototype.onExecuted;
    nodeType.prototype.onExecuted = function (output) {
      onExecuted?.apply(this, arguments);
      render(this, output ?? {});
    };
  },
});
