"""Decoders (and encoders, for tests and the lab) of the records replication leaves behind.

Pure functions over bytes: a decoder returns a typed value or raises `DecodeError`, never
anything else, whatever the input.

- `mm2`: MirrorMaker 2 checkpoints, offset syncs, heartbeats (exact, published layouts).
- `connect`: Kafka Connect source offsets (JSON).
- `confluent`: `__consumer_timestamps` and the `__replicator_id` header (inferred layouts).
"""

from drctl.codecs.confluent import (
    ConsumerTimestamp,
    Provenance,
    decode_consumer_timestamp,
    decode_provenance,
    encode_consumer_timestamp,
)
from drctl.codecs.connect import SourceOffset, decode_source_offset, encode_source_offset
from drctl.codecs.mm2 import (
    Checkpoint,
    Heartbeat,
    OffsetSync,
    decode_checkpoint,
    decode_heartbeat,
    decode_offset_sync,
    encode_checkpoint,
    encode_heartbeat,
    encode_offset_sync,
)
from drctl.errors import DecodeError

__all__ = [
    "Checkpoint", "ConsumerTimestamp", "DecodeError", "Heartbeat", "OffsetSync", "Provenance",
    "SourceOffset", "decode_checkpoint", "decode_consumer_timestamp", "decode_heartbeat",
    "decode_offset_sync", "decode_provenance", "decode_source_offset", "encode_checkpoint",
    "encode_consumer_timestamp", "encode_heartbeat", "encode_offset_sync", "encode_source_offset",
]
