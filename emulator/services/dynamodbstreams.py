"""DynamoDB stream records and shards in moto 5.2.6, closer to AWS and built once.

Gaps (moto/dynamodb/models/table.py, moto/dynamodbstreams/models.py), each closed below:

- ``StreamRecord.__init__`` serialises the old and new items with ``Item.to_json`` (deep copies of
  every map and list), then dumps the whole record to JSON once more only to measure
  ``SizeBytes`` (a "substantial overestimate", moto says); ``eventVersion`` is "1.0" and
  ``awsRegion`` always us-east-1. Here a record is built once, in the shape GetRecords returns
  (``ApproximateCreationDateTime`` epoch seconds rounded down as DynamoDB Streams does, binary
  values as bytes), with ``eventVersion`` "1.1" as AWS sends today, the table's region, and
  ``SizeBytes`` computed as DynamoDB sizes items (developer guide, "DynamoDB item sizes and
  formats"): UTF-8 bytes of every attribute name and string, raw bytes of binaries, 1 byte per two
  significant digits of a number plus 1, 1 byte for a boolean or null, 3 bytes plus 1 per element
  for a list or map; the record's size is that of its Keys and images.
- A table's stream has one shard (``Table.stream_shard``). AWS has one per partition: here every
  stream has ``EMULATOR_STREAM_SHARDS`` shards (default 4; read when the stream is created), the
  first being moto's own ``stream_shard``. A record goes to the shard picked by a CRC-32 of the
  item's partition key, so the records of one key stay in order in one shard; sequence numbers
  come from one counter per stream (increasing within each shard, unique in the stream).
  DescribeStream lists every shard; GetShardIterator (any shard; an unknown one is
  ResourceNotFoundException, moto asserted) and GetRecords (a bisection on the sequence numbers:
  they are no longer consecutive within a shard) work per shard. ``LATEST`` points after the
  shard's last record (moto: ``starting_sequence_number + len(items)``).
- Every record added calls ``emulator.core.wakeups.notify`` of its shard (``shard_source``): a
  shard's readers wait on their own shard.
- Readers per shard (moto has no limit): DynamoDB Streams serves "no more than two processes at
  most" reading one shard at the same time, "exceeding this limit can result in request
  throttling" (developer guide, "DynamoDB Streams: reading and processing a stream"). Modelled by
  ``ShardReaders``: a reader holds one of a shard's two read slots for ``READ_LEASE`` after a
  GetRecords (Lambda polls each shard four times a second); a third reader's GetRecords while two
  slots are held is LimitExceededException. The throttled reader is next: a holder's lease is not
  renewed while a reader waits, and a freed slot goes to the longest-waiting reader. A reader is
  an event source mapping or pipe (its UUID) in process, or over the API the chain of iterators
  from one GetShardIterator.
"""

from __future__ import annotations

import base64
import bisect
import logging
import os
import threading
import time
import zlib
from typing import Any

from moto.dynamodb.exceptions import (
    ERROR_TYPE_PREFIX,
    DynamodbException,
    ResourceNotFoundException,
)
from moto.dynamodb.models.dynamo_type import DynamoType, Item
from moto.dynamodb.models.table import StreamRecord, StreamShard, Table
from moto.dynamodbstreams.models import DynamoDBStreamsBackend, ShardIterator
from moto.moto_api._internal import mock_random

from emulator.core import wakeups
from emulator.services.patching import original, replace

log = logging.getLogger("emulator.moto")

SHARDS_ENV = "EMULATOR_STREAM_SHARDS"
DEFAULT_SHARDS = 4
EVENT_VERSION = "1.1"

READERS_PER_SHARD = 2
READ_LEASE = 0.25  # s a reader counts as reading a shard after a GetRecords
WAITER_TTL = 2.0  # s after its last throttled GetRecords a reader no longer waits for a slot

_create_lock = threading.Lock()


def shard_count() -> int:
    raw = os.environ.get(SHARDS_ENV, "")
    if not raw.strip():
        return DEFAULT_SHARDS
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        log.warning("%s=%r is not a whole number >= 1: %d shards", SHARDS_ENV, raw, DEFAULT_SHARDS)
        return DEFAULT_SHARDS
    return value


class Stream:
    """The shards of one table's stream (moto's ``stream_shard`` first) and its sequence
    counter. Appends hold ``lock``; readers bisect the per-shard lists without it (a list append
    is atomic)."""

    def __init__(self, table: Table, first: StreamShard, count: int) -> None:
        self.lock = threading.Lock()
        self.table = table
        self.arn = f"{table.table_arn}/stream/{table.latest_stream_label}"
        self.view_type = (table.stream_specification or {}).get("StreamViewType", "KEYS_ONLY")
        self.shards = [first]
        stamp = int(time.time() * 1000)
        for _ in range(count - 1):
            shard = StreamShard(first.account_id, table)
            shard.id = f"shardId-{stamp:020d}-{mock_random.get_random_hex(8)}"
            shard.starting_sequence_number = first.starting_sequence_number
            self.shards.append(shard)
        self.by_id = {shard.id: shard for shard in self.shards}
        for shard in self.shards:
            shard._q_stream = self
            shard._q_sequences = [int(r.record["dynamodb"]["SequenceNumber"]) for r in shard.items]
        self.next_sequence = max(
            [first.starting_sequence_number, *(s[-1] + 1 for s in self._sequences() if s)]
        )

    def _sequences(self) -> list[list[int]]:
        return [shard._q_sequences for shard in self.shards]

    def shard_for(self, item: Item) -> StreamShard:
        if len(self.shards) == 1:
            return self.shards[0]
        key = item.hash_key
        raw = key.value if isinstance(key.value, bytes) else str(key.value).encode()
        return self.shards[zlib.crc32(key.type.encode() + b":" + raw) % len(self.shards)]

    def append(self, old: Item | None, new: Item | None) -> None:
        event_name = "INSERT" if old is None else "REMOVE" if new is None else "MODIFY"
        item = old if old is not None else new
        shard = self.shard_for(item)  # type: ignore[arg-type]
        with self.lock:
            sequence = self.next_sequence
            self.next_sequence += 1
            record = StreamRecord.__new__(StreamRecord)
            record.record = build_record(self.table, self.view_type, event_name, old, new, sequence)
            shard.items.append(record)
            shard._q_sequences.append(sequence)
        wakeups.notify(shard_source(self.arn, shard.id))


def shard_source(stream_arn: str, shard_id: str) -> str:
    """What a shard's readers wait on (emulator.core.wakeups): a record added to one shard wakes
    that shard's readers, not every reader of the stream."""
    return f"{stream_arn}#{shard_id}"


def stream_of(table: Table) -> Stream | None:
    """The table's current stream (None when it has none), set up on first use."""
    first = table.stream_shard
    if first is None:
        return None
    stream = first.__dict__.get("_q_stream")
    if stream is None:
        with _create_lock:
            stream = first.__dict__.get("_q_stream")
            if stream is None:
                stream = Stream(table, first, shard_count())
    return stream


# --- readers per shard ----------------------------------------------------------------------------
class ShardReaders:
    """Who reads one shard now: at most ``READERS_PER_SHARD`` leases, and the throttled readers
    in the order they were first refused."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._leases: dict[str, float] = {}  # reader -> end of its lease (monotonic)
        self._waiting: dict[str, float] = {}  # reader -> its last throttled GetRecords
        self.throttled = 0

    def admit(self, reader: str, now: float | None = None) -> bool:
        """A GetRecords by ``reader``: True when it may read, False when it is throttled."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self._leases = {r: end for r, end in self._leases.items() if end > now}
            self._waiting = {r: t for r, t in self._waiting.items() if now - t < WAITER_TTL}
            if reader in self._leases:
                if not self._waiting:
                    self._leases[reader] = now + READ_LEASE
                return True
            ahead = 0
            for waiter in self._waiting:
                if waiter == reader:
                    break
                ahead += 1
            if len(self._leases) + ahead < READERS_PER_SHARD:
                self._leases[reader] = now + READ_LEASE
                self._waiting.pop(reader, None)
                return True
            self._waiting[reader] = now  # an existing waiter keeps its place
            self.throttled += 1
            return False


_readers: dict[tuple[str, str], ShardReaders] = {}
_readers_lock = threading.Lock()


def shard_readers(stream_arn: str, shard_id: str) -> ShardReaders:
    key = (stream_arn, shard_id)
    with _readers_lock:
        readers = _readers.get(key)
        if readers is None:
            readers = _readers[key] = ShardReaders()
        return readers


def throttled_reads() -> DynamodbException:
    """GetRecords refused to a third concurrent reader of a shard (the message is ours: AWS
    documents the error, not its text)."""
    return DynamodbException(
        ERROR_TYPE_PREFIX + "LimitExceededException",
        f"Rate exceeded: more than {READERS_PER_SHARD} processes are reading this shard",
    )


# --- records --------------------------------------------------------------------------------------
def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def number_size(text: str) -> int:
    """DynamoDB's size of a number: 1 byte per two significant digits, plus 1."""
    mantissa = text.lstrip("+-").split("e")[0].split("E")[0].replace(".", "")
    digits = len(mantissa.strip("0"))
    return (digits + 1) // 2 + 1


def _binary(value: Any) -> bytes:
    return value if isinstance(value, bytes | bytearray) else base64.b64decode(value)


def attribute(value: DynamoType | dict[str, Any]) -> tuple[dict[str, Any], int]:  # noqa: PLR0911
    """One attribute value as GetRecords returns it (as botocore parses it: binaries as bytes)
    and its size in bytes (without its name)."""
    if not isinstance(value, DynamoType):
        value = DynamoType(value)
    kind, raw = value.type, value.value
    if kind == "S":
        return {"S": raw}, _utf8_len(raw)
    if kind == "N":
        return {"N": raw}, number_size(raw)
    if kind in ("BOOL", "NULL"):
        return {kind: raw}, 1
    if kind == "B":
        data = _binary(raw)
        return {"B": data}, len(data)
    if kind == "SS":
        return {"SS": list(raw)}, sum(_utf8_len(v) for v in raw)
    if kind == "NS":
        return {"NS": list(raw)}, sum(number_size(v) for v in raw)
    if kind == "BS":
        data_set = [_binary(v) for v in raw]
        return {"BS": data_set}, sum(len(v) for v in data_set)
    if kind == "L":
        elements = [attribute(v) for v in raw]
        return {"L": [v for v, _ in elements]}, 3 + sum(size + 1 for _, size in elements)
    if kind == "M":
        members = {name: attribute(v) for name, v in raw.items()}
        size = 3 + sum(_utf8_len(name) + s + 1 for name, (_, s) in members.items())
        return {"M": {name: v for name, (v, _) in members.items()}}, size
    return value.to_json(), len(str(raw))  # a type DynamoDB does not have: as moto has it


def image(attributes: dict[str, DynamoType]) -> tuple[dict[str, Any], int]:
    """Item attributes as a stream image, and their size (names included)."""
    shaped: dict[str, Any] = {}
    size = 0
    for name, value in attributes.items():
        shaped[name], value_size = attribute(value)
        size += _utf8_len(name) + value_size
    return shaped, size


def build_record(  # noqa: PLR0917 - moto's StreamRecord arguments
    table: Table,
    view_type: str,
    event_name: str,
    old: Item | None,
    new: Item | None,
    sequence: int,
) -> dict[str, Any]:
    item = old if old is not None else new
    key_attributes = {table.hash_key_attr: item.hash_key}  # type: ignore[union-attr]
    if table.range_key_attr is not None:
        key_attributes[table.range_key_attr] = item.range_key  # type: ignore[union-attr,assignment]
    keys, size = image(key_attributes)
    change: dict[str, Any] = {
        "ApproximateCreationDateTime": float(int(time.time())),
        "Keys": keys,
        "SequenceNumber": str(sequence),
        "SizeBytes": 0,
        "StreamViewType": view_type,
    }
    if view_type in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES") and new is not None:
        change["NewImage"], new_size = image(new.attrs)
        size += new_size
    if view_type in ("OLD_IMAGE", "NEW_AND_OLD_IMAGES") and old is not None:
        change["OldImage"], old_size = image(old.attrs)
        size += old_size
    change["SizeBytes"] = size
    return {
        "eventID": mock_random.uuid4().hex,
        "eventName": event_name,
        "eventVersion": EVENT_VERSION,
        "eventSource": "aws:dynamodb",
        "awsRegion": table.region_name,
        "dynamodb": change,
    }


# --- patches --------------------------------------------------------------------------------------
def add(self: StreamShard, old: Item | None, new: Item | None) -> None:
    """StreamShard.add: the record built once, into the shard of the item's partition key.
    (moto's own event-source-mapping delivery here is off: moto_patches detaches every
    mapping.)"""
    stream = stream_of(self.table)
    if stream is None or self.__dict__.get("_q_stream", stream) is not stream:
        return  # a shard of a stream the table no longer has
    stream.append(old, new)


def get(self: StreamShard, start: int, quantity: int) -> list[dict[str, Any]]:
    """StreamShard.get: the records with a sequence number >= start (bisection)."""
    sequences = self.__dict__.get("_q_sequences")
    if sequences is None:
        stream_of(self.table)
        sequences = self.__dict__.get("_q_sequences", [])
    first = bisect.bisect_left(sequences, start)
    return [r.record for r in self.items[first : first + quantity]]


def _iterator_init(
    self: ShardIterator,
    streams_backend: DynamoDBStreamsBackend,
    stream_shard: StreamShard,
    shard_iterator_type: str,
    sequence_number: int | None = None,
) -> None:
    _original_iterator_init(
        self, streams_backend, stream_shard, shard_iterator_type, sequence_number
    )
    if shard_iterator_type == "LATEST":
        sequences = stream_shard.__dict__.get("_q_sequences") or []
        self.sequence_number = (
            sequences[-1] + 1 if sequences else stream_shard.starting_sequence_number
        )


def describe_stream(self: DynamoDBStreamsBackend, arn: str) -> dict[str, Any]:
    description = _original_describe_stream(self, arn)
    stream = stream_of(self._get_table_from_arn(arn))
    if stream is not None:
        description["Shards"] = [shard.to_json() for shard in stream.shards]
    return description


def get_shard_iterator(
    self: DynamoDBStreamsBackend,
    arn: str,
    shard_id: str,
    shard_iterator_type: str,
    sequence_number: str | int | None = None,
) -> ShardIterator:
    stream = stream_of(self._get_table_from_arn(arn))
    shard = None if stream is None else stream.by_id.get(shard_id)
    if shard is None:
        raise ResourceNotFoundException(f"Requested resource not found: Shard {shard_id}")
    if isinstance(sequence_number, str):
        sequence_number = int(sequence_number)
    iterator = ShardIterator(self, shard, shard_iterator_type, sequence_number)
    self.shard_iterators[iterator.arn] = iterator
    return iterator


def get_records(self: DynamoDBStreamsBackend, iterator_arn: str, limit: int) -> dict[str, Any]:
    """GetRecords counted against the shard's readers; the next iterator keeps the reader."""
    iterator = self.shard_iterators[iterator_arn]
    reader = iterator.__dict__.get("_q_reader", iterator_arn)
    stream = stream_of(iterator.stream_shard.table)
    if stream is not None and not shard_readers(stream.arn, iterator.stream_shard.id).admit(reader):
        raise throttled_reads()
    result = iterator.get(limit)
    self.shard_iterators[result["NextShardIterator"]]._q_reader = reader
    return result


_original_iterator_init: Any = ShardIterator.__init__
_original_describe_stream: Any = DynamoDBStreamsBackend.describe_stream


def install() -> None:
    global _original_iterator_init, _original_describe_stream  # noqa: PLW0603
    _original_iterator_init = original(ShardIterator, "__init__")
    _original_describe_stream = original(DynamoDBStreamsBackend, "describe_stream")
    replace(StreamShard, "add", add)
    replace(StreamShard, "get", get)
    replace(ShardIterator, "__init__", _iterator_init)
    replace(DynamoDBStreamsBackend, "describe_stream", describe_stream)
    replace(DynamoDBStreamsBackend, "get_shard_iterator", get_shard_iterator)
    replace(DynamoDBStreamsBackend, "get_records", get_records)
