"""A Lambda function's producer against boto3's ``put_records`` with its retry loop.

Each round starts a fresh Python process per contender, as Lambda's cold start does, with
the credentials in the environment variables Lambda sets. In it, the clock starts before
the first import: **cold** is the time to the first confirmed record (the import, the
client or producer, the first invocation putting one record and returning once it is
written). Then **warm** invocations put 1, 10, 100 and 1,000 records of 200 bytes each
(distinct keys) and return once every one is confirmed; each is the median of
``--warm`` invocations. The contenders:

- ``kinesis_trio``: :class:`kinesis_trio.aws_lambda.LambdaProducer` and a sync handler
  (the default asyncio loop on its background thread, KPL aggregation as the stream allows);
- ``boto3``: ``boto3.client("kinesis").put_records`` in chunks of 500, sending the failed
  entries again (full-jitter backoff, 10 attempts), as the functions the issue names do.

A third row, **dependencies**, is the cold start's floor: the import alone of what the
package needs before its first request (httpx, h11, anyio with its memory streams and
portal, asyncio, botocore's SigV4 signer and credential providers), timed the same way.

Both run in a virtual environment of their own holding what a deployment package would:
this checkout's package with its runtime dependencies at the lockfile's versions, and boto3
at the version of the project's environment (made once per run with uv, in a temporary
folder), not the project's environment with its development tools (httpx imports click and
rich when they are there).
Each child runs in its deployment's folder, as a function runs in its package's: ``python -c``
puts the working directory first on ``sys.path``, and from the checkout a child would import
the checkout's ``kinesis_trio`` (its source, without bytecode), not the deployment's.
Both run against the Python local engine (one process, started once; a fresh stream of 4
shards per round), interleaved within a round; the figures are medians over the rounds.

Two deployments, the same for both contenders. The **zip** one (every figure but one) holds
no bytecode, as AWS's guide to .zip packages recommends ("We recommend that you don't
include ``__pycache__`` folders in your function's deployment package", docs.aws.amazon.com
/lambda/latest/dg/python-package.html#python-package-pycache) and uv's recipe for them
(``uv pip install --no-compile-bytecode``); nor can a function write any (its package is
read-only): each cold start compiles every module it imports outside the standard library.
The children run with ``PYTHONDONTWRITEBYTECODE=1`` so that no round leaves bytecode for
the next. The **compiled** one holds the bytecode of every module
(``uv pip install --compile-bytecode``, as uv's guide does for a container image, "to
improve cold-start performance"): its cold start alone is measured, a child of its own.

    uv run python -m benchmarks lambda            # --rounds 5 --warm 15
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._emulator import create_stream, delete_stream
from benchmarks._report import machine_info, markdown_table, publish, report_header
from benchmarks._summary import median_of
from kinesis_trio.testing._emulators import LocalKinesis

SIZES = (1, 10, 100, 1000)

_CONTEXT = """
import time
class Context:
    def __init__(self): self.deadline = time.monotonic() + 60
    def get_remaining_time_in_millis(self): return int((self.deadline - time.monotonic()) * 1000)
"""

KINESIS_TRIO = """
import time
t0 = time.perf_counter()
from kinesis_trio.aws_lambda import LambdaProducer

kinesis = LambdaProducer(STREAM, endpoint_url=ENDPOINT)
PAYLOAD = b"x" * 200

@kinesis.handler
def handler(event, context, records):
    for i in range(event["n"]):
        records.put(PAYLOAD, partition_key=f"key-{i}")
    return event["n"]
"""

BOTO3 = """
import time
t0 = time.perf_counter()
import random
import boto3

client = boto3.client("kinesis", endpoint_url=ENDPOINT)
PAYLOAD = b"x" * 200

def handler(event, context):
    entries = [{"Data": PAYLOAD, "PartitionKey": f"key-{i}"} for i in range(event["n"])]
    for start in range(0, len(entries), 500):
        pending = entries[start : start + 500]
        for attempt in range(10):
            answer = client.put_records(StreamName=STREAM, Records=pending)
            if not answer["FailedRecordCount"]:
                break
            pending = [e for e, r in zip(pending, answer["Records"]) if "ErrorCode" in r]
            time.sleep(random.uniform(0, min(2.0, 0.1 * 2**attempt)))
        else:
            raise RuntimeError(f"{len(pending)} records not written")
    return event["n"]
"""

#: the floor: the import of the package's dependencies alone (no record is sent)
DEPENDENCIES = """
import time
t0 = time.perf_counter()
import anyio, anyio.from_thread, anyio.streams.memory, asyncio, h11, httpx
import botocore.auth, botocore.credentials
print("RESULT " + json.dumps({"cold": time.perf_counter() - t0}))
raise SystemExit
"""

_RUN = """
handler({"n": 1}, Context())
cold = time.perf_counter() - t0
if not WARM:
    print("RESULT " + json.dumps({"cold": cold}))
    raise SystemExit
warm = {}
for n in SIZES:
    times = []
    for _ in range(WARM):
        t = time.perf_counter()
        assert handler({"n": n}, Context()) == n
        times.append(time.perf_counter() - t)
    times.sort()
    warm[n] = times[len(times) // 2]
print("RESULT " + json.dumps({"cold": cold, "warm": warm}))
"""


#: the deployments: each contender's cold start is measured in both
DEPLOYMENTS = {"zip": "--no-compile-bytecode", "compiled": "--compile-bytecode"}


def _deployment(folder: Path, bytecode: str) -> str:
    """A virtual environment as a Lambda deployment package: the package and boto3, with
    their bytecode or without (``bytecode``: uv's flag), at the versions of the project's
    lockfile (``uv export``, as uv's guide to Lambda builds a package: without it the
    newest release of each dependency is taken, e.g. another httpx than the one tested)."""
    import boto3

    root = Path(__file__).resolve().parents[1]
    venv = folder / "venv"
    subprocess.run(["uv", "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    python = str(venv / "bin" / "python")
    pins = folder / "constraints.txt"
    locked = subprocess.run(
        ["uv", "export", "--frozen", "--all-groups", "--no-hashes", "--no-emit-project"],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
    )
    pins.write_text(locked.stdout)
    subprocess.run(
        [
            "uv",
            "pip",
            "install",
            "-q",
            bytecode,
            "--python",
            python,
            "-c",
            str(pins),
            str(root),
            f"boto3=={boto3.__version__}",
        ],
        check=True,
    )
    return python


def _folder(python: str) -> Path:
    """The deployment's folder (it holds ``venv``), where its children run: ``python -c``
    puts the working directory first on ``sys.path``, and run from the checkout a child
    would import the checkout's package, from its source, not the deployment's."""
    return Path(python).parents[2]


def _ask(python: str, code: str) -> str:
    """What ``code`` prints, run by the deployment's Python in its folder."""
    out = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, check=True, cwd=_folder(python)
    )
    return out.stdout.strip()


def _package_of(python: str) -> Path:
    """Where a child of the deployment imports ``kinesis_trio`` from."""
    return Path(_ask(python, "import kinesis_trio; print(kinesis_trio.__file__)"))


def _pycache_count(python: str) -> int:
    """How many bytecode files the environment's site-packages hold."""
    purelib = _ask(python, "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    return sum(1 for _ in Path(purelib).rglob("*.pyc"))


def _child(python: str, code: str, endpoint: str, stream: str, warm: int) -> dict[str, Any]:
    if code is DEPENDENCIES:
        script = f"import json\n{code}"
    else:
        script = (
            f"import json\nSTREAM = {stream!r}\nENDPOINT = {endpoint!r}\nWARM = {warm}\n"
            f"SIZES = {SIZES!r}\n{code}{_CONTEXT}{_RUN}"
        )
    env = dict(
        os.environ,
        PYTHONDONTWRITEBYTECODE="1",  # a function's package is read-only: none is written
        AWS_ACCESS_KEY_ID="AKIDLAMBDA",
        AWS_SECRET_ACCESS_KEY="lambda-secret",
        AWS_SESSION_TOKEN="lambda-session-token",
        AWS_REGION="us-east-1",
        AWS_DEFAULT_REGION="us-east-1",
    )
    out = subprocess.run(
        [python, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=_folder(python),
    )
    line = next((x for x in out.stdout.splitlines() if x.startswith("RESULT ")), None)
    if out.returncode != 0 or line is None:
        raise RuntimeError(f"the child failed ({out.returncode}): {out.stderr[-2000:]}")
    data: dict[str, Any] = json.loads(line[len("RESULT ") :])
    data["warm"] = {int(k): v for k, v in data.get("warm", {}).items()}
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warm", type=int, default=15, help="warm invocations per size")
    args = parser.parse_args()
    info = machine_info()
    started = time.perf_counter()
    runs: dict[str, list[dict[str, Any]]] = {"kinesis_trio": [], "boto3": [], "dependencies": []}
    compiled: dict[str, list[dict[str, Any]]] = {name: [] for name in runs}
    codes = {"kinesis_trio": KINESIS_TRIO, "boto3": BOTO3, "dependencies": DEPENDENCIES}
    with (
        tempfile.TemporaryDirectory() as zip_folder,
        tempfile.TemporaryDirectory() as compiled_folder,
        LocalKinesis("python") as engine,
    ):
        python = _deployment(Path(zip_folder), DEPLOYMENTS["zip"])
        python_compiled = _deployment(Path(compiled_folder), DEPLOYMENTS["compiled"])
        pycs = {"zip": _pycache_count(python), "compiled": _pycache_count(python_compiled)}
        for deployed in (python, python_compiled):
            if _folder(deployed) not in _package_of(deployed).parents:
                raise RuntimeError(f"the children of {deployed} import another kinesis_trio")
        print(f"bytecode files in the deployments: {pycs}", flush=True)
        endpoint = engine.endpoint_url
        for r in range(args.rounds):
            stream = create_stream(endpoint, 4, prefix="lambda")
            order = list(codes) if r % 2 == 0 else list(reversed(codes))
            for name in order:
                runs[name].append(_child(python, codes[name], endpoint, stream, args.warm))
                print(f"round {r + 1} {name}: {runs[name][-1]}", flush=True)
            for name in order:
                compiled[name].append(_child(python_compiled, codes[name], endpoint, stream, 0))
                print(f"round {r + 1} {name} (compiled): {compiled[name][-1]}", flush=True)
            delete_stream(endpoint, stream)
        if _pycache_count(python) != pycs["zip"]:
            raise RuntimeError("a child wrote bytecode into the zip deployment")
    total = time.perf_counter() - started
    medians = {
        name: {
            "cold": median_of([x["cold"] for x in found]),
            **{n: median_of([x["warm"][n] for x in found if x["warm"]]) for n in SIZES},
        }
        for name, found in runs.items()
        if name != "dependencies"
    }
    floor = median_of([x["cold"] for x in runs["dependencies"]])
    medians["dependencies"] = {"cold": floor}
    for name, found in compiled.items():
        medians[name]["cold_compiled"] = median_of([x["cold"] for x in found])
    ours, theirs = medians["kinesis_trio"], medians["boto3"]
    floor_compiled = medians["dependencies"]["cold_compiled"]
    rows = [
        [
            name,
            f"{medians[name]['cold'] * 1000:.0f}",
            f"{medians[name]['cold_compiled'] * 1000:.0f}",
            *(f"{medians[name][n] * 1000:.1f}" for n in SIZES),
        ]
        for name in ("kinesis_trio", "boto3")
    ]
    rows.append(
        [
            "kinesis_trio / boto3",
            f"{ours['cold'] / theirs['cold']:.2f}x",
            f"{ours['cold_compiled'] / theirs['cold_compiled']:.2f}x",
            *(f"{ours[n] / theirs[n]:.2f}x" for n in SIZES),
        ]
    )
    rows.append(
        [
            "dependencies (import only)",
            f"{floor * 1000:.0f}",
            f"{floor_compiled * 1000:.0f}",
            *("" for _ in SIZES),
        ]
    )
    rows.append(
        [
            "dependencies / boto3",
            f"{floor / theirs['cold']:.2f}x",
            f"{floor_compiled / theirs['cold_compiled']:.2f}x",
            *("" for _ in SIZES),
        ]
    )
    md = report_header("# Lambda: cold start and warm invocations", info, total)
    md += [
        f"Medians of {args.rounds} rounds (a fresh process per contender and round, the "
        f"warm figures the median of {args.warm} invocations each), in ms, against the "
        "Python local engine on this machine (4 shards). Cold: from before the first "
        "import to the first confirmed record. Warm: one invocation putting N records of "
        "200 bytes and returning once all are confirmed. Dependencies: the import alone of "
        "what the package must load before its first request (httpx, h11, anyio, asyncio, "
        "botocore's signer and credential providers), the floor of its cold start. Both "
        "contenders deploy alike: as a .zip package without bytecode, as AWS's guide "
        "recommends (every column but one), and compiled to bytecode (`uv pip install "
        "--compile-bytecode`, as uv's guide does for a container image): the cold start "
        f"alone, a child of its own. Bytecode files in the deployments: {pycs['zip']:,} "
        f"(zip), {pycs['compiled']:,} (compiled).",
        "",
        markdown_table(
            ["", "cold start", "cold, compiled", *(f"warm, {n:,}" for n in SIZES)],
            rows,
            "l" + "r" * (2 + len(SIZES)),
        ),
    ]
    data = {
        "rounds": args.rounds,
        "warm": args.warm,
        "runs": runs,
        "compiled": compiled,
        "pycache": pycs,
        "medians": medians,
    }
    publish("lambda", md, data, total)


if __name__ == "__main__":
    main()
