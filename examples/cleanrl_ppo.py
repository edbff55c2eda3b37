"""CleanRL-style single-file PPO on the native vector env of ``MARA-v0`` (or ``MARA-Forecast-v0``), flat
observation, per-node action masks.

``gym.make_vec(ENV, num_envs=N)`` steps all N episodes as arrays in one env object
(:mod:`mara_env.vector_env`); with ``--forecast fm`` (or ``wls``) it is ``MARA-Forecast-v0``, whose frozen
predictor runs once per step for all N sub-envs and whose features follow the flat vector. One MLP reads the
flat observation (``observation="flat"``) and emits, for each of the M nodes, logits over idle and the K
slots; empty slots are masked out with the vector env's ``action_masks()``; nodes that still pick the same
slot are resolved by ``conflicts="repair"``. The vector env resets an ended sub-env on its next step
(Gymnasium's ``NEXT_STEP`` autoreset): that step's action is ignored, so its transition is left out of the
loss and GAE stops at the step that ended the episode. Read top to bottom: rollout, GAE, minibatch updates,
TensorBoard logging with ``global_step`` (into a new ``cleanrl_ppo_N`` folder under ``--logdir``, by default
the repository's gitignored ``runs/``). Each update prints the training env steps/s so far;
``--check-episodes N`` then plays N greedy episodes on val curves, all at once in one vector env. ``--out DIR``
writes the trained network as ``DIR/cleanrl_ppo_seed{S}.pt`` with a JSON manifest (the flags, the env, the
throughput, the SHA-256), both atomically. Every flag is checked before anything is built.

    python examples/cleanrl_ppo.py --total-timesteps 100000
    python examples/cleanrl_ppo.py --forecast fm --num-envs 64 --num-steps 64 --total-timesteps 200000
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical
from torch.utils.tensorboard import SummaryWriter

import mara_env  # noqa: F401  (registers MARA-v0)

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _args  # noqa: E402  (the examples' shared flag checks)


@dataclass
class Args:
    total_timesteps: int = 100_000
    """environment steps, summed over the vector envs"""
    num_envs: int = 4
    """parallel environments"""
    num_steps: int = 256
    """rollout length per env and update"""
    learning_rate: float = 3e-4
    """Adam step size"""
    gamma: float = 0.99
    """discount"""
    gae_lambda: float = 0.95
    """GAE lambda"""
    num_minibatches: int = 4
    """minibatches per epoch"""
    update_epochs: int = 4
    """epochs per update"""
    clip_coef: float = 0.2
    """PPO clip range"""
    ent_coef: float = 0.01
    """entropy bonus"""
    vf_coef: float = 0.5
    """value loss weight"""
    max_grad_norm: float = 0.5
    """gradient clipping"""
    forecast: str = "none"
    """fm or wls: train on MARA-Forecast-v0 with this frozen predictor's features (none: MARA-v0)"""
    forecast_kind: str = "median"
    """median, or samples (with --forecast fm) for FM's spread as well"""
    flat_history: int = 16
    """loss-history points per slot in the observation"""
    arrival_window: int = 500
    """T, steps during which tasks arrive"""
    bank: str = ""
    """curve bank directory (empty: the shipped bank)"""
    seed: int = 0
    """seed of the envs and the network"""
    logdir: str = str(_args.DEFAULT_LOGDIR)
    """TensorBoard directory (each run writes a new cleanrl_ppo_N folder in it)"""
    check_episodes: int = 0
    """greedy episodes on val curves after training (sub-env i reset with seed i); 0: no check"""
    out: str = ""
    """directory for cleanrl_ppo_seed{S}.pt and its manifest (empty: do not save)"""


# How each flag's text becomes a value; a bad one is a one-line usage error (exit 2) before any work.
CHECKS = {"total_timesteps": _args.integer(1, 10**9), "num_envs": _args.integer(1, 256),
          "num_steps": _args.integer(1, 10**5), "learning_rate": _args.number(0, 1, open_low=True),
          "gamma": _args.number(0, 1), "gae_lambda": _args.number(0, 1), "num_minibatches": _args.integer(1),
          "update_epochs": _args.integer(1, 1000), "clip_coef": _args.number(0, 10, open_low=True),
          "ent_coef": _args.number(0, 10), "vf_coef": _args.number(0, 10),
          "max_grad_norm": _args.number(0, open_low=True), "forecast": _args.forecast,
          "forecast_kind": _args.forecast_kind, "flat_history": _args.integer(1),
          "arrival_window": _args.integer(1), "check_episodes": _args.integer(0, 10**4),
          "bank": lambda text: text and _args.existing_dir(text),
          "seed": _args.seed, "logdir": lambda text: str(_args.writable_dir(text)),
          "out": lambda text: text and str(_args.writable_dir(text))}


def parse_args(argv: list[str] | None = None) -> Args:
    """The CLI, generated from :class:`Args` (one flag per field); values are checked before anything is built."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for field in dataclasses.fields(Args):
        parser.add_argument(f"--{field.name.replace('_', '-')}", type=CHECKS[field.name], default=field.default)
    args = Args(**vars(parser.parse_args(argv)))
    if args.num_minibatches > args.num_envs * args.num_steps:
        parser.error(f"--num-minibatches {args.num_minibatches} exceeds the batch, --num-envs × --num-steps = "
                     f"{args.num_envs * args.num_steps}")
    _args.check_before_work(parser, lambda: make_envs(args, parser, 1)).close()
    return args


def make_envs(args: Args, parser: argparse.ArgumentParser | None = None, num_envs: int | None = None,
              **options: Any) -> gym.Env:
    """The native vector env of ``args.num_envs`` (or ``num_envs``) sub-envs with the recipe's options (and
    ``options``, e.g. ``curve_splits``)."""
    env_id, forecast = _args.forecast_env(parser or argparse.ArgumentParser(), args.forecast, args.forecast_kind)
    kwargs = {"observation": "flat", "conflicts": "repair", "flat_history": args.flat_history,
              "arrival_window": args.arrival_window, **forecast, **({"bank": args.bank} if args.bank else {})}
    return gym.make_vec(env_id, num_envs=num_envs or args.num_envs, **kwargs, **options)


def layer(inputs: int, outputs: int, std: float = np.sqrt(2)) -> nn.Linear:
    linear = nn.Linear(inputs, outputs)
    nn.init.orthogonal_(linear.weight, std)
    nn.init.zeros_(linear.bias)
    return linear


class Agent(nn.Module):
    """Shared trunk; a value head and one categorical head per node over [idle, slot 0 … slot K-1]."""

    def __init__(self, obs_size: int, nvec: np.ndarray):
        super().__init__()
        self.nodes, self.choices = len(nvec), int(nvec[0])
        self.trunk = nn.Sequential(layer(obs_size, 128), nn.Tanh(), layer(128, 128), nn.Tanh())
        self.actor = layer(128, self.nodes * self.choices, std=0.01)
        self.critic = layer(128, 1, std=1.0)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(self.trunk(obs)).squeeze(-1)

    def act(self, obs: torch.Tensor, mask: torch.Tensor, action: torch.Tensor | None = None):
        """(action, log-prob, entropy, value); the log-prob and entropy are summed over the nodes."""
        hidden = self.trunk(obs)
        logits = self.actor(hidden).view(-1, self.nodes, self.choices)
        logits = torch.where(mask.view_as(logits), logits, torch.tensor(-1e8))
        dist = Categorical(logits=logits)
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action).sum(-1), dist.entropy().sum(-1), self.critic(hidden).squeeze(-1)


def check(agent: Agent, args: Args, episodes: int) -> list[float]:
    """Greedy success rates of ``episodes`` episodes on val curves, all played at once: sub-env i is reset with
    seed i and plays the episode ``gym.make(ENV, curve_splits=("val",)).reset(seed=i)`` would."""
    envs = make_envs(args, num_envs=episodes, curve_splits=("val",))
    obs, _ = envs.reset(seed=0)
    rates = np.full(episodes, np.nan)
    finished = np.zeros(episodes, dtype=bool)
    while not finished.all():
        with torch.no_grad():
            logits = agent.actor(agent.trunk(torch.as_tensor(obs))).view(episodes, agent.nodes, agent.choices)
        mask = torch.as_tensor(envs.action_masks()).view_as(logits)
        picks = torch.where(mask, logits, torch.tensor(-1e8)).argmax(-1).numpy()
        obs, _, terminated, _, info = envs.step(picks)
        if "episode_metrics" in info:
            ended = terminated & ~finished  # the first episode of each sub-env only
            rates[ended] = info["episode_metrics"]["success_rate"][ended]
            finished |= terminated
    envs.close()
    return rates.tolist()


class GreedyLogits(nn.Module):
    """What playing needs of the agent: flat observations (N, D) to per-node logits (N, M, K + 1)."""

    def __init__(self, agent: Agent):
        super().__init__()
        self.agent = agent

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.agent.actor(self.agent.trunk(obs)).view(-1, self.agent.nodes, self.agent.choices)


def save(agent: Agent, args: Args, env_steps: int, wall: float, checked: list[float]) -> tuple[Path, Path]:
    """Write ``cleanrl_ppo_seed{S}.pt`` (the network's weights, to resume or fine-tune) and
    ``cleanrl_ppo_seed{S}_policy.pt2`` (the greedy logits as a ``torch.export`` program, which
    ``evaluate.py --policy NAME=mara_agents.allocators.third_party:make_exported_policy:checkpoint=…`` plays with
    no class of this file), each with its manifest, into ``args.out``."""
    from mara_agents.allocators.third_party import exported_policy_name, save_exported_policy
    from mara_agents.play.checkpoints import atomic_torch_save, write_checksum_manifest

    weights = Path(args.out) / f"cleanrl_ppo_seed{args.seed}.pt"
    atomic_torch_save(agent.state_dict(), weights)
    env_id, forecast = _args.forecast_env(argparse.ArgumentParser(), args.forecast, args.forecast_kind)
    details = {"method": "cleanrl-ppo", "seed": args.seed, "env_id": env_id,
               "args": {key: str(value) if isinstance(value, Path) else value
                        for key, value in dataclasses.asdict(args).items()},
               "env_steps": env_steps, "wall_s": round(wall, 1), "env_steps_per_s": round(env_steps / wall, 1),
               "check_val_success_rates": [None if np.isnan(r) else r for r in checked]}
    write_checksum_manifest(weights, details)
    obs_size = agent.trunk[0].in_features
    program = torch.export.export(GreedyLogits(agent).eval(), (torch.zeros(2, obs_size),),
                                  dynamic_shapes={"obs": {0: torch.export.Dim("batch")}})
    policy = save_exported_policy(program, Path(args.out) / f"{exported_policy_name(args.seed)}.pt2", env_id,
                                  agent.nodes, agent.choices, obs_size, details, observation="flat",
                                  conflicts="repair", flat_history=args.flat_history, **forecast)
    return weights, policy


def main(argv: list[str] | None = None) -> list[float]:
    """Train; returns the success rate of every episode that ended during training, in order."""
    args = parse_args(argv)
    torch.set_num_threads(1)  # tiny networks: more threads only contend for the cores
    torch.manual_seed(args.seed)
    envs = make_envs(args)
    agent = Agent(envs.single_observation_space.shape[0], envs.single_action_space.nvec)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    writer = SummaryWriter(_args.new_run_dir(Path(args.logdir), "cleanrl_ppo"))
    print(f"TensorBoard log: {writer.log_dir}")

    shape = (args.num_steps, args.num_envs)
    obs_buf = torch.zeros(shape + envs.single_observation_space.shape)
    mask_buf = torch.zeros(shape + (agent.nodes * agent.choices,), dtype=torch.bool)
    action_buf = torch.zeros(shape + (agent.nodes,), dtype=torch.long)
    logprob_buf, reward_buf, done_buf, value_buf = (torch.zeros(shape) for _ in range(4))

    obs_np, _ = envs.reset(seed=args.seed)
    obs = torch.as_tensor(obs_np)
    mask = torch.as_tensor(envs.action_masks())
    done = torch.zeros(args.num_envs)
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    updates = max(args.total_timesteps // batch_size, 1)
    global_step, start, success_rates = 0, time.time(), []

    for update in range(updates):
        # Rollout.
        for step in range(args.num_steps):
            global_step += args.num_envs
            obs_buf[step], mask_buf[step], done_buf[step] = obs, mask, done
            with torch.no_grad():
                action, logprob, _, value = agent.act(obs, mask)
            action_buf[step], logprob_buf[step], value_buf[step] = action, logprob, value
            obs_np, reward, terminated, truncated, info = envs.step(action.numpy())
            reward_buf[step] = torch.as_tensor(reward, dtype=torch.float32)
            obs, done = torch.as_tensor(obs_np), torch.as_tensor(terminated | truncated, dtype=torch.float32)
            mask = torch.as_tensor(envs.action_masks())
            if "episode_metrics" in info:
                ended = info["_episode_metrics"]
                for rate in info["episode_metrics"]["success_rate"][ended]:
                    success_rates.append(float(rate))
                    writer.add_scalar("charts/success_rate", rate, global_step)

        # Generalised advantage estimation (a done at step t+1 means step t ended its episode).
        with torch.no_grad():
            next_value = agent.value(obs)
            advantages = torch.zeros(shape)
            last_gae = torch.zeros(args.num_envs)
            for t in reversed(range(args.num_steps)):
                next_done = done if t == args.num_steps - 1 else done_buf[t + 1]
                following = next_value if t == args.num_steps - 1 else value_buf[t + 1]
                delta = reward_buf[t] + args.gamma * following * (1 - next_done) - value_buf[t]
                last_gae = delta + args.gamma * args.gae_lambda * (1 - next_done) * last_gae
                advantages[t] = last_gae
            returns = advantages + value_buf

        # Minibatch updates, over the steps that acted: a step after a done only reset its sub-env.
        b_obs, b_mask = obs_buf.reshape(batch_size, -1), mask_buf.reshape(batch_size, -1)
        b_action, b_logprob = action_buf.reshape(batch_size, -1), logprob_buf.reshape(-1)
        b_adv, b_ret = advantages.reshape(-1), returns.reshape(-1)
        acted = torch.nonzero(done_buf.reshape(-1) == 0).squeeze(-1)
        for _ in range(args.update_epochs):
            for idx in acted[torch.randperm(len(acted))].split(minibatch_size):
                _, logprob, entropy, value = agent.act(b_obs[idx], b_mask[idx], b_action[idx])
                ratio = (logprob - b_logprob[idx]).exp()
                adv = (b_adv[idx] - b_adv[idx].mean()) / (b_adv[idx].std() + 1e-8)
                clipped = ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = torch.max(-adv * ratio, -adv * clipped).mean()
                v_loss = 0.5 * ((value - b_ret[idx]) ** 2).mean()
                loss = pg_loss - args.ent_coef * entropy.mean() + args.vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

        writer.add_scalar("losses/policy", pg_loss.item(), global_step)
        writer.add_scalar("losses/value", v_loss.item(), global_step)
        steps_per_s = global_step / (time.time() - start)
        writer.add_scalar("charts/SPS", steps_per_s, global_step)
        recent = [rate for rate in success_rates[-10:] if not np.isnan(rate)]  # NaN: an episode without tasks
        progress = ("no episode finished yet" if not success_rates else
                    f"recent success rate {np.mean(recent):.3f}" if recent else "the recent episodes had no tasks")
        print(f"update {update + 1}/{updates}  step {global_step}  {steps_per_s:.0f} env steps/s  {progress}")
    envs.close()
    writer.close()
    wall = time.time() - start
    print(f"trained {global_step} env steps in {wall:.0f} s: {global_step / wall:.0f} training env steps/s")
    checked = check(agent, args, args.check_episodes) if args.check_episodes else []
    if checked:
        rates = [rate for rate in checked if not np.isnan(rate)]
        mean = f"{100 * np.mean(rates):.1f} %" if rates else "n/a (no tasks)"
        print(f"greedy check: success rate {mean} over {len(checked)} episodes on val curves")
    if args.out:
        print("wrote {} and {}".format(*save(agent, args, global_step, wall, checked)))
    return success_rates


if __name__ == "__main__":
    main()
