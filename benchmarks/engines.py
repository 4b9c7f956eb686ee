"""The local engines: how fast each serves the producer, and whether ours holds up for days.

Parts (``python -m benchmarks engines [speed|soak] [options]``; both without one):

- ``speed``: the Python engine, kinesalite and kinesis-local side by side: records/s served
  to the producer on 64 shards, aggregated and not, and each engine's CPU per 1,000 Kinesis
  records (``results/local_engines.md``).
- ``soak``: the served Python engine under a steady mixed load and careless clients, its
  clock faster than real time so retention (24 h) is passed in minutes: its RSS over time
  (``results/soak.md``).
"""

from __future__ import annotations

from benchmarks._command import run_parts

PARTS = {"speed": "benchmarks._engines", "soak": "benchmarks._soak"}


def main() -> None:
    run_parts("engines", __doc__ or "", PARTS)


if __name__ == "__main__":
    main()
