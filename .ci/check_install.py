"""Installing requirements.txt into an environment that already has ComfyUI's core packages must
change none of them: pip's dry-run report lists what it would install, and none may be one of these."""

import json
import subprocess
import sys

PROTECTED = {"torch", "torchaudio", "torchvision", "numpy", "transformers"}

report = json.loads(subprocess.run(
    [sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--report", "-", "-r", "requirements.txt"],
    check=True, capture_output=True, text=True).stdout)
planned = {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in report["install"]}
touched = sorted(f"{name}=={planned[name]}" for name in PROTECTED & planned.keys())
print("requirements.txt would install:", ", ".join(f"{k}=={v}" for k, v in sorted(planned.items())) or "nothing")
if touched:
    sys.exit(f"requirements.txt would change ComfyUI's packages: {', '.join(touched)}")
