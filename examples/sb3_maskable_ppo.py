"""sb3-contrib MaskablePPO on ``gym.make("MARA-v0")`` or, with ``--forecast fm|wls``, on ``MARA-Forecast-v0``.

Two env options make it work out of the box: ``observation="flat"`` (one float32 vector, so the stock
``MlpPolicy`` applies; the mask comes from the env's ``action_masks()``) and ``conflicts="repair"``
(MaskablePPO's mask is per node, so two nodes may pick the same slot; the env moves the later pick to the
next free task instead of idling it, and every action is a matching). ``--forecast fm`` (or ``wls``) trains on
``MARA-Forecast-v0`` instead: the same observation with the frozen predictor's forecast features appended
(``--forecast-kind samples`` adds FM's spread); see docs/environment.md.

Training draws random ID episodes from the bank's train/val curves; the check after training plays greedy
episodes on val curves (or a ``--workload`` file's episodes). ``--out DIR`` writes the model as
``DIR/maskable_ppo_seed{S}.zip`` through :func:`mara_agents.allocators.third_party.save_maskable_ppo`, with a
JSON manifest beside it (the env and its options, budget, seed, wall time, env steps/s, library versions,
SHA-256 of the zip, the command), so ``evaluate.py --policy NAME=mara_agents.allocators.third_party:
make_maskable_ppo:checkpoint=DIR/maskable_ppo_seed{S}.zip`` scores it. The same seed gives the same model.

Long runs resume: with ``--out``, every ``--checkpoint-every`` steps the whole training state (weights,
optimizer, step count) is written atomically to ``DIR/resume_maskable_ppo_seed{S}.zip``; running the same
command again continues from it to the same total ``--steps`` (deleted once the final model is written; a
rerun after that finds the final model and only re-checks it). A resumed run draws fresh episodes from where
it stopped, so it is not bit-identical to an uninterrupted one. Training curves go to TensorBoard under
``--logdir`` (default: the repository's gitignored ``runs/``; a resumed run continues its folder):
``tensorboard --logdir runs``. Every flag is checked before anything is built.

``--bc-from slack-fm`` warm-starts the policy by behaviour cloning: ``--bc-steps`` env steps of FM-slack's play
on the same random training episodes (counted in ``--steps``), ``--bc-epochs`` passes of masked log-likelihood
on its per-node actions (:mod:`mara_agents.training.behaviour_cloning`), then PPO for the rest of the budget. With
``--out`` the policy after cloning is also written as ``DIR/bc_maskable_ppo_seed{S}.zip``, and the state after
cloning is saved before PPO starts, so a resumed run does not clone again.

    python examples/sb3_maskable_ppo.py --steps 50000 --seed 0 --out /tmp/mara_maskable
    python examples/sb3_maskable_ppo.py --steps 400000 --forecast fm --seed 0 --out /tmp/mara_forecast
    python examples/sb3_maskable_ppo.py --steps 400000 --forecast fm --bc-from slack-fm --n-envs 16 --n-steps 128 \
        --out /tmp/mara_bc
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.callbacks import BaseCallback

import mara_env  # registers MARA-v0

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _args  # noqa: E402  (the examples' shared flag checks)

ENV_OPTIONS = {"observation": "flat", "conflicts": "repair"}
LIBRARIES = ("stable-baselines3", "sb3-contrib", "torch", "gymnasium", "numpy")
RESUME_PREFIX = "resume_"
BC_PREFIX = "bc_"  # the model after behaviour cloning, before PPO
DEFAULT_NET_ARCH = (64, 64)  # SB3's MlpPolicy default


class Checkpoints(BaseCallback):
    """Writes the whole training state to ``path`` (atomically) at the start of a rollout once ``every`` steps
    have passed since the last write, with ``describe()``'s JSON beside it: a killed run loses at most
    ``every`` steps plus one rollout."""

    def __init__(self, path: Path, every: int, describe: Any):
        super().__init__()
        self.path, self.every, self.describe = path, every, describe
        self.saved_at = 0

    def _on_training_start(self) -> None:
        self.saved_at = self.num_timesteps

    def _on_rollout_start(self) -> None:
        if self.num_timesteps - self.saved_at >= self.every:
            save_state(self.model, self.path, self.describe())
            self.saved_at = self.num_timesteps

    def _on_step(self) -> bool:
        return True


def save_state(model: Any, path: Path, description: dict[str, Any]) -> None:
    """``model.save`` to ``path`` and ``description`` to the JSON beside it, each through a rename."""
    from mara_common.atomic import atomic_write_json

    partial = path.with_name(f".{path.stem}.partial.zip")
    model.save(partial)
    atomic_write_json(path.with_suffix(".json"), description)
    os.replace(partial, path)


def clone_expert(model: Any, bc: dict[str, Any], n_envs: int, seed: int, logdir: Path | None, env_id: str,
                 **env_kwargs: Any) -> dict[str, Any]:
    """Warm-start ``model``'s policy by behaviour cloning of ``bc["from"]`` (FM-slack): ``bc["steps"]`` env steps
    of expert play on ``n_envs`` sub-envs of ``MARA-Forecast-v0`` with FM's forecast, seeded like training
    from ``seed`` (the same random train/val-curve episodes; on ``MARA-v0`` the learner sees them without the
    forecast), then ``bc["epochs"]`` passes of :func:`mara_agents.training.behaviour_cloning.clone`. The expert's env
    steps count toward the budget (``model.num_timesteps``). With ``logdir`` the loss per epoch goes to
    TensorBoard (``bc/loss``, ``bc/agreement``) in a new ``maskable_ppo_seed{S}_N`` folder, which PPO's own
    curves then continue. Returns what the manifest records of it."""
    from stable_baselines3.common.logger import configure

    from mara_agents.training.behaviour_cloning import clone, collect_expert_play, forecast_start
    from mara_agents.envs.forecast import ENV_ID as FORECAST_ENV_ID
    from mara_agents.envs.sb3_vec import make_sb3_vec_env

    expert_kwargs = {**env_kwargs, "predictor": "fm", "forecast": env_kwargs.get("forecast", "median")}
    expert_envs = make_sb3_vec_env(FORECAST_ENV_ID, n_envs, seed=seed, **ENV_OPTIONS, **expert_kwargs)
    demonstrations = collect_expert_play(expert_envs, bc["steps"])
    if env_id != FORECAST_ENV_ID:  # the forecast-less learner: the same states, without the forecast block
        demonstrations = demonstrations.prefix(forecast_start(expert_envs.get_attr("config")[0]))
    expert_envs.close()
    board = None if logdir is None else configure(str(_args.new_run_dir(logdir, f"maskable_ppo_seed{seed}")),
                                                  ["tensorboard"])

    def log(epoch: int, values: dict[str, float]) -> None:
        if board is not None:
            for key, value in values.items():
                board.record(f"bc/{key}", value)
            board.dump(epoch)

    losses = clone(model.policy, demonstrations, bc["epochs"], seed, batch_size=model.batch_size, log=log)
    if board is not None:
        board.close()
    model.num_timesteps = len(demonstrations)
    return {**bc, "env_steps": len(demonstrations), "final_loss": round(losses[-1], 4)}


def continue_seeded(model: Any, seed: int, n_envs: int, env_id: str, **env_kwargs: Any) -> None:
    """Give ``model`` fresh envs and generators seeded from ``seed`` and the steps it has done, so a run that
    continues (after a resume, or after behaviour cloning) draws episodes it has not seen."""
    from mara_agents.envs.sb3_vec import make_sb3_vec_env

    restart_seed = int(np.random.SeedSequence([seed, model.num_timesteps]).generate_state(1)[0])
    model.set_random_seed(restart_seed)
    model.set_env(make_sb3_vec_env(env_id, n_envs, seed=restart_seed, **ENV_OPTIONS, **env_kwargs))


def train(steps: int, n_envs: int = 4, seed: int = 0, n_steps: int = 512, logdir: Path | None = None,
          env_id: str = "MARA-v0", resume: Path | None = None, checkpoints: Checkpoints | None = None,
          net_arch: tuple[int, ...] = DEFAULT_NET_ARCH, bc: dict[str, Any] | None = None,
          on_cloned: Any = None, **env_kwargs: Any) -> Any:
    """A MaskablePPO model trained for ``steps`` environment steps on random episodes of ``env_id``; with
    ``logdir``, its training curves go to TensorBoard in a ``maskable_ppo_seed{S}_N`` folder there.

    The ``n_envs`` training envs are one native vector env (:func:`mara_agents.envs.sb3_vec.make_sb3_vec_env`):
    sub-env i plays the episodes SB3's ``make_vec_env`` would give it from the same seed, and on
    ``MARA-Forecast-v0`` the predictor runs once per step for all of them. ``net_arch``: the hidden layers of
    the policy and of the value network (SB3's default is 64, 64).

    ``resume``: a saved training state to continue from, to the same total ``steps`` (its envs are seeded
    from ``seed`` and the steps already done, so it draws episodes it has not seen); ``checkpoints``: the
    callback that writes the state periodically.

    ``bc``: ``{"from": "slack-fm", "steps": N, "epochs": E}`` warm-starts a new run by behaviour cloning
    (:func:`clone_expert`) before PPO trains for the rest of ``steps``; ``on_cloned(model, record)`` is called
    right after it (the example saves the state there, so a resumed run does not clone again)."""
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.logger import Logger

    from mara_agents.envs.sb3_vec import make_sb3_vec_env

    torch.set_num_threads(1)  # small networks: more threads only contend for the cores
    tensorboard = None if logdir is None else str(logdir)
    if resume is None:
        envs = make_sb3_vec_env(env_id, n_envs, seed=seed, **ENV_OPTIONS, **env_kwargs)
        model = MaskablePPO("MlpPolicy", envs, n_steps=n_steps, batch_size=min(256, n_steps * n_envs),
                            gamma=0.99, seed=seed, verbose=0, tensorboard_log=tensorboard,
                            policy_kwargs={"net_arch": list(net_arch)})
        if bc is not None:
            record = clone_expert(model, bc, n_envs, seed, logdir, env_id, **env_kwargs)
            if on_cloned is not None:
                on_cloned(model, record)
            continue_seeded(model, seed, n_envs, env_id, **env_kwargs)
    else:
        model = MaskablePPO.load(resume, device="cpu", tensorboard_log=tensorboard)
        continue_seeded(model, seed, n_envs, env_id, **env_kwargs)
    remaining = steps - model.num_timesteps
    if logdir is None or remaining <= 0:
        model.set_logger(Logger(folder=None, output_formats=[]))  # SB3's default leaves an empty /tmp/SB3-* folder
    if remaining > 0:
        model.learn(total_timesteps=remaining, tb_log_name=f"maskable_ppo_seed{seed}", callback=checkpoints,
                    reset_num_timesteps=model.num_timesteps == 0)
    return model


def evaluate(model: Any, episodes: int | list[int], masked: bool = True, env_id: str = "MARA-v0",
             **env_kwargs: Any) -> list[dict[str, float]]:
    """Greedy play: the episode metrics of each listed workload episode (or of ``episodes`` random ones, episode
    i from seed i), plus ``repaired``, the picks the env had to move (an agent that respects the matching has
    none). All episodes play at once in one native vector env, batched through the network (and the
    predictor); each is the episode ``gym.make(env_id).reset(seed=i)`` would play. ``masked=False`` plays a
    model without action masks (plain PPO, e.g. on ``actions="scores"``)."""
    from gymnasium.vector import AutoresetMode

    indices = list(range(episodes)) if isinstance(episodes, int) else list(episodes)
    envs = gym.make_vec(env_id, num_envs=len(indices), vectorization_mode="vector_entry_point",
                        autoreset_mode=AutoresetMode.DISABLED, **{**ENV_OPTIONS, **env_kwargs})
    options = {"episode": indices} if env_kwargs.get("workload") else None
    obs, _ = envs.reset(seed=indices, options=options)
    repaired = np.zeros(len(indices))
    rows: list[dict[str, float] | None] = [None] * len(indices)
    while any(row is None for row in rows):
        masks = {"action_masks": envs.action_masks()} if masked else {}
        action, _ = model.predict(obs, deterministic=True, **masks)
        obs, _, terminated, _, info = envs.step(action)
        repaired += np.where([row is None for row in rows], info.get("repaired", 0), 0)
        for i in np.flatnonzero(terminated).tolist():
            if rows[i] is None:
                metrics = info["episode_metrics"]
                rows[i] = {key: float(values[i]) for key, values in metrics.items() if not key.startswith("_")}
                rows[i]["repaired"] = float(repaired[i])
        if terminated.any():
            obs, _ = envs.reset(options={"reset_mask": terminated})  # finished episodes idle until all end
    envs.close()
    return rows


def resume_point(parser: argparse.ArgumentParser, out: Path, seed: int,
                 run: dict[str, Any]) -> tuple[Path | None, float]:
    """(the saved state to continue from, the wall seconds spent before it) for this ``run`` in ``out``: the
    periodic state if there is one, else the final model if it is of this run, else ``(None, 0)``. A state of
    other settings is a usage error: resuming it would mix two runs."""
    from mara_agents.allocators.third_party import maskable_ppo_name

    name = maskable_ppo_name(seed)
    for path in (out / f"{RESUME_PREFIX}{name}.zip", out / f"{name}.zip"):
        description = path.with_suffix(".json")
        if not (path.is_file() and description.is_file()):
            continue
        recorded = json.loads(description.read_text())
        if recorded.get("run") == run:
            return path, float(recorded.get("wall_s", 0.0))
        if path.name.startswith(RESUME_PREFIX):
            differ = sorted(key for key in run if (recorded.get("run") or {}).get(key) != run[key])
            parser.error(f"--out {out} holds a resumable run of other settings ({path.name}; they differ in "
                         f"{', '.join(differ)}): pass another --out or delete it")
    return None, 0.0


BC_STEPS, BC_EPOCHS = 32_768, 20


def behaviour_cloning(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Any] | None:
    """The ``bc`` settings of :func:`train` from ``--bc-from``/``--bc-steps``/``--bc-epochs`` (None without
    ``--bc-from``); a usage error for settings that cannot work together."""
    if args.bc_from is None:
        for flag, value in (("--bc-steps", args.bc_steps), ("--bc-epochs", args.bc_epochs)):
            if value is not None:
                parser.error(f"{flag} {value} needs --bc-from")
        return None
    if args.forecast not in ("none", "fm"):
        parser.error(f"--bc-from {args.bc_from} clones FM-slack, which acts on FM's forecast: it needs --forecast fm "
                     f"or none, got --forecast {args.forecast}")
    steps = BC_STEPS if args.bc_steps is None else args.bc_steps
    if steps > args.steps:
        parser.error(f"--bc-steps {steps} exceeds --steps {args.steps} (the expert's env steps count in the budget)")
    return {"from": args.bc_from, "steps": steps, "epochs": BC_EPOCHS if args.bc_epochs is None else args.bc_epochs}


def main(argv: list[str] | None = None) -> list[dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=_args.integer(1, 10**9), default=50_000, help="training environment steps")
    parser.add_argument("--n-envs", type=_args.integer(1, 256), default=4, help="parallel training envs")
    parser.add_argument("--n-steps", type=_args.integer(2, 10**6), default=512,
                        help="rollout length per env and update")
    parser.add_argument("--net-arch", type=_args.integer(1, 4096), nargs="+", default=list(DEFAULT_NET_ARCH),
                        metavar="WIDTH", help="hidden layer widths of the policy and value networks (default: 64 64)")
    parser.add_argument("--episodes", type=_args.integer(1, 10**5), default=5, help="check episodes after training")
    _args.add_env_flags(parser)
    _args.add_forecast_flags(parser)
    parser.add_argument("--workload", type=_args.existing_file, default=None,
                        help="check on this workload file's episodes")
    parser.add_argument("--out", type=_args.writable_dir, default=None,
                        help="write maskable_ppo_seed{S}.zip and its JSON manifest into this directory, and the "
                             "resumable training state while it trains")
    parser.add_argument("--checkpoint-every", type=_args.integer(1, 10**9), default=20_000,
                        help="with --out: write the resumable training state after this many more steps")
    parser.add_argument("--bc-from", type=_args.bc_expert, default=None,
                        help="warm-start by behaviour cloning of this expert before PPO (slack-fm: FM-slack)")
    parser.add_argument("--bc-steps", type=_args.integer(1, 10**9), default=None,
                        help=f"with --bc-from: env steps of expert play, counted in --steps and rounded up to a "
                             f"multiple of --n-envs (default {BC_STEPS})")
    parser.add_argument("--bc-epochs", type=_args.integer(1, 10**4), default=None,
                        help=f"with --bc-from: passes over the expert's steps (default {BC_EPOCHS})")
    _args.add_logdir(parser)
    args = parser.parse_args(argv)
    env_id, forecast = _args.forecast_env(parser, args.forecast, args.forecast_kind)
    bc = behaviour_cloning(parser, args)
    env_kwargs = {**_args.env_kwargs(args), **forecast}
    check_kwargs = {**env_kwargs, "workload": args.workload} if args.workload else {**env_kwargs,
                                                                                     "curve_splits": ("val",)}
    check_env = _args.check_before_work(parser, lambda: gym.make(env_id, **ENV_OPTIONS, **check_kwargs))
    if args.workload and args.episodes > len(check_env.unwrapped.engine.workload.episodes):
        parser.error(f"--episodes {args.episodes} exceeds the {len(check_env.unwrapped.engine.workload.episodes)} "
                     f"episodes of --workload {args.workload}")
    check_env.close()
    defaults = mara_env.MARAConfig()
    env_options = {**ENV_OPTIONS, **env_kwargs, "task_set": defaults.task_set,
                   "curve_splits": list(defaults.curve_splits)}
    run = json.loads(json.dumps({"env_id": env_id, "env_options": env_options, "seed": args.seed, "steps": args.steps,
                                 "n_envs": args.n_envs, "n_steps": args.n_steps, "net_arch": args.net_arch,
                                 **({} if bc is None else {"bc": bc})}, default=str))  # as recorded
    resume, wall_before = (None, 0.0) if args.out is None else resume_point(parser, args.out, args.seed, run)
    checkpoints = None
    cloned: dict[str, Any] = {} if resume is None else json.loads(resume.with_suffix(".json").read_text()).get(
        "bc_record", {})
    started = time.perf_counter()
    if args.out is not None:
        from mara_agents.allocators.third_party import maskable_ppo_name

        args.out.mkdir(parents=True, exist_ok=True)
        state = args.out / f"{RESUME_PREFIX}{maskable_ppo_name(args.seed)}.zip"
        checkpoints = Checkpoints(state, args.checkpoint_every,
                                  lambda: {"run": run, "wall_s": round(wall_before + time.perf_counter() - started, 1),
                                           **({"bc_record": cloned} if cloned else {})})
    if resume is not None:
        print(f"resuming from {resume}")

    def on_cloned(model: Any, record: dict[str, Any]) -> None:
        cloned.update(record)
        print(f"behaviour cloning of {record['from']}: {record['env_steps']} env steps of expert play, "
              f"{record['epochs']} epochs, final loss {record['final_loss']:.4f}")
        if args.out is not None:  # then the state after cloning, so a resumed run goes straight to PPO
            from mara_agents.allocators.third_party import save_maskable_ppo

            path = save_maskable_ppo(model, args.out / f"{BC_PREFIX}{maskable_ppo_name(args.seed)}.zip", env_id,
                                     details={"method": "maskable-ppo, behaviour cloning only", "run": run,
                                              "bc": record, "env_steps": record["env_steps"]},
                                     **run["env_options"])
            print(f"wrote {path} (the policy after behaviour cloning, before PPO)")
            save_state(model, checkpoints.path, checkpoints.describe())

    model = train(args.steps, args.n_envs, args.seed, args.n_steps, args.logdir, env_id, resume, checkpoints,
                  tuple(args.net_arch), bc, on_cloned, **env_kwargs)
    wall = wall_before + time.perf_counter() - started
    if model.logger.dir:
        print(f"TensorBoard log: {model.logger.dir}")
    rows = evaluate(model, args.episodes, env_id=env_id, **check_kwargs)
    rates = [row["success_rate"] for row in rows if not np.isnan(row["success_rate"])]  # NaN: no tasks came
    check = {"episodes": len(rows), "on": args.workload or "random ID episodes, val curves",
             "success_rate": float(np.mean(rates)) if rates else None,
             "conflicts": float(sum(r["conflicts"] for r in rows)), "repaired": float(sum(r["repaired"] for r in rows))}
    rate = f"{100 * check['success_rate']:.1f} %" if rates else "n/a"
    print(f"MaskablePPO on {env_id}, {args.steps} steps, seed {args.seed} ({wall:.0f} s, "
          f"{model.num_timesteps / wall:.0f} env steps/s): check success rate {rate} over {len(rows)} episodes "
          f"({check['on']}); conflicts {check['conflicts']:.0f}, repaired picks {check['repaired']:.0f}")
    if args.out is not None:
        from mara_agents.allocators.third_party import save_maskable_ppo

        command = shlex.join(["python", "examples/sb3_maskable_ppo.py", *(sys.argv[1:] if argv is None else argv)])
        details = {"method": "maskable-ppo", "trainer": "sb3-contrib MaskablePPO, MlpPolicy", "seed": args.seed,
                   "steps": args.steps, "env_steps": int(model.num_timesteps), "n_envs": args.n_envs,
                   "n_steps": args.n_steps, "batch_size": model.batch_size, "net_arch": args.net_arch, "run": run,
                   "wall_s": round(wall, 1), "env_steps_per_s": round(model.num_timesteps / wall, 1),
                   **({"bc": cloned} if cloned else {}), "check": check,
                   "versions": {"python": platform.python_version(), **{name: version(name) for name in LIBRARIES}},
                   "command": command}
        path = save_maskable_ppo(model, args.out / f"{maskable_ppo_name(args.seed)}.zip", env_id, details=details,
                                 **run["env_options"])
        checkpoints.path.unlink(missing_ok=True)
        checkpoints.path.with_suffix(".json").unlink(missing_ok=True)
        print(f"wrote {path}")
    return rows


if __name__ == "__main__":
    main()
