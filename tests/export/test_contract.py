"""Every name, shape, dtype and constant of docs/dev/architecture.md#export-contract, in the ONNX
file and the SavedModel."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

from tftrainers.export import MODEL_VERSION, SERVING_SIGNATURE, output_names
from tftrainers.export import signature as contract

from .helpers import CASES, build_policy, contract_feeds, random_inputs

PARITY_CASES = ["continuous", "discrete", "visual", "hybrid", "memory", "entities", "goal"]
BATCH = 5


def expected_inputs(policy):
    """{name: shape without the batch dimension} the contract asks for."""
    shapes = {}
    for i, o in enumerate(policy.spec.observation_specs):
        shapes[f"obs_{i}"] = (o.shape[2], o.shape[0], o.shape[1]) if len(o.shape) == 3 \
            else tuple(o.shape)
    branches = policy.spec.action_spec.discrete_branches
    if branches:
        shapes["action_masks"] = (sum(branches),)
    if policy.memory_size:
        shapes["recurrent_in"] = (1, policy.memory_size)
    return shapes


def expected_outputs(policy):
    """{name: (shape with None for the batch, dtype)}."""
    c = policy.spec.action_spec.continuous_size
    branches = policy.spec.action_spec.discrete_branches
    out = {"version_number": ((1,), np.float32), "memory_size": ((1,), np.float32)}
    if c:
        out.update({"continuous_actions": ((None, c), np.float32),
                    "continuous_action_output_shape": ((1,), np.float32),
                    "deterministic_continuous_actions": ((None, c), np.float32)})
    if branches:
        n = len(branches)
        out.update({"discrete_actions": ((None, n), np.int64),
                    "discrete_action_output_shape": ((n,), np.float32),
                    "deterministic_discrete_actions": ((None, n), np.int64)})
    if policy.memory_size:
        out["recurrent_out"] = ((None, 1, policy.memory_size), np.float32)
    return out


CONSTANT_OUTPUTS = ("version_number", "memory_size", "continuous_action_output_shape",
                    "discrete_action_output_shape")


def per_row(expected):
    """The SavedModel's shapes: constants repeated per row ([B, ...]) for TF Serving."""
    return {name: ((None, *shape) if name in CONSTANT_OUTPUTS else shape, dtype)
            for name, (shape, dtype) in expected.items()}


def check_values(policy, out, rows=False):
    """The constant outputs' values and every output's shape for a batch of BATCH
    (``rows``: the SavedModel's per-row constants, checked row by row)."""
    expected = per_row(expected_outputs(policy)) if rows else expected_outputs(policy)
    if rows:
        for name in CONSTANT_OUTPUTS:
            if name in out:
                assert out[name].shape[0] == BATCH and np.all(out[name] == out[name][:1]), name
        out = {name: value[0] if name in CONSTANT_OUTPUTS else value
               for name, value in out.items()}
        expected = expected_outputs(policy)
    assert set(out) == set(expected)
    for name, (shape, dtype) in expected.items():
        assert out[name].dtype == dtype, name
        assert out[name].shape == tuple(BATCH if d is None else d for d in shape), name
    assert out["version_number"].tolist() == [MODEL_VERSION] == [3]
    assert out["memory_size"].tolist() == [policy.memory_size]
    action_spec = policy.spec.action_spec
    if action_spec.continuous_size:
        assert out["continuous_action_output_shape"].tolist() == [action_spec.continuous_size]
    if action_spec.discrete_branches:
        assert out["discrete_action_output_shape"].tolist() == \
            list(action_spec.discrete_branches)


@pytest.mark.parametrize("case", PARITY_CASES)
def test_onnx_inputs_outputs_and_constants(exported, case, rng):
    e = exported(case)
    model = onnx.load(e.onnx_path)
    onnx.checker.check_model(model, full_check=True)

    inputs = {i.name: i for i in model.graph.input}
    assert list(inputs) == list(expected_inputs(e.policy))  # exact names, contract order
    for name, shape in expected_inputs(e.policy).items():
        tensor_type = inputs[name].type.tensor_type
        assert tensor_type.elem_type == onnx.TensorProto.FLOAT, name
        dims = tensor_type.shape.dim
        assert dims[0].dim_param == "batch" and not dims[0].HasField("dim_value"), name
        assert tuple(d.dim_value for d in dims[1:]) == shape, name

    # Exact names in ML-Agents' order; each one a node's output, constants included.
    assert [o.name for o in model.graph.output] == output_names(e.policy.spec,
                                                                e.policy.memory_size)
    produced = {name for node in model.graph.node for name in node.output}
    assert all(o.name in produced for o in model.graph.output)
    assert not {o.name for o in model.graph.output} & {i.name for i in model.graph.initializer}

    obs, masks, memory = random_inputs(e.policy, BATCH, rng)
    check_values(e.policy, e.run_onnx(contract_feeds(e.policy.spec, obs, masks, memory)))


@pytest.mark.parametrize("case", PARITY_CASES)
def test_savedmodel_signature_and_constants(exported, case, rng):
    e = exported(case)
    serving = e.loaded.signatures[SERVING_SIGNATURE]
    _, inputs = serving.structured_input_signature
    assert {name: tuple(s.shape) for name, s in inputs.items()} == \
        {name: (None, *shape) for name, shape in expected_inputs(e.policy).items()}
    assert all(s.dtype.name == "float32" for s in inputs.values())
    outputs = serving.structured_outputs
    assert {name: (tuple(s.shape), s.dtype.as_numpy_dtype) for name, s in outputs.items()} == \
        per_row(expected_outputs(e.policy))

    obs, masks, memory = random_inputs(e.policy, BATCH, rng)
    check_values(e.policy, e.run_savedmodel(contract_feeds(e.policy.spec, obs, masks, memory)),
                 rows=True)


def test_cases_cover_the_contracts_variants():
    specs = {name: CASES[name].spec() for name in PARITY_CASES}
    assert specs["continuous"].action_spec.discrete_branches == ()
    assert specs["discrete"].action_spec.continuous_size == 0
    assert specs["visual"].observation_specs[0].kind.value == "visual"
    assert specs["hybrid"].action_spec.continuous_size and \
        len(specs["hybrid"].action_spec.discrete_branches) == 2
    assert CASES["memory"].network.memory is not None
    # a variable-length input keeps its [max_entities, entity_size] after the batch
    assert specs["entities"].observation_specs[1].kind.value == "variable_length"
    assert expected_inputs(build_policy(CASES["entities"]))["obs_1"] == (4, 5)
    assert specs["goal"].observation_specs[1].observation_type.value == "goal_signal"
    assert contract.MODEL_VERSION == 3
