"""Records, shards and connections: how throughput and CPU move with the record size (up to
the 2026 service's 10 MiB records), the shard count and the request concurrency.

Parts (``python -m benchmarks sizes [sweeps|large] [options]``; both without one):

- ``sweeps``: kinesis_trio (trio, every outcome confirmed) on kinesalite: record size 32 B to
  1 MiB with aggregation on and off, shards 1 to 64, ``max_connections`` 1 to 64; the
  producer's and the emulator's CPU per point (``results/sizes.md``, charts
  ``throughput_vs_record_size.png`` and ``throughput_vs_shards.png`` by
  ``python -m benchmarks plots``).
- ``large``: 1, 4 and 10 MiB records on kinesis-local (a stream raised to 10 MiB records)
  by kinesis_trio and by boto3, CPU per MB; and an AUTO stream (no partition keys) on the
  fake against keyed records (``results/large_records.md``).
"""

from __future__ import annotations

from benchmarks._command import run_parts

PARTS = {"sweeps": "benchmarks._sweeps", "large": "benchmarks._large"}


def main() -> None:
    run_parts("sizes", __doc__ or "", PARTS)


if __name__ == "__main__":
    main()
