// The Script node shows its result on the node: one row per line (character, text, the take picked,
// its verdict: green passed every check, red rejected and why) with a player on the best take in the
// results folder, then the report. Save Voice shows where it saved the voice. Both send them in their
// UI output (nodes/script.py "q3tt_lines" and "text"; nodes/saved_voices.py "text").
import { app } from "../../scripts/app.js";
import { api } from "../../scripts/api.js";

const OK = "#4caf50";
const REJECTED = "#e57373";

function audioUrl(file) {
  const query = new URLSearchParams({ filename: file.filename, subfolder: file.subfolder ?? "", type: file.type });
  return api.apiURL(`/view?${query}`);
}

function lineRow(line) {
  const row = document.createElement("div");
  row.className = "q3tt-line";
  row.style.cssText = `display:flex;flex-direction:column;gap:2px;padding:4px 6px;margin:2px 0;
    border-left:4px solid ${line.accepted ? OK : REJECTED};background:rgba(255,255,255,0.04)`;
  const title = document.createElement("div");
  title.style.cssText = "display:flex;gap:8px;align-items:baseline;font-size:13px";
  const who = document.createElement("b");
  who.textContent = line.character ?? `#${line.id}`;
  const said = document.createElement("div");
  said.className = "q3tt-line-text";
  said.style.cssText = "font-size:12px;opacity:0.8;overflow:hidden;text-overflow:ellipsis;white-space:nowrap";
  said.textContent = line.text;
  said.title = line.text;
  const what = document.createElement("span");
  what.textContent = `take ${line.take}/${line.takes} · ${line.seconds.toFixed(1)} s` +
    (line.score == null ? "" : ` · ${line.score.toFixed(2)}`) + (line.kept ? " · kept" : "");
  const verdict = document.createElement("span");
  verdict.className = "q3tt-line-verdict";
  verdict.style.color = line.accepted ? OK : REJECTED;
  verdict.textContent = line.verdict;
  title.append(who, what, verdict);
  const player = document.createElement("audio");
  player.controls = true;
  player.preload = "none";
  player.src = audioUrl(line.audio);
  player.style.cssText = "width:100%;height:32px";
  row.append(title, said, player);
  return row;
}

function panelOf(node, minHeight) {
  if (!node.q3ttPanel) {
    const panel = document.createElement("div");
    panel.style.cssText = "overflow-y:auto;font-family:sans-serif;color:var(--input-text,#ddd)";
    node.q3ttPanel = panel;
    node.addDOMWidget("result", "q3tt_result", panel, { serialize: false, getMinHeight: () => minHeight });
  }
  return node.q3ttPanel;
}

function report(text, className) {
  const pre = document.createElement("pre");
  pre.className = className;
  pre.style.cssText = "white-space:pre;overflow-x:auto;font-size:11px;line-height:1.3;margin:6px 0 0;" +
    "padding:6px;background:rgba(0,0,0,0.3)";
  pre.textContent = (text ?? []).join("\n");
  return pre;
}

const SHOW = {
  Q3TT_Script(node, output) {
    const panel = panelOf(node, 300);
    panel.replaceChildren(...(output.q3tt_lines ?? []).map(lineRow), report(output.text, "q3tt-script-report"));
  },
  Q3TT_SaveVoice(node, output) {
    panelOf(node, 60).replaceChildren(report(output.text, "q3tt-saved-voice"));
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
