"""threaded: true with SAC: acting goes on with the previous weights while the gradient
steps run in a thread; the weights are published when they are done."""
import threading

import numpy as np

from tftrainers.envs import make
from tests.trainers.helpers import drive, make_trainer
from tests.trainers.sac.test_sac_imitation import sac_settings


def test_acting_goes_on_while_a_threaded_update_runs(tmp_path):
    env = make("builtin:Ball3D", seed=0, num_areas=1)  # 12 agents
    env.reset()
    trainer = make_trainer(tmp_path, env, "Ball3D", sac_settings("Ball3D", threaded=True),
                           jit_compile=False)
    gate, original, threads = threading.Event(), trainer.optimizer.update, set()

    def held(*args, **kwargs):  # the update cannot finish before the test says so
        threads.add(threading.current_thread().name)
        assert gate.wait(120)
        return original(*args, **kwargs)
    trainer.optimizer.update = held
    drive(env, trainer, 10)  # the first update starts once 16 transitions are stored
    version, stored, step = trainer.version, len(trainer.buffer), trainer.step
    assert trainer._update_thread.is_alive()
    drive(env, trainer, 10)  # acted and drained while it runs
    assert trainer.step > step and trainer.version == version
    assert len(trainer.buffer) == stored and trainer._pending  # they wait for the update
    gate.set()
    trainer.wait_for_update()
    assert threads == {"Ball3D-update"}  # the gradient steps ran in the update's thread
    assert trainer.version == version + 1  # the new weights went to the acting side
    assert set(trainer.last_update) >= {"Losses/Q1 Loss", "Losses/Policy Loss"}
    trainer.update_if_ready()  # what waited is learned from: every step due runs now
    trainer.wait_for_update()
    assert not trainer._pending and len(trainer.buffer) == trainer.step
    assert trainer.gradient_steps == int(trainer.step / 4)
    assert all(np.isfinite(v) for v in trainer.last_update.values())
    path = trainer.save()
    assert path is not None
    env.close()


def test_acting_waits_for_the_update_once_it_is_an_update_call_ahead(tmp_path):
    env = make("builtin:Ball3D", seed=0, num_areas=1)
    env.reset()
    settings = sac_settings("Ball3D", hyperparameters={"steps_per_update": 0.5}, threaded=True)
    trainer = make_trainer(tmp_path, env, "Ball3D", settings, jit_compile=False)
    assert trainer.steps_ahead() == 128  # 256 gradient steps' worth of agent steps
    gate, original = threading.Event(), trainer.optimizer.update

    def held(*args, **kwargs):
        assert gate.wait(120)
        return original(*args, **kwargs)
    trainer.optimizer.update = held
    drive(env, trainer, 9)  # the first update starts at 96 steps and is held
    version = trainer.version
    assert trainer._update_thread.is_alive()
    threading.Timer(1.0, gate.set).start()
    drive(env, trainer, 16)  # past 128 waiting steps the env loop waits for the update
    assert gate.is_set() and trainer.version > version
    assert sum(len(t) for t in trainer._pending) < 128
    trainer.wait_for_update()
    env.close()
