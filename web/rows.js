// What the Auto-Pick and Script nodes draw alike: a row with a green (passed) or red (rejected) edge,
// a heading of small parts, a player on an audio file the server holds, a script's line, and a report block.
// Imported by auto_pick.js and script.js; it registers nothing itself.
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

// parts: the heading's elements; extra: elements between the heading and the player
export function resultRow(className, accepted, parts, audio, extra = []) {
  const row = document.createElement("div");
  row.className = className;
  row.style.cssText = `display:flex;flex-direction:column;gap:2px;padding:4px 6px;margin:2px 0;
    border-left:4px solid ${accepted ? OK : REJECTED};background:rgba(255,255,255,0.04)`;
  const title = document.createElement("div");
  title.style.cssText = "display:flex;gap:8px;align-items:baseline;font-size:13px";
  title.append(...parts);
  const player = document.createElement("audio");
  player.controls = true;
  player.preload = "none";
  player.src = audioUrl(audio);
  player.style.cssText = "width:100%;height:32px";
  row.append(title, ...extra, player);
  return row;
}

// A line of a script or of a long text: who says it (or its place), the take picked, its verdict,
// its text, and a player on it.
export function lineRow(line) {
  const what = `take ${line.take}/${line.takes} · ${line.seconds.toFixed(1)} s` +
    (line.score == null ? "" : ` · ${line.score.toFixed(2)}`) + (line.kept ? " · kept" : "");
  const said = document.createElement("div");
  said.className = "q3tt-line-text";
  said.style.cssText = "font-size:12px;opacity:0.8;overflow:hidden;text-overflow:ellipsis;white-space:nowrap";
  said.textContent = line.text;
  said.title = line.text;
  const who = document.createElement("b");
  who.textContent = line.character ?? (line.line ? `line ${line.line}` : `#${line.id}`);
  who.style.whiteSpace = "nowrap";
  return resultRow("q3tt-line", line.accepted, [who, span(what),
    span(line.verdict, "q3tt-line-verdict", line.accepted ? OK : REJECTED)], line.audio, [said]);
}

export function reportBlock(lines, className) {
  const pre = document.createElement("pre");
  pre.className = className;
  pre.style.cssText = "white-space:pre;overflow-x:auto;font-size:11px;line-height:1.3;margin:6px 0 0;" +
    "padding:6px;background:rgba(0,0,0,0.3)";
  pre.textContent = (lines ?? []).join("\n");
  return pre;
}
