"""Quickstart: write an allocator in ten lines and compare it with FIFO and FM-slack on the fixed workloads.

``NearestToTarget`` below is a whole allocator: each step it serves the started tasks whose loss is closest to
their target, then the rest.  The script plays it, FIFO and FM-slack on the first few episodes of one fixed
workload file (the same episodes for each) and prints their success rates as a Markdown table.  It writes
nothing under ``results/``, and no file of its own unless ``--gantt`` names a PNG file, where it draws your
allocator's first episode as a Gantt chart (FM-slack keeps FM's answers in FM's answer store, as every FM run
does).

    python examples/quickstart.py [--task-set id] [--load 0.04] [--episodes 3] [--gantt episode.png]
                                  [--node-speeds 1 1 1 2 2 2 4] [--switch-cost 2]

``--node-speeds`` and ``--switch-cost`` play the same episodes with the node options beyond the paper (fast
nodes, setup steps when a task changes node; docs/environment.md), which every allocator here accepts.

To score the same class on every fixed workload, beside every method of the paper:
``python evaluate.py table2 --policy mine=examples.quickstart:NearestToTarget``.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from PIL import Image

from mara_agents import make_policy
from mara_agents.play.lockstep import evaluate_workload
from mara_common.atomic import atomic_write_bytes
from mara_env.config import MARAConfig
from mara_env.features import TASK_FEATURE_INDEX as F
from mara_env.fixed_workloads import workload_path

BASELINES = {"FIFO": "fifo", "FM-slack": "slack-fm"}
TASK_SETS = ("id", "rl_ood", "vit_ood")
LOADS = (0.04, 0.05, 0.06, 0.07)


class NearestToTarget:
    """Serve the started tasks closest to their target loss first, then the tasks not yet started."""

    def reset(self) -> None:
        """Nothing to forget between episodes: the allocator reads only the current observation."""

    def act(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        """One pick per node: 0 idles, j serves slot j - 1; no two nodes pick the same slot."""
        tasks = observation["tasks"]
        started = tasks[:, F["batches_done"]] > 0
        gap = np.where(started, tasks[:, F["log_loss_ratio"]], np.inf)
        slots = [j for j in np.argsort(gap, kind="stable") if tasks[j, F["present"]] > 0]
        picks = np.zeros(observation["action_mask"].shape[0], dtype=np.int64)
        chosen = slots[:picks.size]
        picks[:len(chosen)] = np.asarray(chosen, dtype=np.int64) + 1
        return picks


def success_rates(workload: Path, episodes: list[int], **node_options: Any) -> dict[str, float]:
    """Mean success rate (%) of each allocator over the listed episodes of ``workload`` (with the env's
    ``node_options``, if any)."""
    policies = {"NearestToTarget (yours)": NearestToTarget(),
                **{label: make_policy(name) for label, name in BASELINES.items()}}
    return {label: 100 * float(np.mean([row["success_rate"] for row in
                                        evaluate_workload(policy, workload, episodes=episodes, **node_options)]))
            for label, policy in policies.items()}


def table(rates: dict[str, float]) -> str:
    """The success rates as a Markdown table, best first."""
    lines = ["| allocator | success rate (%) |", "|---|---:|"]
    lines += [f"| {label} | {rate:.2f} |" for label, rate in sorted(rates.items(), key=lambda item: -item[1])]
    return "\n".join(lines)


def save_gantt(path: Path, workload: Path, **node_options: Any) -> None:
    """Play ``NearestToTarget`` on the workload's first episode and write its Gantt chart as a PNG."""
    env = gym.make("MARA-v0", workload=str(workload), render_mode="rgb_array", **node_options)
    policy = NearestToTarget()
    observation, _ = env.reset(seed=0, options={"episode": 0})
    done = False
    while not done:
        observation, _, terminated, truncated, _ = env.step(policy.act(observation))
        done = terminated or truncated
    image = Image.fromarray(env.render())
    env.close()
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    atomic_write_bytes(path, buffer.getvalue())


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task-set", choices=TASK_SETS, default="id", help="which fixed workload (default id)")
    parser.add_argument("--load", type=float, choices=LOADS, default=0.04, help="arrival probability p (default 0.04)")
    parser.add_argument("--episodes", type=int, choices=range(1, 13), default=3, metavar="N",
                        help="play the file's first N episodes, 1 to 12 (default 3)")
    parser.add_argument("--gantt", type=Path, metavar="PNG", help="also draw your allocator's first episode here")
    parser.add_argument("--node-speeds", type=int, nargs="+", metavar="V",
                        help="batches each node runs per step, one integer per node (default: 1 for every node)")
    parser.add_argument("--switch-cost", type=int, default=0, metavar="C",
                        help="setup steps a task spends on a node that did not serve it at the previous step")
    args = parser.parse_args(argv)
    if args.gantt is not None and args.gantt.suffix != ".png":
        parser.error(f"--gantt {args.gantt}: name a .png file")
    args.node_options = {"switch_cost": args.switch_cost}
    if args.node_speeds is not None:
        args.node_options["node_speeds"] = tuple(args.node_speeds)
    try:
        MARAConfig(**args.node_options)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    return args


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    workload = workload_path(args.task_set, args.load)
    start = time.perf_counter()
    rates = success_rates(workload, list(range(args.episodes)), **args.node_options)
    print(f"Success rate on the first {args.episodes} episode(s) of {workload.name} (mean over episodes):\n")
    print(table(rates))
    if args.gantt is not None:
        save_gantt(args.gantt, workload, **args.node_options)
        print(f"\nGantt chart of NearestToTarget's first episode: {args.gantt}")
    print(f"\n{time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
