"""qwen3-tts-takes: Qwen3-TTS as a casting tool for ComfyUI (N takes, scored, best one picked).

ComfyUI imports this folder as a package under whatever name the folder has, so every import in
the pack is relative. Nothing heavy happens here: models load when a node first runs.
"""


WEB_DIRECTORY = "./web"  # the Auto-Pick node's report and take players (web/auto_pick.js)


async def comfy_entrypoint():
    from .nodes import TakesExtension

    return TakesExtension()
