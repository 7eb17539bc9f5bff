"""Side channels: messages beside the steps, in both directions, as ML-Agents' Unity package
speaks them (docs/guides/side-channels.md).

    stats = StatsSideChannel()
    params = EnvironmentParametersChannel()
    env = UnityEnv("Builds/Game", side_channels=[stats, params])
    params.set_float_parameter("gravity", 9.81)      # sent with the next reset() or step()
    env.step()
    stats.get_and_reset_stats()                      # {"Game/Score": [(3.0, AVERAGE)], ...}

The ``side_channel`` bytes of every input and output are a concatenation of messages
``[16-byte channel id (uuid.bytes_le, what C#'s Guid.ToByteArray() gives)][int32 length]
[payload]``. Payloads are built from little-endian primitives: int32, float32, bool (one
byte), string (int32 byte length + ASCII), float list (int32 count + float32s). Reading past
the end of a payload gives the type's default, as the Unity side does.

A user's own channel subclasses ``SideChannel`` with the UUID its C# twin registers and
implements ``on_message_received``; ``queue_message_to_send`` queues a message for the next
input the trainer sends.
"""
from __future__ import annotations

import abc
import enum
import struct
import uuid
from typing import Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Tuple

_INT32 = struct.Struct("<i")
_FLOAT32 = struct.Struct("<f")


class OutgoingMessage:
    """A payload being written (little-endian primitives)."""

    def __init__(self):
        self.buffer = bytearray()

    def write_bool(self, value: bool) -> None:
        self.buffer += b"\x01" if value else b"\x00"

    def write_int32(self, value: int) -> None:
        self.buffer += _INT32.pack(int(value))

    def write_float32(self, value: float) -> None:
        self.buffer += _FLOAT32.pack(float(value))

    def write_float32_list(self, values: Sequence[float]) -> None:
        self.write_int32(len(values))
        self.buffer += struct.pack(f"<{len(values)}f", *values)

    def write_string(self, value: str) -> None:
        data = value.encode("ascii")
        self.write_int32(len(data))
        self.buffer += data

    def set_raw_bytes(self, data: bytes) -> None:
        self.buffer = bytearray(data)


class IncomingMessage:
    """A payload being read; past its end every read gives ``default``."""

    def __init__(self, buffer: bytes, offset: int = 0):
        self.buffer = bytes(buffer)
        self.offset = offset

    def _can_read(self, size: int) -> bool:
        return self.offset + size <= len(self.buffer)

    def read_bool(self, default: bool = False) -> bool:
        if not self._can_read(1):
            return default
        self.offset += 1
        return self.buffer[self.offset - 1] != 0

    def read_int32(self, default: int = 0) -> int:
        if not self._can_read(4):
            return default
        (value,) = _INT32.unpack_from(self.buffer, self.offset)
        self.offset += 4
        return value

    def read_float32(self, default: float = 0.0) -> float:
        if not self._can_read(4):
            return default
        (value,) = _FLOAT32.unpack_from(self.buffer, self.offset)
        self.offset += 4
        return value

    def read_float32_list(self, default: Optional[List[float]] = None) -> List[float]:
        count = self.read_int32(-1)
        if count < 0 or not self._can_read(4 * count):
            return [] if default is None else default
        values = list(struct.unpack_from(f"<{count}f", self.buffer, self.offset))
        self.offset += 4 * count
        return values

    def read_string(self, default: str = "") -> str:
        size = self.read_int32(-1)
        if size < 0 or not self._can_read(size):
            return default
        text = self.buffer[self.offset:self.offset + size].decode("ascii", errors="replace")
        self.offset += size
        return text

    def get_raw_bytes(self) -> bytes:
        return self.buffer


class SideChannel(abc.ABC):
    """One channel: a UUID shared with its C# twin, messages in (``on_message_received``)
    and out (``queue_message_to_send``, sent with the trainer's next input)."""

    def __init__(self, channel_id: uuid.UUID):
        self._channel_id = uuid.UUID(str(channel_id))
        self.message_queue: List[bytes] = []

    @property
    def channel_id(self) -> uuid.UUID:
        return self._channel_id

    @abc.abstractmethod
    def on_message_received(self, msg: IncomingMessage) -> None:
        """A message of this channel arrived from the player."""

    def queue_message_to_send(self, msg: OutgoingMessage) -> None:
        self.message_queue.append(bytes(msg.buffer))


class EngineConfigurationChannel(SideChannel):
    """Trainer -> player: resolution, quality level, time scale and frame rates."""

    CHANNEL_ID = uuid.UUID("e951342c-4f7e-11ea-b238-784f4387d1f7")

    class ConfigurationType(enum.IntEnum):
        SCREEN_RESOLUTION = 0
        QUALITY_LEVEL = 1
        TIME_SCALE = 2
        TARGET_FRAME_RATE = 3
        CAPTURE_FRAME_RATE = 4

    def __init__(self):
        super().__init__(self.CHANNEL_ID)

    def on_message_received(self, msg: IncomingMessage) -> None:
        raise ValueError("the engine configuration channel takes no messages from the player")

    def set_configuration_parameters(self, width: Optional[int] = None,
                                     height: Optional[int] = None,
                                     quality_level: Optional[int] = None,
                                     time_scale: Optional[float] = None,
                                     target_frame_rate: Optional[int] = None,
                                     capture_frame_rate: Optional[int] = None) -> None:
        """Queues one message per value given (None: unchanged)."""
        if (width is None) != (height is None):
            raise ValueError("the screen resolution needs both width and height")
        kinds = self.ConfigurationType
        if width is not None:
            self._send(kinds.SCREEN_RESOLUTION, (width, height))
        for kind, value in ((kinds.QUALITY_LEVEL, quality_level),
                            (kinds.TIME_SCALE, time_scale),
                            (kinds.TARGET_FRAME_RATE, target_frame_rate),
                            (kinds.CAPTURE_FRAME_RATE, capture_frame_rate)):
            if value is not None:
                self._send(kind, (value,))

    def _send(self, kind: "EngineConfigurationChannel.ConfigurationType", values) -> None:
        msg = OutgoingMessage()
        msg.write_int32(kind)
        for value in values:
            if kind == self.ConfigurationType.TIME_SCALE:
                msg.write_float32(value)
            else:
                msg.write_int32(value)
        self.queue_message_to_send(msg)


class EnvironmentParametersChannel(SideChannel):
    """Trainer -> player: named parameters the game reads (``Academy.Instance.
    EnvironmentParameters.GetWithDefault``): a float, or a sampler the player draws from on
    every read."""

    CHANNEL_ID = uuid.UUID("534c891e-810f-11ea-a9d0-822485860400")

    class EnvironmentDataTypes(enum.IntEnum):
        FLOAT = 0
        SAMPLER = 1

    class SamplerTypes(enum.IntEnum):
        UNIFORM = 0
        GAUSSIAN = 1
        MULTIRANGEUNIFORM = 2

    def __init__(self):
        super().__init__(self.CHANNEL_ID)

    def on_message_received(self, msg: IncomingMessage) -> None:
        raise ValueError("the environment parameters channel takes no messages from the player")

    def _start(self, key: str, data_type: int) -> OutgoingMessage:
        msg = OutgoingMessage()
        msg.write_string(key)
        msg.write_int32(data_type)
        return msg

    def set_float_parameter(self, key: str, value: float) -> None:
        msg = self._start(key, self.EnvironmentDataTypes.FLOAT)
        msg.write_float32(value)
        self.queue_message_to_send(msg)

    def _sampler(self, key: str, seed: int, sampler: int) -> OutgoingMessage:
        msg = self._start(key, self.EnvironmentDataTypes.SAMPLER)
        msg.write_int32(seed)
        msg.write_int32(sampler)
        return msg

    def set_uniform_sampler_parameters(self, key: str, min_value: float, max_value: float,
                                       seed: int) -> None:
        msg = self._sampler(key, seed, self.SamplerTypes.UNIFORM)
        msg.write_float32(min_value)
        msg.write_float32(max_value)
        self.queue_message_to_send(msg)

    def set_gaussian_sampler_parameters(self, key: str, mean: float, st_dev: float,
                                        seed: int) -> None:
        msg = self._sampler(key, seed, self.SamplerTypes.GAUSSIAN)
        msg.write_float32(mean)
        msg.write_float32(st_dev)
        self.queue_message_to_send(msg)

    def set_multirangeuniform_sampler_parameters(
            self, key: str, intervals: Sequence[Tuple[float, float]], seed: int) -> None:
        """``intervals``: ``[(min0, max0), (min1, max1), ...]``, sent flat."""
        msg = self._sampler(key, seed, self.SamplerTypes.MULTIRANGEUNIFORM)
        msg.write_float32_list([float(v) for pair in intervals for v in pair])
        self.queue_message_to_send(msg)


class StatsAggregationMethod(enum.IntEnum):
    """How the values of one key are summarised over a summary period."""

    AVERAGE = 0
    MOST_RECENT = 1
    SUM = 2
    HISTOGRAM = 3


class StatsSideChannel(SideChannel):
    """Player -> trainer: ``Academy.Instance.StatsRecorder.Add(key, value, aggregation)``."""

    CHANNEL_ID = uuid.UUID("a1d8f7b7-cec8-50f9-b78b-d3e165a78520")

    def __init__(self):
        super().__init__(self.CHANNEL_ID)
        self.stats: Dict[str, List[Tuple[float, StatsAggregationMethod]]] = {}

    def on_message_received(self, msg: IncomingMessage) -> None:
        key = msg.read_string()
        value = msg.read_float32()
        try:
            aggregation = StatsAggregationMethod(msg.read_int32())
        except ValueError:
            aggregation = StatsAggregationMethod.AVERAGE
        self.stats.setdefault(key, []).append((value, aggregation))

    def get_and_reset_stats(self) -> Dict[str, List[Tuple[float, StatsAggregationMethod]]]:
        stats, self.stats = self.stats, {}
        return stats


class RawBytesChannel(SideChannel):
    """Raw bytes both ways, under a channel id of the user's choosing."""

    def __init__(self, channel_id: uuid.UUID):
        super().__init__(channel_id)
        self.received: List[bytes] = []

    def on_message_received(self, msg: IncomingMessage) -> None:
        self.received.append(msg.get_raw_bytes())

    def get_and_clear_received_messages(self) -> List[bytes]:
        received, self.received = self.received, []
        return received

    def send_raw_data(self, data: bytes) -> None:
        msg = OutgoingMessage()
        msg.set_raw_bytes(data)
        self.queue_message_to_send(msg)


class SideChannelError(ValueError):
    """The side-channel bytes of a message do not parse (one line)."""


def split_messages(data: bytes) -> List[Tuple[uuid.UUID, bytes]]:
    """``side_channel`` bytes -> ``[(channel id, payload), ...]``.

    Raises:
        SideChannelError: a header or payload runs past the end of the bytes.
    """
    out, offset = [], 0
    while offset < len(data):
        if offset + 20 > len(data):
            raise SideChannelError(f"side-channel data ends inside a message header (byte "
                                   f"{offset} of {len(data)})")
        channel = uuid.UUID(bytes_le=bytes(data[offset:offset + 16]))
        (size,) = _INT32.unpack_from(data, offset + 16)
        offset += 20
        if size < 0 or offset + size > len(data):
            raise SideChannelError(f"side-channel message of channel {channel} claims {size} "
                                   f"bytes, {len(data) - offset} are left")
        out.append((channel, bytes(data[offset:offset + size])))
        offset += size
    return out


def join_messages(messages: Iterable[Tuple[uuid.UUID, bytes]]) -> bytes:
    """``[(channel id, payload), ...]`` -> ``side_channel`` bytes."""
    out = bytearray()
    for channel, payload in messages:
        out += channel.bytes_le + _INT32.pack(len(payload)) + payload
    return bytes(out)


class SideChannelManager:
    """The channels of one env: routes what arrives, collects what is queued."""

    def __init__(self, channels: Iterable[SideChannel] = (),
                 warn: Callable[[str], None] = print):
        self.channels: Dict[uuid.UUID, SideChannel] = {}
        self.warn = warn
        self._unknown_warned = set()
        for channel in channels:
            self.register(channel)

    def register(self, channel: SideChannel) -> None:
        if not isinstance(channel, SideChannel):
            raise ValueError(f"side_channels: {channel!r} is not a SideChannel")
        if channel.channel_id in self.channels:
            raise ValueError(f"side_channels: two channels use the id {channel.channel_id}; "
                             f"each channel id may be registered once")
        self.channels[channel.channel_id] = channel

    def process_side_channel_message(self, data: bytes) -> None:
        for channel_id, payload in split_messages(data):
            channel = self.channels.get(channel_id)
            if channel is None:
                if channel_id not in self._unknown_warned:
                    self._unknown_warned.add(channel_id)
                    self.warn(f"[WARNING] The player sent a message on side channel "
                              f"{channel_id}, which no registered side channel has; it is "
                              f"dropped (register a SideChannel with that id to read it)")
                continue
            channel.on_message_received(IncomingMessage(payload))

    def generate_side_channel_messages(self) -> bytes:
        messages = []
        for channel_id, channel in self.channels.items():
            for payload in channel.message_queue:
                messages.append((channel_id, payload))
            channel.message_queue = []
        return join_messages(messages)


class EnvironmentStats(NamedTuple):
    """What the player reported through the stats channel since the last step:
    ``{key: [(value, StatsAggregationMethod), ...]}``. Travels from the env to every
    behavior's trainer, which writes it under the key as given."""

    values: Dict[str, List[Tuple[float, int]]]


__all__ = ["EngineConfigurationChannel", "EnvironmentParametersChannel", "EnvironmentStats",
           "IncomingMessage", "OutgoingMessage", "RawBytesChannel", "SideChannel",
           "SideChannelError", "SideChannelManager", "StatsAggregationMethod",
           "StatsSideChannel", "join_messages", "split_messages"]
