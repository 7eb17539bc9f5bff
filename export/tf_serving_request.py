"""Builds a TF Serving REST request body for a run's SavedModel and checks it locally.

    python export/tf_serving_request.py results/ball3d/Ball3D/saved_model/500000 \\
        --env builtin:Ball3D --rows 2 --out request.json

It reads the model's serving_default inputs, takes observations from the environment (or
from --obs, a JSON list of rows: {"obs_0": [...], ...}), fills action_masks (all allowed)
and recurrent_in (zeros) when the model has them, and writes the row-format body
{"signature_name": "serving_default", "instances": [...]}. Then it runs the same rows
through the SavedModel here and prints the response TF Serving returns for them
({"predictions": [...]}), so the request is known to be valid before any server runs.
"""
from __future__ import annotations

import argparse
import json
import sys

import numpy as np


def model_inputs(signature):
    """{input name: shape without the batch dimension} of a serving signature."""
    _, kwargs = signature.structured_input_signature
    return {name: tuple(spec.shape[1:]) for name, spec in kwargs.items()}


def rows_from_env(env_id, env_args, rows, inputs):
    from tftrainers.envs import make
    env = make(env_id, seed=0, num_areas=None, **env_args)
    env.reset()
    (name,) = list(env.behavior_specs)[:1]
    decision, _ = env.get_steps(name)
    if len(decision) < rows:
        sys.exit(f"{env_id} has {len(decision)} agents; ask for at most that many --rows")
    instances = []
    for r in range(rows):
        row = {}
        for i, obs in enumerate(decision.obs):
            value = obs[r]
            if value.ndim == 3:  # HWC in the env, CHW in the exported model
                value = value.transpose(2, 0, 1)
            row[f"obs_{i}"] = value
        instances.append(row)
    return instances


def complete(instances, inputs):
    """Adds action_masks (all allowed) and recurrent_in (zeros) where the model takes them."""
    for row in instances:
        for name, shape in inputs.items():
            if name not in row:
                if name == "action_masks":
                    row[name] = np.ones(shape, np.float32)
                elif name == "recurrent_in":
                    row[name] = np.zeros(shape, np.float32)
                else:
                    sys.exit(f"the model needs input {name} {list(shape)}; pass it in --obs")
            value = np.asarray(row[name], np.float32)
            if value.shape != shape:
                sys.exit(f"input {name}: the model takes {list(shape)} per row, "
                         f"got {list(value.shape)}")
            row[name] = value
    return instances


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("saved_model", help="a SavedModel version folder")
    parser.add_argument("--env", default=None, help="take observations from this env")
    parser.add_argument("--env-args", nargs="*", default=[], metavar="KEY=VALUE")
    parser.add_argument("--obs", default=None, help="JSON file: a list of rows of inputs")
    parser.add_argument("--rows", type=int, default=1, help="rows (instances) to send")
    parser.add_argument("--out", default=None, help="write the body here (default: stdout)")
    args = parser.parse_args()

    import tensorflow as tf
    from tftrainers.cli import parse_env_args
    signature = tf.saved_model.load(args.saved_model).signatures["serving_default"]
    inputs = model_inputs(signature)
    if args.obs:
        with open(args.obs) as f:
            instances = [{k: np.asarray(v, np.float32) for k, v in row.items()}
                         for row in json.load(f)]
    elif args.env:
        instances = rows_from_env(args.env, parse_env_args(args.env_args), args.rows, inputs)
    else:
        sys.exit("give --env ENV_ID or --obs FILE.json")
    instances = complete(instances, inputs)
    body = {"signature_name": "serving_default",
            "instances": [{k: v.tolist() for k, v in row.items()} for row in instances]}
    text = json.dumps(body)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        print(text)

    # What TF Serving computes for these rows: the batch through the same signature,
    # split back into one prediction per row.
    batch = {name: tf.constant(np.stack([row[name] for row in instances])) for name in inputs}
    outputs = {k: v.numpy() for k, v in signature(**batch).items()}
    for name, value in outputs.items():
        if value.shape[:1] != (len(instances),):
            sys.exit(f"output {name} has shape {list(value.shape)}: row format needs the "
                     f"batch dimension first")
    predictions = [{k: v[r].tolist() for k, v in outputs.items()} for r in range(len(instances))]
    print(json.dumps({"predictions": predictions}), file=sys.stderr)


if __name__ == "__main__":
    main()
