"""Environments given as Python objects: ``python:MODULE:NAME`` ids, env objects, factories.

    make("python:corridor:Corridor", seed=0, num_areas=4)   # corridor.py in the working dir
    env_from_target(my_gym_env, "my env")                    # what tftrainers.train(env=...) uses

What a target may be, and what becomes of it (``env_args`` are its keyword arguments):

- a ``BaseEnv`` subclass or instance (the env API itself): used as it is; a class is called
  with ``seed`` and ``num_areas`` when its constructor takes them; ``num_envs`` instances
  step one after another (``MultiEnv``);
- a ``gymnasium.Env`` subclass or instance: one agent per copy (the Gymnasium adapter), a
  class called once per copy; a ``SyncVectorEnv`` gives its sub-envs as the copies;
- a PettingZoo parallel env instance: its copies as the PettingZoo adapter's;
- any other callable (a factory): called with ``env_args``, once per copy or instance,
  returning one of the env objects above.

An env object is one instance: asking it for more copies (``num_areas``) or instances
(``num_envs``) is an error that says to pass a factory. Anything else is one line naming
what is missing (a method, a space) and what is allowed.
"""
from __future__ import annotations

import importlib
import inspect
import os
import sys
from typing import Any, Callable, List, Optional

from tftrainers.envs.base import BaseEnv

ALLOWED = ("a BaseEnv subclass or instance, a gymnasium.Env subclass or instance, a "
           "PettingZoo parallel env, or a zero-argument factory returning one of these")

_ENV_API = ("behavior_specs", "reset", "step", "get_steps", "set_actions", "close")
_GYM_API = ("observation_space", "action_space", "reset", "step")
_PARALLEL_API = ("possible_agents", "observation_space", "action_space", "reset", "step")


def import_target(env_id: str) -> Any:
    """The object ``python:MODULE:NAME`` names, the working directory on the import path.

    Raises:
        ValueError: a malformed id, a module that does not import, no such name.
    """
    rest = env_id[len("python:"):]
    module_name, sep, name = rest.partition(":")
    if not sep or not module_name or not name:
        raise ValueError(f"env id '{env_id}': give python:MODULE:NAME (e.g. "
                         f"python:my_env:MyEnv, my_env.py in the working directory)")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"{env_id}: cannot import module '{module_name}' ({error}); it is "
                         f"looked for in the working directory {cwd} and on sys.path") \
            from error
    target = module
    for part in name.split("."):
        if not hasattr(target, part):
            public = sorted(n for n in vars(module) if not n.startswith("_"))[:12]
            raise ValueError(f"{env_id}: module '{module_name}' has no '{name}' (it has "
                             f"{', '.join(public) or 'nothing public'})")
        target = getattr(target, part)
    return target


def _has(obj: Any, names) -> List[str]:
    """The names of ``names`` that ``obj`` lacks."""
    return [n for n in names if not hasattr(obj, n)]


def _kind(obj: Any) -> Optional[str]:
    """"env", "gym", "vector", "parallel" or "aec" for an env object, else None."""
    if isinstance(obj, BaseEnv) or not _has(obj, _ENV_API):
        return "env"
    gymnasium = sys.modules.get("gymnasium")
    if gymnasium is not None:
        if isinstance(obj, gymnasium.vector.VectorEnv):
            return "vector"
        if isinstance(obj, gymnasium.Env):
            return "gym"
    if not _has(obj, _PARALLEL_API) and callable(getattr(obj, "observation_space", None)):
        return "aec" if hasattr(obj, "agent_selection") else "parallel"
    if not _has(obj, _GYM_API):
        return "gym"
    return None


def _not_an_env(obj: Any, what: str) -> ValueError:
    """The one line for an object that is no env we can run: the API it comes closest to,
    and what it lacks."""
    best = min((("the env API (BaseEnv)", _has(obj, _ENV_API)),
                ("the Gymnasium API", _has(obj, _GYM_API)),
                ("PettingZoo's parallel API", _has(obj, _PARALLEL_API))),
               key=lambda item: len(item[1]))
    kind = type(obj).__name__
    return ValueError(f"{what}: a {kind} is not an environment: as {best[0]} it lacks "
                      f"{', '.join(best[1])}; allowed: {ALLOWED}")


def _takes(fn: Callable, name: str) -> bool:
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in parameters or any(p.kind is p.VAR_KEYWORD for p in parameters.values())


def _call(factory: Callable, what: str, kwargs: dict) -> Any:
    try:
        return factory(**kwargs)
    except TypeError as error:
        given = ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) or "no arguments"
        if not _accepts(factory, kwargs):
            raise ValueError(f"{what}: cannot be called with {given} ({error})") from error
        raise


def _accepts(fn: Callable, kwargs: dict) -> bool:
    try:
        inspect.signature(fn).bind(**kwargs)
        return True
    except TypeError:
        return False
    except ValueError:  # no signature to read: assume it takes them
        return True


def describe(target: Any) -> str:
    """A short name of an env target for messages and logs."""
    if isinstance(target, str):
        return target
    if inspect.isclass(target) or inspect.isfunction(target):
        return f"{target.__module__}.{target.__qualname__}"
    spec = getattr(target, "spec", None)  # a registered gymnasium env
    if getattr(spec, "id", None):
        return f"{type(target).__name__}({spec.id})"
    return type(target).__name__


def _behavior_name(obj: Any, fallback: str) -> str:
    spec = getattr(obj, "spec", None)
    name = getattr(spec, "id", None) or fallback
    return str(name).replace("/", "_")


def env_from_target(target: Any, what: str, seed: int = 0, num_areas: Optional[int] = None,
                    num_envs: int = 1, env_args: Optional[dict] = None,
                    name: Optional[str] = None) -> BaseEnv:
    """An env (the env API) from an env object, a class or a factory (module docstring).

    Args:
        what: how messages name the target (the env id, or "env").
        name: the behavior name of a Gymnasium env (default: its registered id, else the
            class name).

    Raises:
        ValueError: one line: not an env (naming what it lacks), spaces that do not map,
            an object asked for copies, a factory that does not take ``env_args``.
    """
    env_args = dict(env_args or {})
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    if isinstance(target, type) and issubclass(target, BaseEnv):
        return _from_env_class(target, what, seed, num_areas, num_envs, env_args)
    kind = None if isinstance(target, type) else _kind(target)
    if kind is not None:  # an object: one instance, as it is
        if env_args:
            raise ValueError(f"{what}: env args {sorted(env_args)} cannot be given to an env "
                             f"object (it is built already); pass a factory that takes them")
        copies = (1 if num_areas is None else num_areas) * num_envs
        if copies > 1 or (kind == "env" and num_areas not in (None, 1)):
            raise ValueError(f"{what}: an env object is one instance, and num_envs x "
                             f"num_areas asks for {copies}; pass a zero-argument factory "
                             f"instead (e.g. env=lambda: MyEnv()), called once per copy")
        return _wrap([target], kind, what, seed, name)
    if not callable(target):
        raise _not_an_env(target, what)
    gym_class = _is_gym_class(target)
    copies = (1 if num_areas is None else num_areas) * num_envs
    first = _call(target, what, env_args)
    kind = _kind(first)
    if kind is None:
        if hasattr(first, "close"):
            first.close()
        made = f"{what} returned" if not gym_class else f"{what} made"
        raise ValueError(str(_not_an_env(first, made)))
    if kind == "env":
        if num_areas not in (None, 1):
            first.close()
            raise ValueError(f"{what}: the env API env it returns has its own agents; "
                             f"num_areas {num_areas} cannot copy it (use num_envs for "
                             f"instances, or a BaseEnv subclass that takes num_areas)")
        instances = [first] + [_call(target, what, env_args) for _ in range(num_envs - 1)]
        return _multi(instances)
    objects = [first] + [_call(target, what, env_args) for _ in range(copies - 1)]
    return _wrap(objects, kind, what, seed, name or _behavior_name(first, type(first).__name__))


def _is_gym_class(target) -> bool:
    gymnasium = sys.modules.get("gymnasium")
    return (gymnasium is not None and isinstance(target, type)
            and issubclass(target, gymnasium.Env))


def _from_env_class(cls, what, seed, num_areas, num_envs, env_args) -> BaseEnv:
    kwargs = dict(env_args)
    if _takes(cls, "seed"):
        kwargs["seed"] = seed
    if num_areas is not None:
        if not _takes(cls, "num_areas"):
            raise ValueError(f"{what}: {cls.__name__}() takes no num_areas argument, so "
                             f"num_areas {num_areas} cannot be given to it")
        kwargs["num_areas"] = num_areas
    instances = []
    for k in range(num_envs):
        if "seed" in kwargs:
            kwargs["seed"] = seed + k
        instances.append(_call(cls, what, kwargs))
    return _multi(instances)


def _multi(instances: List[BaseEnv]) -> BaseEnv:
    if len(instances) == 1:
        return instances[0]
    from tftrainers.envs.multi_env import MultiEnv
    return MultiEnv(instances)


def _wrap(objects: List[Any], kind: str, what: str, seed: int, name: Optional[str]) -> BaseEnv:
    first = objects[0]
    if kind == "env":
        return first
    if kind == "aec":
        raise ValueError(f"{what}: a PettingZoo AEC env; only the parallel API is supported "
                         f"(pettingzoo.utils.conversions.aec_to_parallel converts it)")
    if kind == "vector":
        subs = getattr(first, "envs", None)
        if len(objects) > 1 or not isinstance(subs, (list, tuple)):
            raise ValueError(f"{what}: a gymnasium vector env whose sub-envs are not in this "
                             f"process ({type(first).__name__}); pass a factory of one env "
                             f"and num_areas copies instead")
        objects, first = list(subs), subs[0]
    if kind in ("gym", "vector"):
        from tftrainers.envs.gym_adapter import GymEnv
        return GymEnv(name or _behavior_name(first, type(first).__name__), seed=seed,
                      instances=objects, label=what)
    from tftrainers.envs.pettingzoo_adapter import PettingZooEnv
    return PettingZooEnv(name or type(first).__name__, seed=seed, instances=objects,
                         label=what)


def make_python(env_id: str, seed: int = 0, num_areas: Optional[int] = None,
                num_envs: int = 1, **env_args) -> BaseEnv:
    """The env of a ``python:MODULE:NAME`` id (see the module docstring)."""
    target = import_target(env_id)
    name = env_id.rpartition(":")[2].rpartition(".")[2]
    return env_from_target(target, env_id, seed=seed, num_areas=num_areas, num_envs=num_envs,
                           env_args=env_args, name=None if isinstance(target, type) and
                           issubclass(target, BaseEnv) else name)
