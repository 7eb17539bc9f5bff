"""Self-play (ML-Agents' GhostTrainer): ``teams`` reads the teams of a run's behaviors
(no TensorFlow), ``league`` keeps snapshots and ratings, ``trainer`` wraps a PPO or POCA
trainer. See docs/trainers/self-play.md."""
