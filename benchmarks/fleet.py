"""Fleets of producers and big streams: capacity used, expiry, fairness, age, and the cost.

Parts (``python -m benchmarks fleet [sim|processes|streams] [options]``; all three without
one, ``--quick`` given to each):

- ``sim``: N real producers on one ``FakeKinesis`` with AWS's shard limits, in one process
  on virtual time (deterministic), N from 1 to 256 and S from 1 to 10,000 shards, at 2.25x
  and 4x the stream's capacity offered, admission by time on and off
  (``results/fleet.{md,json}``, ``fleet_by_producers.png``, ``fleet_by_shards.png``).
- ``processes``: 6 and 24 producer processes at 2.25x and 4x offered, defaults and
  admission off, against ``kinesis-trio local --emulator python --limits aws``, scaled to
  one shard of larger records so that two cores carry it; beside them the simulation of
  the same N = 6 runs and a verdict against a stated tolerance
  (``results/fleet_processes.{md,json}``).
- ``streams``: one producer at 2,000 records/s of 200 bytes over 10,000 random keys on 8,
  2,000 and 10,000 shards of the same local engine: CPU per record with the harness's own
  cost taken out, user records per Kinesis record, memory over the interpreter, p50/p99
  from put to confirmed (``results/fleet_streams.{md,json}``).

About 15 minutes in all here (``--quick``: about 3).
"""

from __future__ import annotations

from benchmarks._command import run_parts

PARTS = {
    "sim": "benchmarks._fleet_grid",
    "processes": "benchmarks._fleet_processes",
    "streams": "benchmarks._fleet_streams",
}


def main() -> None:
    run_parts("fleet", __doc__ or "", PARTS, shared=("--quick",))


if __name__ == "__main__":
    main()
