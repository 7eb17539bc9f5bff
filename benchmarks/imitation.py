"""Behavioral cloning benchmark (issue #13 item 4): every configs/bc config x seeds.

    python benchmarks/imitation.py                       # every config, seeds 0 1 2
    python benchmarks/imitation.py --configs Basic Ball3D --seeds 0 1 2
    python benchmarks/imitation.py --configs --dagger GridWorld --labels 20000 40000 80000
                                                         # teacher vs dagger, same label budgets

Per run: the teacher's return, the student's (deterministic actions, the same evaluation as
``tftrainers-evaluate --deterministic``), a uniform random policy's, the score
(student - random) / (teacher - random), the teacher-labelled steps used and the wall
time. Every seed is printed; nothing is averaged away. Runs on whatever the machine has:
wall times on a shared machine are noisy.

``--dagger CONFIG --labels N ...`` compares the two modes on the same teacher-label budgets:
for each N, ``teacher`` mode runs ``N / teacher_agents`` steps (the teacher drives that share
of the agents, and only its steps are labelled) and ``dagger`` mode runs ``N`` steps (the
student drives every agent and the teacher labels every step). Then it prints the smallest
budget at which each mode scores >= 0.95 on every seed. ``--modes dagger`` (or ``teacher``)
runs one side only. ``--results-dir DIR`` keeps the runs in DIR (default: a new temporary
folder), e.g. for ``tftrainers-plot``.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

CONFIGS = ("Basic", "GridWorld", "Ball3D", "Hallway", "Ball3DDistill")
HERE = os.path.dirname(os.path.abspath(__file__))


def run_one(config: str, seed: int, results: str, overrides=None, episodes: int = 200):
    from tftrainers.envs import make
    from tftrainers.evaluate import RandomPolicy, evaluate, make_policy
    from tftrainers.runner import run_training
    from tftrainers.settings import load_run_options
    path = os.path.join(HERE, "..", "configs", "bc", f"{config}.yaml")
    run_id = f"{config}-{seed}" + ("-" + "-".join(f"{k}{v}" for k, v in (overrides or {})
                                                  .items()) if overrides else "")
    options = load_run_options(path, {"run_id": run_id, "seed": seed, "results_dir": results,
                                      "force": True})
    (name, settings), = options.behaviors.items()
    for key, value in (overrides or {}).items():
        setattr(settings if key == "max_steps" else settings.hyperparameters, key, value)
    # A summary (the CSV row the labels are read from) before a short budget ends.
    settings.summary_freq = min(settings.summary_freq, max(settings.max_steps // 2, 1))
    start = time.perf_counter()
    run_training(options, log=lambda line: None)
    wall = time.perf_counter() - start
    run_dir = os.path.join(results, run_id)
    import csv
    with open(os.path.join(run_dir, "run_logs", f"{name}.csv")) as f:
        rows = list(csv.DictReader(f))
    labels = float(rows[-1].get("Policy/Teacher Labels") or 0)
    env_id = options.env_settings.env_path
    hp = settings.hyperparameters

    def score(make):  # a fresh env per policy; the policy made for it (heuristics read it)
        env = make_env_for_score()
        return evaluate(env, make(env), episodes=episodes)[name]["mean_reward"]

    def make_env_for_score():
        return make(env_id, seed=10_000 + seed)
    teacher = score(lambda env: make_policy(hp.teacher or "heuristic", env, seed=seed,
                                            deterministic=True))
    student = score(lambda env: make_policy(run_dir, env, seed=seed, deterministic=True))
    random = score(lambda env: RandomPolicy(env, seed=seed))
    return {"config": config, "seed": seed, "teacher": teacher, "student": student,
            "random": random, "score": (student - random) / (teacher - random),
            "labels": int(labels), "wall_s": wall, **(overrides or {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="*", default=list(CONFIGS))
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--dagger", nargs="*", default=[],
                        help="configs to run in teacher and dagger mode on one label budget")
    parser.add_argument("--labels", nargs="*", type=int, default=[20000, 40000, 80000],
                        help="teacher-label budgets of the --dagger comparison")
    parser.add_argument("--modes", nargs="+", default=["teacher", "dagger"],
                        choices=["teacher", "dagger"],
                        help="--dagger: the modes to run (e.g. only dagger after a change "
                             "that leaves teacher mode's code path as it was)")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--results-dir", default=None,
                        help="keep the runs here (default: a new temporary folder)")
    args = parser.parse_args()
    from tftrainers.console import quiet_tensorflow
    quiet_tensorflow()  # TensorFlow's start-up lines would bury the figures
    results = args.results_dir or tempfile.mkdtemp(prefix="imitation-")
    print("| config | mode | seed | teacher | student | random | score | labels | wall s |")
    print("|---|---|---|---|---|---|---|---|---|")

    def show(r, mode):
        print(f"| {r['config']} | {mode} | {r['seed']} | {r['teacher']:.3f} | "
              f"{r['student']:.3f} | {r['random']:.3f} | {r['score']:.3f} | {r['labels']} | "
              f"{r['wall_s']:.0f} |", flush=True)
    for config in args.configs:
        for seed in args.seeds:
            show(run_one(config, seed, results, episodes=args.episodes), "teacher")
    for config in args.dagger:
        share = teacher_share(config)
        reached = {}
        for labels in args.labels:
            for mode, steps in (("teacher", round(labels / share)), ("dagger", labels)):
                if mode not in args.modes:
                    continue
                scores = []
                for seed in args.seeds:
                    r = run_one(config, seed, results, {"mode": mode, "max_steps": steps},
                                args.episodes)
                    show(r, mode)
                    scores.append(r["score"])
                if min(scores) >= 0.95:
                    reached.setdefault(mode, labels)
        for mode in args.modes:
            print(f"{config} {mode}: score >= 0.95 on every seed from "
                  + (f"{reached[mode]} labels" if mode in reached else
                     f"none of the budgets {args.labels}"), flush=True)


def teacher_share(config: str) -> float:
    """The config's ``teacher_agents`` (the share of agents its teacher drives)."""
    from tftrainers.settings import load_run_options
    path = os.path.join(HERE, "..", "configs", "bc", f"{config}.yaml")
    (_, settings), = load_run_options(path).behaviors.items()
    return float(settings.hyperparameters.teacher_agents)


if __name__ == "__main__":
    main()
