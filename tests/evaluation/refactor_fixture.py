"""Recorded evaluation rows that pin the allocators' behaviour across refactors.

A few episodes of a small workload (drawn once from the synthetic test bank and stored in the fixture, so it
does not depend on the shipped workloads or on how task sets draw episodes) are played through the
evaluation harness by every built-in method, and the per-episode rows are kept in
``tests/evaluation/data/refactor_rows.json``.  ``test_refactor_rows.py`` replays them and asserts identical rows.

The fixture also records what the rows depend on outside the code: the synthetic bank's checksum and the
shipped checkpoints' SHA-256.  When one of them changes on purpose (a retrained checkpoint), re-record with

    .venv/bin/python tests/evaluation/refactor_fixture.py

and say in the commit why the rows changed.  Re-recording replays the stored workloads; ``--redraw`` draws new
ones with the current task sets (only when the stored ones no longer load).
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
FIXTURE = Path(__file__).resolve().parent / "data" / "refactor_rows.json"
RECORD_COMMAND = ".venv/bin/python tests/evaluation/refactor_fixture.py"
METHODS = ("fifo", "edf", "random", "lara", "lara-fm", "slack-fm", "mara", "mara-wls")
CELLS = (("id", 0.15), ("stress", None))
CHECKPOINTS = ("mara_agents/predictors/checkpoints/fm.pt", "mara_agents/checkpoints/mara_seed0.pt",
               "mara_agents/checkpoints/mara_wls_seed0.pt")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def bank_content_sha256(bank_dir: Path) -> str:
    """SHA-256 over every curve id, its recipe and its cumulative-average losses (independent of file
    metadata such as zip timestamps)."""
    from curves.bank import load_bank

    bank = load_bank(bank_dir)
    digest = hashlib.sha256()
    for cid in sorted(bank.records):
        record = bank.records[cid]
        digest.update(f"{cid}|{record.batch_size}|{record.lr!r}".encode())
        digest.update(bank.cumavg(cid).tobytes())
    return digest.hexdigest()


def checkpoint_hashes() -> dict[str, str]:
    """SHA-256 of every shipped checkpoint the recorded rows depend on."""
    return {name: sha256(REPO / name) for name in CHECKPOINTS}


def draw_workloads(bank_dir: Path) -> dict[str, Any]:
    """The fixture's workload documents, keyed by file name: 3 busy id episodes (p = 0.15) and 2 stress episodes."""
    from curves.bank import load_bank
    from mara_env.fixed_workloads import build_workload

    bank = load_bank(bank_dir)
    return {"id_p0.15.json": build_workload(bank, "id", 0.15, roots=1, episodes=3).to_json(),
            "stress.json": build_workload(bank, "stress", 0.0, roots=1, episodes=2).to_json()}


def play(bank_dir: Path, workloads: dict[str, Any], directory: Path) -> list[dict[str, Any]]:
    """Every method's (training seed 0) and the bounds' rows on the fixture workloads, via the harness."""
    from mara_agents.evaluation.harness import Settings, evaluate

    directory.mkdir(parents=True, exist_ok=True)
    for name, document in workloads.items():
        (directory / name).write_text(json.dumps(document))
    settings = Settings(bank_dir, directory, roots=1, episodes=3, max_seeds=1, jobs=1, cache=None, progress=False)
    requests = [(method, task_set, load) for method in METHODS for task_set, load in CELLS]
    results = evaluate(requests, settings)
    if results.skipped:
        raise RuntimeError(f"methods could not be built: {results.skipped}")
    return results.rows


def record(redraw: bool = False) -> Path:
    """Play the stored workloads (or, with ``redraw`` or no fixture yet, newly drawn ones) on a fresh synthetic
    bank, and write the fixture."""
    sys.path.insert(0, str(TESTS))
    from synthetic_bank import build_synthetic_bank

    with tempfile.TemporaryDirectory() as tmp:
        bank_dir = build_synthetic_bank(Path(tmp) / "bank")
        stored = None if redraw or not FIXTURE.is_file() else json.loads(FIXTURE.read_text())["workloads"]
        workloads = stored or draw_workloads(bank_dir)
        rows = play(bank_dir, workloads, Path(tmp) / "workloads")
        document = {"about": __doc__.split("\n\n")[0], "record_command": RECORD_COMMAND,
                    "synthetic_bank_sha256": bank_content_sha256(bank_dir), "checkpoints": checkpoint_hashes(),
                    "workloads": workloads, "rows": rows}
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    FIXTURE.write_text(json.dumps(document, indent=1) + "\n")
    return FIXTURE


if __name__ == "__main__":
    print(f"wrote {record(redraw='--redraw' in sys.argv[1:])}")
