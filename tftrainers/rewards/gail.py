"""GAIL: generative adversarial imitation learning (Ho & Ermon 2016), as ML-Agents uses it.

A discriminator D learns to tell the demonstrations' steps (expert) from the policy's; the
policy is paid for steps D mistakes for the expert's:

    D(s [, s'] [, a, done] [, absorbing]) = sigmoid(linear_0.2(body(...)))  in (0, 1), 1 = expert
    loss   = -mean(log(D(expert) + eps) + log(1 - D(policy) + eps))               eps 1e-7
             + 10 * mean((sqrt(||grad_x D(x)||^2 + eps) - 1)^2)       x = interpolations
             [+ beta * (KL - 0.5)                                                  VAIL]
    reward = -log(1 - D(s [, s'] [, a, done]) * (1 - eps))              (the trainer * strength)
             absorbing states: that - r_abs; of a D of states alone log D - log(1 - D) - r_abs

``use_actions`` adds the action (continuous in the env's [-1, 1] scale, as the
demonstrations hold it: the trainer's raw samples through ``env_actions``, PPO's
``clip(x, -3, 3) / 3`` or SAC's ``tanh``; discrete one-hot per branch) and the step's done
flag to the observation, as a vector input of the body.
``use_next_obs`` (a tftrainers extension) adds the observations that followed the step, as
GAIfO (Torabi et al. 2018) judges state transitions: D can then tell where a step led (an
episode that ends in a pit from one that ends at the goal) from the outcome itself, not only
from the observation, action and done flag before it.

``absorbing_state`` (on by default; a tftrainers extension, Kostrikov et al. 2019, "DAC"):
a real episode end (terminal, not a step limit) leads to an absorbing state that loops on
itself forever. D gets one more input, a flag that is 1 for it (its observations, next
observations, actions and done flag are all zero; discrete actions one-hot to zeros). Each
real end of the demonstrations adds one absorbing step to the expert set, and each real end
of a policy minibatch one (weighted) absorbing step to the policy's side of the loss, so D
learns how often each ends. After a real end the stream earns the absorbing state's reward
``r_abs`` (its ``-log(1 - D)``) for ever: a value of ``r_abs / (1 - gamma)``. Every episode of
this MDP being infinite, the same constant can be taken off every step, which changes no
policy's ranking: the stream pays ``-log(1 - D) - r_abs`` a step (times ``strength``) and is
worth 0 after a real end, so the critic never has to learn values of ``r / (1 - gamma)``
(69 at D = 0.5, gamma 0.99). Ending sooner or later than the
demonstrations is then judged by D, where a stream that stops at ends (ML-Agents,
``absorbing_state: false``) pays the always-positive reward for every step survived.
A D of states alone (no ``use_actions``, no ``use_next_obs``) differs in three ways. It
also judges the state a real end leaves the episode in (the goal, the pit: the end's next
observation), one the episode visits before the absorbing state, with no action taken in
it: each real end adds it as one more row to either side of D's batches (the
demonstrations' next observation at the end; the policy's, weighted by its real ends), and
the end's step earns
``gamma (logit D(s_T) - r_abs)`` on top: that state's reward a step later, then the
absorbing state's for ever. DAC puts the absorbing state in that state's place, so such a D
never saw where an episode ended, only the step before; and against a random start policy
even the best D then pays Basic's 3 steps to the near goal more than the 7 to the far one
(``benchmarks/gail_optimal_d.py``). Its reward (and ``r_abs``) is DAC's, the logit
``log D - log(1 - D)``: ML-Agents' ``-log(1 - D)`` is never below 0, so a state D is sure
is the policy's costs little more than an undecided one, where the logit makes it cost as
much as an expert's state pays. And its linear layer starts at zero (D = 0.5 on every
input, so the first rewards are all 0): from ML-Agents' random start the untrained D's
opinion of the absorbing state against the steps was the policy's first lesson, a gap of
0.01 made full-size by the normalisation of advantages. With actions (the end's step and
its done flag) or next observations (the end's own row) D sees the end already; there the
three were not needed (Basic with actions: 0.930 on 5 of 5 seeds without them) and the
zero start and the logit measured worse (Basic's seed 3, GridWorld with ML-Agents' inputs),
so they apply to a D of states alone only.
Step-limit ends (interrupted) bootstrap from the critic, as before. ``bootstrap_ends``
(with ``absorbing_state: false``) keeps tftrainers' rule from before absorbing states: every
end bootstraps from the critic's value of the final observation, as curiosity's stream
(``configs/imitation/GridWorldGAIL.yaml`` was tuned and measured with it).

The gradient penalty (Gulrajani et al. 2017) is taken at random points between a policy
and an expert step (one mixing weight per step, the penalty on the gradient over every
input together). ML-Agents draws a weight per input element and penalises the gradient of
the first observation only; one weight per step is the paper's form.

VAIL (Peng et al. 2018, ``use_vail``): the body's output goes through a stochastic
bottleneck z ~ N(mu(h), sigma^2) (z of 128, sigma learned, noise only while training the
discriminator), its KL to N(0, 1) is held near 0.5 by a dual variable
``beta <- max(0, beta + 0.0005 (KL - 0.5))`` updated after each step.

The discriminator takes one Adam step per PPO minibatch (SAC: per
``reward_signal_steps_per_update`` agent steps, on the sampled minibatch) inside the
trainer's compiled update, against as many expert steps drawn at random (with replacement) from the
demonstrations. Its normalizer, when ``network_settings.normalize`` is set, holds the
demonstrations' statistics (ML-Agents feeds it expert batches).
"""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Sequence, Tuple

import keras
import numpy as np
import tensorflow as tf

from tftrainers.envs import BehaviorSpec
from tftrainers.envs.base import ObservationSpec
from tftrainers.networks import NetworkBody
from tftrainers.networks.layers import kaiming_normal
from tftrainers.processing.demonstrations import load_demonstrations
from tftrainers.rewards.base import RewardBatch, RewardProvider, masked_mean, reward_signature
from tftrainers.rewards.curiosity import onehot_branches
from tftrainers.settings import GAILSettings
from tftrainers.tf_utils.adam import FusedAdam
from tftrainers.tf_utils.compiled import CompiledFunction
from tftrainers.tf_utils.draws import Draws

EPSILON = 1e-7
GRADIENT_PENALTY_WEIGHT = 10.0
Z_SIZE = 128  # VAIL bottleneck
VAIL_ALPHA = 0.0005  # step of the dual update of beta
VAIL_INFORMATION = 0.5  # KL target (the information bottleneck's constraint)
ESTIMATOR_GAIN = 0.2
Z_MU_GAIN = 0.1


def discriminator_loss(expert_estimate: tf.Tensor, policy_estimate: tf.Tensor,
                       policy_mask: tf.Tensor) -> tf.Tensor:
    """-mean(log(D(expert) + eps)) - mean(log(1 - D(policy) + eps)): [B] x2 -> scalar.

    ``policy_mask`` [B] leaves out padded policy steps (expert steps are all real)."""
    return -(tf.reduce_mean(tf.math.log(expert_estimate + EPSILON)) +
             masked_mean(tf.math.log(1.0 - policy_estimate + EPSILON), policy_mask))


def gradient_penalty(gradients: Sequence[tf.Tensor]) -> tf.Tensor:
    """mean_b (sqrt(||g_b||^2 + eps) - 1)^2 over every input's gradient [B, ...] together
    (the square root with eps keeps the penalty's own gradient finite at g = 0)."""
    squared = tf.add_n([tf.reduce_sum(tf.reshape(tf.square(g), [tf.shape(g)[0], -1]), axis=1)
                        for g in gradients])
    return tf.reduce_mean(tf.square(tf.sqrt(squared + EPSILON) - 1.0))


def vail_kl(z_sigma: tf.Tensor, expert_mu: tf.Tensor, policy_mu: tf.Tensor) -> tf.Tensor:
    """ML-Agents' VAIL KL term: mean_b -sum_z(1 + log sigma^2 - mu_e^2 / 2 - mu_p^2 / 2
    - sigma^2), the KL of N(mu, sigma^2) to N(0, 1) for the expert and policy halves."""
    variance = tf.square(z_sigma)
    return tf.reduce_mean(-tf.reduce_sum(
        1.0 + tf.math.log(variance) - 0.5 * tf.square(expert_mu) - 0.5 * tf.square(policy_mu)
        - variance, axis=1))


def gail_reward(estimate: np.ndarray) -> np.ndarray:
    """-log(1 - D (1 - eps)): 0 where D says "policy", large where it says "expert"."""
    estimate = np.asarray(estimate, np.float64)
    return (-np.log(1.0 - estimate * (1.0 - EPSILON))).astype(np.float32)


def dac_reward(estimate: np.ndarray) -> np.ndarray:
    """log(D (1 - eps) + eps) - log(1 - D (1 - eps)) (DAC's form, the logit of D): as
    negative where D says "policy" as positive where it says "expert"."""
    estimate = np.asarray(estimate, np.float64) * (1.0 - EPSILON)
    return (np.log(estimate + EPSILON) - np.log(1.0 - estimate)).astype(np.float32)


class DiscriminatorNetwork(keras.Model):
    """The discriminator: NetworkBody (+ VAIL bottleneck) -> linear -> sigmoid.

    Args:
        spec: the behavior's spec (observations; actions when ``settings.use_actions``).
        settings: the ``gail`` reward signal's settings.
    """

    def __init__(self, spec: BehaviorSpec, settings: GAILSettings, **kwargs):
        super().__init__(**kwargs)
        ns = settings.network_settings
        self.use_actions = bool(settings.use_actions)
        self.use_vail = bool(settings.use_vail)
        self.use_next_obs = bool(settings.use_next_obs)
        self.absorbing = bool(settings.absorbing_state)
        # A D of states alone with absorbing states (module doc): terminal rows, DAC's
        # reward and a zero start.
        self.states_alone = (self.absorbing and not self.use_actions
                             and not self.use_next_obs)
        self.observation_specs = tuple(spec.observation_specs)
        action_spec = spec.action_spec
        self.continuous_size = int(action_spec.continuous_size)
        self.branches = tuple(int(b) for b in action_spec.discrete_branches)
        inputs = list(spec.observation_specs)
        if self.use_next_obs:  # each observation again, its own encoder
            inputs += [ObservationSpec(o.shape, f"next_{o.name}", o.kind, o.observation_type)
                       for o in spec.observation_specs]
        if self.use_actions:
            # Actions and the done flag enter the body as one more vector input.
            width = action_spec.continuous_size + sum(self.branches) + 1
            inputs.append(ObservationSpec((width,), "actions_and_done"))
        if self.absorbing:  # 1 = the absorbing state after a real end
            inputs.append(ObservationSpec((1,), "absorbing"))
        # No memory: the discriminator judges single steps (ML-Agents drops it too).
        self.body = NetworkBody(inputs, ns.hidden_units, ns.num_layers, ns.normalize,
                                ns.vis_encode_type, memory_size=0, name="body",
                                goal_conditioning=ns.goal_conditioning_type,
                                encoder=ns.encoder)
        size = self.body.encoding_size
        if self.use_vail:
            self.z_mu = keras.layers.Dense(Z_SIZE, kernel_initializer=kaiming_normal(Z_MU_GAIN),
                                           name="z_mu")
            self.z_mu.build((None, size))
            self.z_sigma = self.add_weight(shape=(Z_SIZE,), initializer="ones", trainable=True,
                                           name="z_sigma")
            self.beta = self.add_weight(shape=(), initializer="zeros", trainable=False,
                                        name="vail_beta")
            size = Z_SIZE
        # A D of states alone starts at 0.5 on every input (a zero estimator): its random
        # first opinion of the absorbing state against the steps would otherwise be the
        # first lesson (module doc). ML-Agents' gain-0.2 start otherwise.
        kernel = (keras.initializers.Zeros() if self.states_alone else
                  keras.initializers.VarianceScaling(ESTIMATOR_GAIN ** 2, mode="fan_avg",
                                                     distribution="uniform"))
        self.estimator = keras.layers.Dense(1, kernel_initializer=kernel, name="estimator")
        self.estimator.build((None, size))
        self.built = True

    def inputs_of(self, obs: Sequence[tf.Tensor], continuous: tf.Tensor, discrete: tf.Tensor,
                  done: tf.Tensor, next_obs: Sequence[tf.Tensor] = (),
                  absorbing: tf.Tensor = None) -> List[tf.Tensor]:
        """The body's inputs: the observations, (with ``use_next_obs``) the next
        observations, (with ``use_actions``) [B, actions + 1] of env-scale continuous
        actions, one-hot discrete branches and the done flag, then (with
        ``absorbing_state``) [B, 1], 1 for the absorbing state (``absorbing``; None: 0)."""
        inputs = list(obs)
        if self.use_next_obs:
            inputs += list(next_obs)
        if self.use_actions:
            inputs.append(tf.concat([tf.cast(continuous, tf.float32),
                                     onehot_branches(discrete, self.branches),
                                     tf.cast(done, tf.float32)[:, None]], axis=1))
        if self.absorbing:
            flag = (tf.zeros([tf.shape(done)[0]]) if absorbing is None
                    else tf.cast(absorbing, tf.float32))
            inputs.append(flag[:, None])
        return inputs

    def absorbing_inputs(self, size: int) -> List[tf.Tensor]:
        """The body's inputs of ``size`` absorbing steps (zeros but the flag)."""
        obs = [tf.zeros([size, *o.shape]) for o in self.observation_specs]
        return self.inputs_of(obs, tf.zeros([size, self.continuous_size]),
                              -tf.ones([size, len(self.branches)], tf.int32),
                              tf.zeros([size]), obs, tf.ones([size]))

    def estimate(self, inputs: Sequence[tf.Tensor], noise: tf.Tensor = None
                 ) -> Tuple[tf.Tensor, tf.Tensor]:
        """D of a batch ([B]) and the VAIL mean mu ([B, Z_SIZE], or None without VAIL).

        Args:
            inputs: ``inputs_of``'s list.
            noise: [B, Z_SIZE] standard normal draws for the VAIL bottleneck (None: its
                mean, as when scoring).
        """
        hidden = self.body(list(inputs))[0]
        mu = None
        if self.use_vail:
            mu = self.z_mu(hidden)
            hidden = mu if noise is None else mu + noise * self.z_sigma
        return tf.sigmoid(self.estimator(hidden))[:, 0], mu


class ExpertSteps(NamedTuple):
    """The steps D learns as the expert's, [N (+ real ends)] each."""

    obs: List[np.ndarray]  # per observation spec [N, *shape] float32
    next_obs: List[np.ndarray]  # the same (empty without use_next_obs)
    continuous: np.ndarray  # [N, c] float32, env scale
    discrete: np.ndarray  # [N, b] int32 (-1: an absorbing step, one-hot to zeros)
    done: np.ndarray  # [N] float32, 1 = the episode really ended after the step
    absorbing: np.ndarray  # [N] float32, 1 = an absorbing step


def expert_steps(demos, next_obs: bool, absorbing: bool, terminal: bool = False
                 ) -> ExpertSteps:
    """The demonstrations' steps, then with ``terminal`` one row of the observation each
    real end (done and not interrupted) left the episode in (its next observation, no
    action, done 0), then with ``absorbing`` one absorbing step (zeros, flag 1) per real
    end."""
    real_end = (np.asarray(demos.done, bool) & ~np.asarray(demos.interrupted, bool))
    parts = ExpertSteps(list(demos.obs), list(demos.next_obs) if next_obs else [],
                        np.asarray(demos.continuous_actions, np.float32),
                        np.asarray(demos.discrete_actions, np.int32),
                        real_end.astype(np.float32), np.zeros(len(real_end), np.float32))
    ends = int(real_end.sum())

    def extend(x, fill=0):
        return np.concatenate([x, np.full((ends, *x.shape[1:]), fill, x.dtype)])
    if terminal:  # a terminal row's next observation is itself
        finals = [np.asarray(o)[real_end] for o in demos.next_obs]
        parts = ExpertSteps([np.concatenate([o, f]) for o, f in zip(parts.obs, finals)],
                            [np.concatenate([o, f]) for o, f in zip(parts.next_obs, finals)],
                            extend(parts.continuous), extend(parts.discrete, -1),
                            extend(parts.done), extend(parts.absorbing))
    if not absorbing:
        return parts
    return ExpertSteps([extend(o) for o in parts.obs], [extend(o) for o in parts.next_obs],
                       extend(parts.continuous), extend(parts.discrete, -1),
                       extend(parts.done), extend(parts.absorbing, 1))


class GAILRewardProvider(RewardProvider):
    """GAIL reward stream; its discriminator's Adam steps once per policy minibatch.

    The demonstrations (``settings.demo_path``) are read when the provider is built and
    must fit ``spec`` (a one-line ``DemonstrationError`` naming the file otherwise).
    """

    stat_name = "GAIL"
    # The stream stops at real ends (0 after them), as ML-Agents' does. Without
    # ``absorbing_state`` the always-positive reward then pays for long episodes (survival
    # bias); with it, rewards are measured from the absorbing state's, whose value is then
    # 0 (module doc; docs/dev/architecture.md#algorithm-facts). ``bootstrap_ends`` sets it
    # per provider.
    ignore_done = False

    def __init__(self, name: str, spec: BehaviorSpec, settings: GAILSettings, seed: int = 0,
                 env_actions=None):
        super().__init__(name, spec, settings, seed, env_actions)
        self.absorbing = bool(settings.absorbing_state)
        # A D of states alone also judges the state each real end leaves the episode in
        # and is paid DAC's reward (module doc); it reads the trainer's next_obs.
        self.terminal_states = (self.absorbing and not settings.use_actions
                                and not settings.use_next_obs)
        if settings.bootstrap_ends:  # the rule before absorbing states (settings exclude both)
            self.ignore_done = True
        self.needs_next_obs = bool(settings.use_next_obs) or self.terminal_states
        self.demos = load_demonstrations(settings.demo_path, spec)
        if not len(self.demos):
            raise ValueError(f"{settings.demo_path}: no demonstration steps to imitate")
        self.network = DiscriminatorNetwork(spec, settings, name=f"{name}_discriminator")
        self.update_stat_names = ("Losses/GAIL Loss", "Policy/GAIL Policy Estimate",
                                  "Policy/GAIL Expert Estimate", "Policy/GAIL Grad Mag Loss",
                                  *(("Policy/GAIL Beta", "Losses/GAIL KL Loss")
                                    if settings.use_vail else ()))
        self.optimizer = FusedAdam(self.network.trainable_variables, settings.learning_rate,
                                   epsilon=1e-8, name=f"{name}_adam")
        self._draws = Draws(seed, name=f"{name}_draws")
        expert = expert_steps(self.demos, self.network.use_next_obs, self.absorbing,
                              self.terminal_states)
        # The expert steps stay in variables the compiled update reads (not graph constants).
        self._expert = tuple(tf.Variable(x, trainable=False) for x in (
            *expert.obs, *expert.next_obs, expert.continuous, expert.discrete, expert.done,
            expert.absorbing))
        self._n_obs = len(expert.obs)
        if settings.network_settings.normalize:
            self.network.body.update_normalization(self.network.inputs_of(
                expert.obs, expert.continuous, expert.discrete, expert.done,
                expert.next_obs, expert.absorbing))
        self._estimate_fn = CompiledFunction(self._estimate, [reward_signature(spec)],
                                             jit_compile=False)
        self._absorbing_fn = CompiledFunction(self._absorbing_estimate, [], jit_compile=False)

    # --- graph ---------------------------------------------------------------------------
    def _policy_inputs(self, batch: RewardBatch) -> List[tf.Tensor]:
        continuous = self.env_actions(batch.continuous_action)  # the demos' scale
        return self.network.inputs_of(batch.obs, continuous, batch.discrete_action,
                                      batch.done, batch.next_obs)

    def _terminal_inputs(self, batch: RewardBatch) -> List[tf.Tensor]:
        """The body's inputs of the states ``batch``'s steps led to, as terminal rows (no
        action, done 0)."""
        size = tf.shape(batch.done)[0]
        return self.network.inputs_of(
            batch.next_obs, tf.zeros([size, self.network.continuous_size]),
            -tf.ones([size, len(self.network.branches)], tf.int32), tf.zeros([size]),
            batch.next_obs)

    def _estimate(self, batch: RewardBatch) -> tf.Tensor:
        steps = self.network.estimate(self._policy_inputs(batch))[0]
        if not self.terminal_states:
            return steps
        return tf.stack([steps, self.network.estimate(self._terminal_inputs(batch))[0]])

    def _absorbing_estimate(self) -> tf.Tensor:
        return self.network.estimate(self.network.absorbing_inputs(1))[0][0]

    def policy_batch(self, batch: RewardBatch) -> Tuple[List[tf.Tensor], tf.Tensor]:
        """The policy's side of D's loss: the body's inputs of ``batch``'s steps and, with
        ``absorbing_state``, one absorbing step after them, and each row's weight [B (+1)]:
        ``batch.mask`` for the steps, the number of real ends (``done``) for the absorbing
        step (it stands for one absorbing step per end)."""
        inputs, weights = self._policy_inputs(batch), tf.cast(batch.mask, tf.float32)
        if not self.absorbing:
            return inputs, weights
        ends = tf.reduce_sum(tf.cast(batch.done, tf.float32) * weights)
        if self.terminal_states:  # the state each real end left, one row per step
            inputs = [tf.concat([x, t], axis=0)
                      for x, t in zip(inputs, self._terminal_inputs(batch))]
            weights = tf.concat([weights, tf.cast(batch.done, tf.float32) * weights], axis=0)
        inputs = [tf.concat([x, a], axis=0)
                  for x, a in zip(inputs, self.network.absorbing_inputs(1))]
        return inputs, tf.concat([weights, ends[None]], axis=0)

    def expert_batch(self, size: tf.Tensor) -> List[tf.Tensor]:
        """``size`` expert steps drawn with replacement (absorbing ones among them), as the
        body's inputs."""
        rows = self._draws.uniform([size], maxval=tf.shape(self._expert[-1])[0],
                                   dtype=tf.int32)
        parts = [tf.gather(x, rows) for x in self._expert]
        obs, next_obs = parts[:self._n_obs], parts[self._n_obs:-4]
        return self.network.inputs_of(obs, *parts[-4:-1], next_obs=next_obs,
                                      absorbing=parts[-1])

    def losses(self, policy: Sequence[tf.Tensor], expert: Sequence[tf.Tensor],
               mask: tf.Tensor) -> Dict[str, tf.Tensor]:
        """The discriminator's loss terms on a policy and an expert batch (body inputs)."""
        network = self.network
        size = tf.shape(mask)[0]

        def noise():
            return self._draws.normal([size, Z_SIZE]) if network.use_vail else None
        policy_estimate, policy_mu = network.estimate(policy, noise())
        expert_estimate, expert_mu = network.estimate(expert, noise())
        out = {"loss": discriminator_loss(expert_estimate, policy_estimate, mask),
               "policy_estimate": masked_mean(policy_estimate, mask),
               "expert_estimate": tf.reduce_mean(expert_estimate)}
        if network.use_vail:
            out["kl"] = vail_kl(network.z_sigma, expert_mu, policy_mu)
        # Gradient penalty at random points between the two batches (one weight per step).
        weight = self._draws.uniform([size])
        mixed = []
        for p, e in zip(policy, expert):
            w = tf.reshape(weight, [-1] + [1] * (len(p.shape) - 1))
            mixed.append(w * p + (1.0 - w) * e)
        with tf.GradientTape() as tape:
            tape.watch(mixed)
            estimate, _ = network.estimate(mixed, noise())
            total = tf.reduce_sum(estimate)
        out["gradient_penalty"] = GRADIENT_PENALTY_WEIGHT * gradient_penalty(
            tape.gradient(total, mixed))
        return out

    def update_step(self, batch: RewardBatch) -> Dict[str, tf.Tensor]:
        network = self.network
        variables = network.trainable_variables
        policy, weights = self.policy_batch(batch)
        expert = self.expert_batch(tf.shape(weights)[0])
        with tf.GradientTape() as tape:
            terms = self.losses(policy, expert, weights)
            loss = terms["loss"] + terms["gradient_penalty"]
            if network.use_vail:
                loss += network.beta * (terms["kl"] - VAIL_INFORMATION)
        self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        stats = {"Losses/GAIL Loss": terms["loss"],
                 "Policy/GAIL Policy Estimate": terms["policy_estimate"],
                 "Policy/GAIL Expert Estimate": terms["expert_estimate"],
                 "Policy/GAIL Grad Mag Loss": terms["gradient_penalty"]}
        if network.use_vail:
            network.beta.assign(tf.maximum(
                network.beta + VAIL_ALPHA * (terms["kl"] - VAIL_INFORMATION), 0.0))
            stats["Policy/GAIL Beta"] = tf.convert_to_tensor(network.beta)
            stats["Losses/GAIL KL Loss"] = terms["kl"]
        return stats

    # --- Python side ---------------------------------------------------------------------
    def evaluate(self, batch: RewardBatch) -> np.ndarray:
        estimate = self._estimate_fn(batch).numpy()
        if not self.absorbing:
            return gail_reward(estimate)
        # Measured from the absorbing state's reward (module doc).
        absorbing = self.absorbing_reward()
        if not self.terminal_states:
            return gail_reward(estimate) - absorbing
        # A real end's step also earns, a step later, the state it left the episode in.
        step, final = dac_reward(estimate[0]) - absorbing, dac_reward(estimate[1]) - absorbing
        done = np.asarray(batch.done, np.float32)
        return (step + self.gamma * done * final).astype(np.float32)

    def absorbing_reward(self) -> float:
        """The reward of each step in the absorbing state: its log D - log(1 - D) for a D of
        states alone, -log(1 - D) otherwise."""
        reward = dac_reward if self.terminal_states else gail_reward
        return float(reward(self._absorbing_fn().numpy()))

    def trackables(self) -> Dict[str, object]:
        return {f"{self.name}_network": self.network, f"{self.name}_optimizer": self.optimizer,
                f"{self.name}_draws": self._draws}


__all__ = ["DiscriminatorNetwork", "ExpertSteps", "GAILRewardProvider", "discriminator_loss",
           "dac_reward", "expert_steps", "gail_reward", "gradient_penalty", "vail_kl"]
