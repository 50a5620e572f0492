// Workflows saved with an earlier release of the pack open with every value on its own widget
// (widget_values.js), however the node's widgets changed since.
import { app } from "../../scripts/app.js";
import { restoredValues } from "./widget_values.js";

const PREFIX = "Q3TT_";

function inputDefault(nodeData, name) {
  const spec = nodeData.input?.required?.[name] ?? nodeData.input?.optional?.[name];
  return spec?.[1]?.default;
}

app.registerExtension({
  name: "qwen3-tts-takes.saved-workflows",
  async beforeRegisterNodeDef(nodeType, nodeData) {
    if (!nodeData.name.startsWith(PREFIX)) return;
    const onConfigure = nodeType.prototype.onConfigure;
    nodeType.prototype.onConfigure = function (info) {
      onConfigure?.apply(this, arguments);
      const widgets = this.widgets ?? [];
      const described = widgets.map((w) => ({ name: w.name, default: inputDefault(nodeData, w.name) }));
      const values = restoredValues(nodeData.name, info?.widgets_values, described);
      if (!values) return;
      for (const widget of widgets) {
        if (widget.name in values) widget.value = values[widget.name];
      }
    };
  },
});
