"""Hallway's cue, update by update: the probe and the replays of
docs/experiments/2026-11-26-hallway-cue.md.

    python benchmarks/hallway_cue.py probe  SEED STOP OUT.jsonl [KEY=VALUE ...]
    python benchmarks/hallway_cue.py replay SEED STEP OUT.jsonl [KEY=VALUE ...]

The note's runs used the config before its fix: add ``hyperparameters__beta=0.03
hyperparameters__advantage_scale_floor=0.0001`` (seed 19: ``replay 19 83000``, seed 14:
``replay 14 98000``).

``probe`` trains ``configs/ppo/Hallway.yaml`` with ``--seed SEED`` until STOP steps and
writes one JSON line per update: the buffer's advantage spread and largest deviation, then,
before and after the update, what the policy does on the two direct-route episodes (cue 0
and cue 1, 8 steps from cell 0, zero initial memory): each goal's probability at the far
end, the largest difference between the two cues' LSTM outputs there (``h_sep_end``, at
most 2) and the critic's values; and the update's stats. ``KEY=VALUE`` overrides a config
key as ``tftrainers.train`` takes it (``hyperparameters__beta=0.03``), in both modes.

``replay`` trains to the first update at or after STEP and, there, runs that update again
from the same weights, Adam moments and minibatch order under each variant (advantages
scaled otherwise, Adam's beta_2 or epsilon, a KL stop), one minibatch at a time, and
writes what each variant leaves of the cue. The run is deterministic under its seed, so
the replay of the unchanged update reproduces the logged one. It patches
``OnPolicyTrainer._update``: a diagnostic, not an API.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np
import tensorflow as tf
import yaml

import tftrainers
from tftrainers.processing import BufferKey
from tftrainers.trainers import on_policy
from tftrainers.trainers.on_policy import OnPolicyTrainer

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG = os.path.join(HERE, "..", "configs", "ppo", "Hallway.yaml")
L = 8  # the built-in's corridor: the direct route takes 8 decisions
PROBE_OBS = np.zeros((2, L, L + 2), np.float32)
for _cue in range(2):
    for _t in range(L):
        PROBE_OBS[_cue, _t, _t] = 1
    PROBE_OBS[_cue, 0, L + _cue] = 1


def probe(trainer):
    """What the policy and critic do on the two direct-route episodes."""
    actor = trainer.policy.actor
    x = tf.constant(PROBE_OBS.reshape(2 * L, L + 2))
    enc, _ = actor.body([x], memory=None, sequence_length=L)
    logits = actor.action_model.masked_logits(enc, None)[0].numpy().reshape(2, L, 5)
    p = tf.nn.softmax(logits).numpy()
    h = enc.numpy().reshape(2, L, -1)
    values, _ = trainer.optimizer.critic([x], memory=None, sequence_length=L)
    v = list(values.values())[0].numpy().reshape(2, L)
    return {"p_goal_end": [[float(p[c, L - 1, 3]), float(p[c, L - 1, 4])] for c in range(2)],
            "p_fwd_mean": float(p[:, :L - 1, 1].mean()),
            "h_sep_end": float(np.abs(h[0, L - 1] - h[1, L - 1]).max()),
            "v0": [float(v[c, 0]) for c in range(2)],
            "v_end": [float(v[c, L - 1]) for c in range(2)]}


def run_probe(seed, stop_at, out, overrides):
    original = OnPolicyTrainer._update

    def patched(self):
        adv = self.buffer[BufferKey.ADVANTAGES].copy()
        real = adv[self.buffer[BufferKey.MASK] > 0]
        rec = {"step": int(self.step), "n": int(len(real)), "adv_std": float(real.std()),
               "adv_absmax": float(np.abs(real - real.mean()).max()), "before": probe(self)}
        original(self)
        self.wait_for_update()
        rec["after"] = probe(self)
        rec["stats"] = {k: float(v) for k, v in self.last_update.items()}
        out.write(json.dumps(rec) + "\n")
        out.flush()

    OnPolicyTrainer._update = patched
    tftrainers.train(CONFIG, run_id=f"hallway-cue-probe-{seed}", results_dir="results",
                     seed=seed, force=True, verbose=0,
                     callbacks=[lambda behavior, step, stats: step < stop_at], **overrides)


#: name -> how the replayed update differs from the logged one.
VARIANTS = [
    ("as trained", {}),
    *((f"floor {f:g}", {"floor": f}) for f in (0.1, 0.3, 0.5, 1.0)),
    ("centred, not scaled", {"unscaled": True}),
    ("normalised, clipped to +-3", {"clip": 3.0}),
    ("Adam beta_2 0.99", {"beta2": 0.99}),
    ("Adam beta_2 0.9", {"beta2": 0.9}),
    ("Adam epsilon 1e-5", {"adam_eps": 1e-5}),
    ("KL stop 0.03", {"kl_stop": 0.03}),
]


def minibatch(batch, rows, seq):
    mb = tf.nest.map_structure(lambda x: tf.gather(x, rows), batch)
    return mb._replace(memory=tf.gather(batch.memory, rows[::seq]),
                       critic_memory=tf.gather(batch.critic_memory, rows[::seq]))


def replay_variant(trainer, batch, n, index, count, schedules, beta2=None, adam_eps=None,
                   kl_stop=None):
    """The update's minibatch steps, one at a time (as the compiled loop runs them)."""
    opt = trainer.optimizer
    adam = opt.optimizer
    saved = adam.beta_2, adam.epsilon
    if beta2 is not None:
        adam.beta_2 = beta2
    if adam_eps is not None:
        adam.epsilon = adam_eps
    lr = schedules["learning_rate"]
    adam.learning_rate.assign(lr)
    seq = opt.sequence_length
    kls, steps = [], []
    for i in range(count):
        before = adam.flat_values(opt.variables).numpy()
        out = opt._update_step(minibatch(batch, tf.constant(index[i]), seq),
                               tf.constant(schedules["beta"]), tf.constant(schedules["epsilon"]))
        kls.append(float(out["Policy/Approx KL"]))
        delta = np.abs(adam.flat_values(opt.variables).numpy() - before) / lr
        steps.append((round(float(delta.max()), 2), round(float(np.median(delta)), 3)))
        if kl_stop is not None and kls[-1] > kl_stop:
            break
    adam.beta_2, adam.epsilon = saved
    terms = opt.actor_terms(minibatch(batch, np.arange(n), seq), tf.constant(0.2))
    return {"minibatches": len(kls), "kl_per_minibatch": [round(k, 4) for k in kls],
            "buffer_kl": round(float(terms.approx_kl), 4),
            "adam_step_in_lr(max,median)": steps, **probe(trainer)}


def run_replay(seed, target, out, overrides):
    original = OnPolicyTrainer._update

    def patched(self):
        if self.step < target:
            return original(self)
        opt = self.optimizer
        adam = opt.optimizer
        state_vars = list(opt.variables) + [adam.momentum, adam.velocity, adam.iterations]
        state = [v.numpy() for v in state_vars]
        raw = self.buffer[BufferKey.ADVANTAGES].copy()
        mask = self.buffer[BufferKey.MASK]
        real = raw[mask > 0]
        schedules = opt.schedules(self.step)
        n = len(self.buffer)
        capacity = opt.capacity(n)
        index, count = opt.minibatch_index(n, capacity, self.rng)
        actions = self.buffer[BufferKey.DISCRETE_ACTION][:, 0]
        top = np.argsort(-np.abs(raw - real.mean()) * mask)[:10]
        out.write(json.dumps({
            "step": int(self.step), "n": int(len(real)), "adv_std": float(real.std()),
            "largest (row, action, raw, normalised)": [
                (int(i), int(actions[i]), round(float(raw[i]), 4),
                 round(float((raw[i] - real.mean()) / max(real.std(), 1e-4)), 2)) for i in top],
            "adam_velocity_median": float(np.median(adam.velocity.numpy())),
            "before": probe(self)}) + "\n")
        for name, v in VARIANTS:
            for variable, value in zip(state_vars, state):
                variable.assign(value)
            centred = raw - real.mean()
            if "floor" in v:
                adv = centred / max(real.std(), v["floor"]) * mask
            elif v.get("unscaled"):
                adv = centred * mask
            else:
                adv = on_policy.normalized_advantages(
                    raw, mask, self.settings.hyperparameters.advantage_scale_floor)
                if "clip" in v:
                    adv = np.clip(adv, -v["clip"], v["clip"])
            self.buffer[BufferKey.ADVANTAGES] = adv.astype(np.float32)
            batch = tf.nest.map_structure(tf.constant, opt.make_batch(self.buffer, capacity))
            rec = replay_variant(self, batch, n, index, count, schedules,
                                 **{k: v[k] for k in ("beta2", "adam_eps", "kl_stop") if k in v})
            out.write(json.dumps({"variant": name, **rec}) + "\n")
            out.flush()
        out.close()
        os._exit(0)

    OnPolicyTrainer._update = patched
    tftrainers.train(CONFIG, run_id=f"hallway-cue-replay-{seed}", results_dir="results",
                     seed=seed, force=True, verbose=0, **overrides)


def main(argv):
    mode, seed, step, path = argv[0], int(argv[1]), int(argv[2]), argv[3]
    overrides = {k: yaml.safe_load(v) for k, v in (a.split("=", 1) for a in argv[4:])}
    with open(path, "w") as out:
        if mode == "probe":
            run_probe(seed, step, out, overrides)
        elif mode == "replay":
            run_replay(seed, step, out, overrides)
        else:
            raise SystemExit(f"unknown mode {mode!r}: probe or replay")


if __name__ == "__main__":
    main(sys.argv[1:])
