#!/usr/bin/env bash
# Regenerates the GSR compatibility vectors (Java 17 and Maven needed, Maven Central reached):
#   java-written.jsonl  every case of cases.json written by the AWS Java serde 1.1.24
#   python-written.jsonl the same cases written by kinesis_trio.gsr
#   java-read.jsonl     python-written.jsonl decoded by the Java serde
#   generated/java-definitions.jsonl  the definition the Java serializer registers for each
#                       top-level message of generated/*.proto, the files compiled by
#                       grpcio-tools' protoc (as Python's generated classes are)
# Run from anywhere: bash tests/compat/gsr/regenerate.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
out="$here/vectors"
mkdir -p "$out"
cd "$root"
uv run python -m tests.support.gsr write "$out/python-written.jsonl"
cd "$here/../gsr-java"
mvn -q -B compile exec:java -Dexec.args="write $here/cases.json $out/java-written.jsonl"
mvn -q -B exec:java -Dexec.args="read $out/python-written.jsonl $out/java-read.jsonl"
cd "$root"
protos=(kt_nested.proto kt_imports.proto kt_legacy.proto)
set_pb="$(mktemp -d)/generated.pb"
uv run python -m tests.support.gsr_generated descriptor-set "$set_pb" "${protos[@]}"
cd "$here/../gsr-java"
mvn -q -B exec:java -Dexec.args="definitions $set_pb $here/generated/java-definitions.jsonl ${protos[*]}"
echo "wrote $(wc -l < "$out/java-written.jsonl") Java records, $(wc -l < "$out/python-written.jsonl") of ours, $(wc -l < "$out/java-read.jsonl") read by Java"
