"""Read and decode the internal topics replication leaves behind, streaming, in constant memory.

`TopicDump` reads every partition from its low watermark to the end offset pinned when the dump
starts (records written meanwhile are not waited for), in batches, decoding as it goes; a record
that does not decode is counted and sampled, never fatal. Full history yields rows as they are
read; `latest` keeps one row per key (the view Replicator and MM2 act on).

JSON Lines schema of `drctl dump-consumer-timestamps --format jsonl` (stable; fields are only
ever added); `-o json` is one document with the same shapes, `{rows, undecodable, summary}`
(docs/schemas/dump-consumer-timestamps.json).
Every line has "type"; record lines also carry record_partition, record_offset,
record_timestamp_ms and record_timestamp (ISO) of the internal record itself, and
`provenance` {hex, strings, timestamps_ms} when it has a `__replicator_id` header:
    consumer-timestamp: group, topic, partition, timestamp_ms, timestamp, delta, key_layout,
                        value_layout, key_version, value_version
    checkpoint:  group, topic, partition, upstream_offset, downstream_offset, metadata
    offset-sync: topic, partition, upstream_offset, downstream_offset
    heartbeat:   source_alias, target_alias, timestamp_ms, timestamp
    undecodable: record_*, reason, key_hex, value_hex (the first N only)
    summary:     kind, cluster, topic, records, outside_window, decoded, matched, emitted,
                 undecodable, partitions, latest, stopped_at_limit, elapsed_s, note
Undecodable records are counted whatever --groups/--topics say (their group and topic are
unknown), but only inside the --since/--until window.
"""
