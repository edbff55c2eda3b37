"""The environment package stands alone: importing it (any module of it) loads neither torch nor mara_agents."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import importlib, json, pkgutil, sys
import mara_env
names = sorted(m.name for m in pkgutil.iter_modules(mara_env.__path__, "mara_env."))
for name in names:
    importlib.import_module(name)
loaded = [m for m in sys.modules if m.split(".")[0] in ("torch", "mara_agents")]
print(json.dumps({"modules": names, "forbidden": loaded}))
"""


def test_importing_mara_env_loads_neither_torch_nor_mara_agents():
    result = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert "mara_env.render" in report["modules"] and "mara_env.vector_env" in report["modules"]
    assert report["forbidden"] == []
