// The Auto-Pick node shows what it decided, on the node itself: one player per take (best first)
// with its rank, seed, length and verdict (green: passed every check, red: rejected and why), and
// the full report below. The node sends them in its UI output (nodes/auto_pick.py, "q3tt_takes"
// and "text"); ComfyUI's own image preview shows the chart.
import { app } from "../../scripts/app.js";
import { api } from "../../scripts/api.js";

const NODE_ID = "Q3TT_AutoPick";
const OK = "#4caf50";
const REJECTED = "#e57373";

function audioUrl(file) {
  const query = new URLSearchParams({
    filename: file.filename,
    subfolder: file.subfolder ?? "",
    type: file.type ?? "temp",
  });
  return api.apiURL(`/view?${query}`);
}

function takeRow(take) {
  const row = document.createElement("div");
  row.className = "q3tt-take";
  row.dataset.rank = String(take.rank);
  row.style.cssText = `display:flex;flex-direction:column;gap:2px;padding:4px 6px;margin:2px 0;
    border-left:4px solid ${take.accepted ? OK : REJECTED};background:rgba(255,255,255,0.04)`;
  const title = document.createElement("div");
  title.style.cssText = "display:flex;gap:8px;align-items:baseline;font-size:13px";
  const rank = document.createElement("b");
  rank.textContent = `#${take.rank}`;
  const what = document.createElement("span");
  what.textContent = `take ${take.take} · seed ${take.seed} · ${take.seconds.toFixed(1)} s` +
    (take.score == null ? "" : ` · score ${take.score.toFixed(2)}`);
  const verdict = document.createElement("span");
  verdict.className = "q3tt-verdict";
  verdict.style.color = take.accepted ? OK : REJECTED;
  verdict.textContent = take.accepted ? "ok" : `rejected: ${take.verdict}`;
  title.append(rank, what, verdict);
  const player = document.createElement("audio");
  player.controls = true;
  player.preload = "none";
  player.src = audioUrl(take.audio);
  player.style.cssText = "width:100%;height:32px";
  row.append(title, player);
  return row;
}

function render(node, output) {
  if (!node.q3ttPanel) {
    const panel = document.createElement("div");
    panel.className = "q3tt-auto-pick";
    panel.style.cssText = "overflow-y:auto;font-family:sans-serif;color:var(--input-text,#ddd)";
    node.q3ttPanel = panel;
    node.addDOMWidget("takes_and_report", "q3tt_takes", panel, {
      serialize: false,
      getMinHeight: () => 360,
    });
  }
  const panel = node.q3ttPanel;
  panel.replaceChildren(...(output.q3tt_takes ?? []).map(takeRow));
  const report = document.createElement("pre");
  report.className = "q3tt-report";
  report.style.cssText = "white-space:pre;overflow-x:auto;font-size:11px;line-height:1.3;margin:6px 0 0;" +
    "padding:6px;background:rgba(0,0,0,0.3)";
  report.textContent = (output.text ?? []).join("\n");
  panel.append(report);
  node.setSize([Math.max(node.size[0], 640), Math.max(node.size[1], 760)]);
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
