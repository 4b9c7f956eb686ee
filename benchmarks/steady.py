"""CPU and latency at a steady rate: what a service producing all day pays, and how fast a
rate the producer holds with its latency bound.

Parts (``python -m benchmarks steady [cpu|rates] [options]``; both without one):

- ``cpu``: the producer's own CPU per record at 100 to 20,000 records/s on 8 and 32 shards,
  trio and asyncio, in virtual time against the in-process engine behind the producer's real
  HTTP pool, a null producer's run of the same schedule subtracted; against its burst
  figure (``results/steady_cpu.md``).
- ``rates``: the highest steady rate held on 32 shards (p99 from each record's scheduled
  arrival within linger + 20 ms, the arrival loop on time), each step a fresh process on
  kinesalite, and a web handler's shape (a task per record awaiting its own outcome)
  (``results/steady_rates.{md,png}``).
"""

from __future__ import annotations

from benchmarks._command import run_parts

PARTS = {"cpu": "benchmarks._steady_cpu", "rates": "benchmarks._steady_rates"}


def main() -> None:
    run_parts("steady", __doc__ or "", PARTS)


if __name__ == "__main__":
    main()
