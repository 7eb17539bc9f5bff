"""CPU and wall time per SAC gradient step, graph mode against XLA (one compiled call of
64 steps, after a first call that traces and compiles).

    python benchmarks/sac_update_step.py OBS_SIZE ACTIONS HIDDEN BATCH graph|xla [MEMORY SEQ]
    python benchmarks/sac_update_step.py 8 2 64 64 xla      # Ball3D's sizes (3DBall SAC)
    python benchmarks/sac_update_step.py 1 1 16 64 xla 16 8  # with memory (LSTM sequences)
"""
import sys
import tempfile
import time

import numpy as np
from tftrainers.envs.base import ActionSpec, BehaviorSpec, ObservationSpec
from tftrainers.settings import RunOptions
from tftrainers.trainers.registry import create_trainer
from tftrainers.trainers.sac.optimizer import SACBatch, SACOptimizer

obs, act, hidden, batch = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
jit = sys.argv[5] == "xla"
memory, seq = (int(sys.argv[6]), int(sys.argv[7])) if len(sys.argv) > 7 else (0, 1)
network = {"hidden_units": hidden, "num_layers": 2}
if memory:
    network["memory"] = {"memory_size": memory, "sequence_length": seq}
spec = BehaviorSpec([ObservationSpec((obs,), "v")], ActionSpec(act, ()))
s = RunOptions.from_dict({"behaviors": {"B": {"trainer_type": "sac", "hyperparameters": {"batch_size": batch},
    "network_settings": network}}}).settings_for("B")
t = create_trainer("B", spec, s, tempfile.mkdtemp(), seed=0)
opt = SACOptimizer(t.policy, s, jit_compile=jit)
k = 64
rng = np.random.default_rng(0)
b = SACBatch(obs=(rng.normal(size=(k, batch, obs)).astype(np.float32),), next_obs=(rng.normal(size=(k, batch, obs)).astype(np.float32),),
             continuous=rng.normal(size=(k, batch, act)).astype(np.float32), discrete=np.zeros((k, batch, 0), np.int32),
             action_mask=np.zeros((k, batch, 0), np.float32), rewards=rng.normal(size=(k, batch, 1)).astype(np.float32),
             done=np.zeros((k, batch), np.float32), reward_update=np.zeros(k, np.float32),
             mask=np.ones((k, batch), np.float32),
             memory=np.zeros((k, batch // seq, memory), np.float32),
             critic_memory=np.zeros((k, batch // seq, memory), np.float32))
c0, w0 = time.process_time(), time.time()
opt.update(b, 3e-4, steps=k)
c1, w1 = time.process_time(), time.time()
for _ in range(3):
    opt.update(b, 3e-4, steps=k)
c2, w2 = time.process_time(), time.time()
print(f"obs{obs} act{act} h{hidden} b{batch} m{memory} L{seq} {'xla' if jit else 'graph'}: first call cpu {c1-c0:.1f}s wall {w1-w0:.1f}s; "
      f"per gradient step cpu {(c2-c1)/(3*k)*1000:.2f} ms wall {(w2-w1)/(3*k)*1000:.2f} ms")
