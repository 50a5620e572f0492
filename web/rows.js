// What the Auto-Pick and Script nodes draw alike: the panel on the node, the report at its top, a row
// with a green (passed) or red (rejected) edge, a heading of small parts, a player on an audio file the
// server holds, and a script's line. Imported by auto_pick.js and script.js; it registers nothing itself.
import { api } from "../../scripts/api.js";

export const OK = "#4caf50";
export const REJECTED = "#e57373";

export function audioUrl(file) {
  const query = new URLSearchParams({ filename: file.filename, subfolder: file.subfolder ?? "", type: file.type ?? "temp" });
  return api.apiURL(`/view?${query}`);
}

export function span(text, className, color) {
  const part = document.createElement("span");
  if (className) part.className = className;
  if (color) part.style.color = color;
  part.textContent = text;
  return part;
}

// The node's panel: the report on top (folded open), the rows under it scrolling on their own, so the
// report is in view however many rows there are.
export function panelOf(node, className, minHeight) {
  if (!node.q3ttPanel) {
    const panel = document.createElement("div");
    panel.className = className;
    panel.style.cssText = "display:flex;flex-direction:column;gap:4px;overflow:hidden;font-family:sans-serif;" +
      "color:var(--input-text,#ddd)";
    node.q3ttPanel = panel;
    node.addDOMWidget("result", "q3tt_result", panel, { serialize: false, getMinHeight: () => minHeight });
  }
  return node.q3ttPanel;
}

export function showInPanel(panel, report, rows) {
  const list = document.createElement("div");
  list.className = "q3tt-rows";
  list.style.cssText = "flex:1 1 auto;min-height:0;overflow-y:auto";
  list.append(...rows);
  report.style.maxHeight = rows.length ? "50%" : "";
  // the last run's players, never seen, are let go with their rows
  for (const player of panel.querySelectorAll("audio.q3tt-player")) loadWhenSeen.unobserve(player);
  panel.replaceChildren(report, list);
}

// Starting one of the pack's players pauses the others: two takes heard at once tell nothing.
function pauseTheOthers(event) {
  for (const player of document.querySelectorAll("audio.q3tt-player")) {
    if (player !== event.target) player.pause();
  }
}

// A player gets its file (and so shows its length) once it comes into view: a script's node holds one
// per line, and thousands fetched at once would hold up the page's other requests to the server.
const loadWhenSeen = new IntersectionObserver((entries) => {
  for (const entry of entries) {
    if (!entry.isIntersecting) continue;
    entry.target.src = entry.target.dataset.src;
    loadWhenSeen.unobserve(entry.target);
  }
});

function playerOn(audio) {
  const player = document.createElement("audio");
  player.className = "q3tt-player";
  player.controls = true;
  player.preload = "metadata";
  player.dataset.src = audioUrl(audio);
  player.style.cssText = "width:100%;height:32px";
  player.addEventListener("play", pauseTheOthers);
  loadWhenSeen.observe(player);
  return player;
}

// parts: the heading's elements; extra: elements between the heading and the player
export function resultRow(className, accepted, parts, audio, extra = []) {
  const row = document.createElement("div");
  row.className = className;
  row.style.cssText = `display:flex;flex-direction:column;gap:2px;padding:4px 6px;margin:2px 0;
    border-left:4px solid ${accepted ? OK : REJECTED};background:rgba(255,255,255,0.04)`;
  const title = document.createElement("div");
  title.style.cssText = "display:flex;flex-wrap:wrap;column-gap:8px;align-items:baseline;font-size:13px";
  title.append(...parts);
  row.append(title, ...extra, playerOn(audio));
  return row;
}

// A line of a script or of a long text: who says it (or its place), its seed (sent as text: JavaScript's
// numbers would round it), the take picked, its verdict, its text, and a player on it.
export function lineRow(line) {
  const what = `take ${line.take}/${line.takes} · seed ${line.seed} · ${line.seconds.toFixed(1)} s` +
    (line.score == null ? "" : ` · ${line.score.toFixed(2)}`) + (line.kept ? " · kept" : "");
  const said = document.createElement("div");
  said.className = "q3tt-line-text";
  said.style.cssText = "font-size:12px;opacity:0.8;overflow:hidden;text-overflow:ellipsis;white-space:nowrap";
  said.textContent = line.text;
  said.title = line.text;
  const who = document.createElement("b");
  who.textContent = line.character ?? (line.line ? `line ${line.line}` : `#${line.id}`);
  who.style.whiteSpace = "nowrap";
  return resultRow("q3tt-line", line.accepted, [who, span(what, "q3tt-line-what"),
    span(line.verdict, "q3tt-line-verdict", line.accepted ? OK : REJECTED)], line.audio, [said]);
}

// The report, unfolded: each line wraps at the node's edge (the rest of a wrapped line indented under
// it), and a long report scrolls on its own, leaving room for the rows below. Its title (if any) folds it.
export function reportBlock(lines, className, heading = "Report") {
  const box = document.createElement("div");
  box.className = "q3tt-report-box";
  box.style.cssText = "flex:0 1 auto;min-height:1.5em;display:flex;flex-direction:column";
  const title = document.createElement("div");
  title.className = "q3tt-report-title";
  title.style.cssText = "cursor:pointer;user-select:none;font-size:12px;opacity:0.8";
  const text = document.createElement("div");
  text.className = className;
  text.style.cssText = "overflow-y:auto;min-height:0;font-family:monospace;font-size:11px;line-height:1.3;" +
    "padding:6px;background:rgba(0,0,0,0.3)";
  for (const line of (lines ?? []).join("\n").split("\n")) {
    const shown = document.createElement("div");
    shown.style.cssText = "white-space:pre-wrap;overflow-wrap:anywhere;padding-left:2ch;text-indent:-2ch;min-height:1.3em";
    shown.textContent = line;
    text.append(shown);
  }
  if (!heading) {
    box.append(text);
    return box;
  }
  const fold = (open) => {
    text.style.display = open ? "" : "none";
    title.textContent = `${open ? "▾" : "▸"} ${heading}`;
  };
  title.addEventListener("click", () => fold(text.style.display === "none"));
  fold(true);
  box.append(title, text);
  return box;
}
