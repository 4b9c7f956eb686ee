"""Build hooks for the kinesis-trio documentation (``hooks:`` in ``mkdocs.yml``).

MkDocs hooks:

* ``on_files``: every ``benchmarks/results/*.png`` becomes a file of the site at
  ``benchmarks/<name>.png`` (read from where it is: the repository keeps one copy).
* ``on_page_markdown``, on pages under ``benchmarks/``:

  - a snippet line ``--8<-- "benchmarks/....md"`` whose file is missing becomes a note
    (for a results file, naming the command that writes it); a present file that names a
    PNG which is missing is inlined without that image (otherwise pymdownx.snippets
    includes it as it is);
  - a page's own image line ``![...](NAME.png)`` is dropped when an included results file
    already shows that PNG, and becomes a note when the PNG is missing.

  So ``mkdocs build --strict`` passes whichever results exist.
* ``on_page_markdown``, on ``endpoints.md``: the line ``<!-- endpoint table -->`` becomes
  the table of where each call goes, made by the package's resolver (botocore's endpoint
  rules) when the site is built, not typed.
* ``on_page_markdown``, on every page: a ``::: IDENTIFIER`` block (mkdocstrings) whose
  identifier is in ``PENDING_API`` and is not (yet) in the package is replaced by a note.
  Identifiers that exist render as usual.

A griffe extension, ``DocstringCleanup`` (``extensions:`` of the mkdocstrings python
handler), adapts the package's Sphinx-flavoured docstrings to Markdown: Sphinx roles such
as ``:class:`Outcome``` become (optional) cross-references, ``::`` literal blocks become
fenced code blocks, and ``#:`` comments above attributes become their docstrings.
"""

from __future__ import annotations

import ast
import logging
import re
import textwrap
from pathlib import Path
from typing import Any

import griffe

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PACKAGE = "kinesis_trio"
#: Where result images go in the site (next to the pages under docs/benchmarks/).
IMAGE_DIR = "benchmarks"
#: API entries for parts that other work adds: shown once the package has them.
PENDING_API = {
    "kinesis_trio.SyncProducer": (
        "`kinesis_trio.SyncProducer` (from `kinesis_trio/_shell/_sync_producer.py`)"
    ),
}
#: How to produce each results file, for the note shown while it is missing.
PRODUCERS = {
    "throughput.md": "uv run python -m benchmarks throughput",
    "latency.md": "uv run python -m benchmarks latency",
    "steady_cpu.md": "uv run python -m benchmarks steady cpu",
    "steady_rates.md": "uv run python -m benchmarks steady rates",
    "sizes.md": "uv run python -m benchmarks sizes sweeps",
    "large_records.md": "uv run python -m benchmarks sizes large",
    "backpressure.md": "uv run python -m benchmarks backpressure",
    "overload.md": "uv run python -m benchmarks overload",
    "reliability.md": "uv run python -m benchmarks reliability",
    "ordering.md": "uv run python -m benchmarks ordering",
    "processes.md": "uv run python -m benchmarks processes",
    "local_engines.md": "uv run python -m benchmarks engines speed",
    "soak.md": "uv run python -m benchmarks engines soak",
}

log = logging.getLogger("mkdocs.hooks.kinesis_trio")

_SNIPPET = re.compile(r'^--8<--\s+"(benchmarks/[\w./-]+\.md)"\s*$')
_IMAGE = re.compile(r"^!\[[^\]]*\]\(([\w.-]+\.png)\)\s*$")
_IMAGE_ANYWHERE = re.compile(r"!\[[^\]]*\]\(([\w.-]+\.png)\)")
_DIRECTIVE = re.compile(r"^:::\s+(\S+)\s*$")

_present: set[str] = set()


# -- MkDocs hooks ----------------------------------------------------------------------------


def on_pre_build(config: Any) -> None:
    """Find which of ``PENDING_API`` the package has (static analysis, like mkdocstrings)."""
    _present.clear()
    try:
        package = griffe.load(PACKAGE, search_paths=[str(ROOT)], resolve_aliases=False)
    except Exception as exc:  # the API pages will report the real problem
        log.info("kinesis_trio could not be loaded to check pending API entries: %s", exc)
        return
    for identifier in PENDING_API:
        obj: Any = package
        for part in identifier.split(".")[1:]:
            members = getattr(obj, "members", {})
            if part not in members:
                break
            obj = members[part]
        else:
            _present.add(identifier)


def on_files(files: Any, config: Any) -> Any:
    """Serve the benchmark PNGs from benchmarks/results/ (no copy kept under docs/)."""
    from mkdocs.structure.files import File

    if not RESULTS.is_dir():
        return files
    for png in sorted(RESULTS.glob("*.png")):
        uri = f"{IMAGE_DIR}/{png.name}"
        if files.get_file_from_path(uri) is None:
            files.append(File.generated(config, uri, abs_src_path=str(png)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Tolerate missing results and PNGs; hold back API entries not in the package yet."""
    markdown = _pending_api(markdown)
    if page.file.src_uri == "endpoints.md":
        markdown = markdown.replace(ENDPOINT_TABLE, _endpoint_table())
    if page.file.src_uri.startswith(f"{IMAGE_DIR}/"):
        markdown = _benchmark_page(markdown, page.title or "Benchmark")
    return markdown


ENDPOINT_TABLE = "<!-- endpoint table -->"
_ARN = "arn:{partition}:kinesis:{region}:123456789012:stream/orders"
#: (service, operation, region, FIPS, dual-stack, by ARN, the credentials' account id)
_ENDPOINT_CASES: list[tuple[str, str, str, bool, bool, bool, str | None]] = [
    ("kinesis", "PutRecords", "us-east-1", False, False, False, None),
    ("kinesis", "PutRecords", "us-east-1", False, False, True, None),
    ("kinesis", "ListShards", "us-east-1", False, False, True, None),
    ("kinesis", "DescribeStreamSummary", "us-east-1", False, False, True, None),
    ("kinesis", "PutRecords", "us-east-1", False, False, False, "111122223333"),
    ("kinesis", "PutRecords", "us-east-1", True, False, False, None),
    ("kinesis", "PutRecords", "us-east-1", True, False, True, None),
    ("kinesis", "PutRecords", "us-east-1", False, True, False, None),
    ("kinesis", "PutRecords", "us-gov-west-1", True, False, False, None),
    ("kinesis", "PutRecords", "cn-north-1", False, False, False, None),
    ("kinesis", "PutRecords", "cn-north-1", False, False, True, None),
    ("kinesis", "PutRecords", "us-iso-east-1", False, False, False, None),
    ("kinesis", "PutRecords", "us-isob-east-1", False, False, False, None),
    ("kinesis", "PutRecords", "eu-isoe-west-1", False, True, False, None),
    ("kinesis", "PutRecords", "eusc-de-east-1", False, False, False, None),
    ("glue", "GetSchemaVersion", "us-east-1", False, False, False, None),
    ("glue", "GetSchemaVersion", "us-east-1", True, False, False, None),
    ("cloudwatch", "PutMetricData", "us-east-1", False, False, False, None),
    ("cloudwatch", "PutMetricData", "us-gov-west-1", True, True, False, None),
]


def _endpoint_table() -> str:
    """Where each call goes, by the package's own resolver (botocore's rules)."""
    from kinesis_trio import EndpointError
    from kinesis_trio._aws._endpoints import EndpointSettings
    from kinesis_trio._aws._rules import Rules, _service_data, partition_of

    partitions = _service_data("kinesis")[2]
    rows = [
        "| call | region | settings | endpoint | signed for |",
        "|---|---|---|---|---|",
    ]
    for service, operation, region, fips, dual, by_arn, account in _ENDPOINT_CASES:
        settings = [
            name
            for name, on in (
                ("FIPS", fips),
                ("dual-stack", dual),
                ("`StreamARN`", by_arn),
                (f"account id {account}", account),
            )
            if on
        ]
        context = {}
        if by_arn:
            partition = partition_of(region, partitions)
            context["StreamARN"] = _ARN.format(partition=partition, region=region)
        try:
            rules = Rules(service, region, EndpointSettings(fips, dual))
            found = rules.resolve(operation, context, account)
            where = f"`{found.url}`"
            signed = f"`{found.signing_name}` in `{found.signing_region}`"
        except EndpointError as exc:
            reason = str(exc).split(": ", 1)[-1].split(" (", 1)[0]
            where, signed = f"refused: {reason}", ""
        rows.append(
            f"| {service} {operation} | `{region}` | {', '.join(settings) or '-'} "
            f"| {where} | {signed} |"
        )
    return "\n".join(rows)


def _pending_api(markdown: str) -> str:
    lines = markdown.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        match = _DIRECTIVE.match(lines[i])
        identifier = match.group(1) if match else None
        if identifier is None or identifier not in PENDING_API or identifier in _present:
            out.append(lines[i])
            i += 1
            continue
        i += 1
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith("    ")):
            i += 1  # the directive's indented options
        out += [
            '!!! note "Not in this build yet"',
            f"    {PENDING_API[identifier]} is not exported by the package in this "
            "checkout yet; its reference appears here once it is.",
            "",
        ]
    return "\n".join(out) + "\n"


def _benchmark_page(markdown: str, title: str) -> str:
    lines = markdown.splitlines()
    shown: set[str] = set()
    out: list[str] = []
    for line in lines:
        match = _SNIPPET.match(line.strip())
        if match is None:
            out.append(line)
            continue
        path = ROOT / match.group(1)
        if not path.is_file():
            command = PRODUCERS.get(path.name) if path.parent == RESULTS else None
            how = f": `{command}` writes it" if command else ""
            out += [
                f"# {title}",
                "",
                '!!! note "Not in this checkout"',
                f"    `{match.group(1)}` is not there yet{how}.",
                "",
            ]
            continue
        text = path.read_text(encoding="utf-8")
        images = set(_IMAGE_ANYWHERE.findall(text))
        missing = {name for name in images if not (RESULTS / name).is_file()}
        shown |= images - missing
        if not missing:
            out.append(line)  # pymdownx.snippets includes it
            continue
        for inner in text.splitlines():
            image = _IMAGE.match(inner)
            if image is None or image.group(1) not in missing:
                out.append(inner)
    final: list[str] = []
    for line in out:
        image = _IMAGE.match(line)
        if image is None:
            final.append(line)
        elif image.group(1) in shown:
            continue  # the included results file shows it already
        elif (RESULTS / image.group(1)).is_file():
            final.append(line)
            shown.add(image.group(1))
        else:
            final += [
                '!!! note "Chart not generated"',
                f"    `benchmarks/results/{image.group(1)}` is not there: "
                "`uv run python -m benchmarks._plots` draws it from the JSON results.",
                "",
            ]
    return "\n".join(final) + "\n"


# -- griffe extension ------------------------------------------------------------------------

_ROLE = re.compile(r":(?:py:)?(?:class|meth|attr|data|func|exc|mod|obj|const):`(~?)([\w.]+)`")


class DocstringCleanup(griffe.Extension):
    """Make the package's Sphinx-flavoured docstrings render well as Markdown."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.name != PACKAGE:
            return
        loader = kwargs.get("loader")
        parser = getattr(loader, "docstring_parser", None)
        options = getattr(loader, "docstring_options", None)
        for obj in _walk(pkg):
            if obj.docstring is None and obj.is_attribute:
                text = _comment_docstring(obj)
                if text:
                    obj.docstring = griffe.Docstring(
                        text,
                        lineno=obj.lineno,
                        endlineno=obj.lineno,
                        parent=obj,
                        parser=parser,
                        parser_options=options,
                    )
            if obj.docstring is not None:
                obj.docstring.value = _markdown(obj.docstring.value, obj)


def _walk(obj: griffe.Object) -> list[griffe.Object]:
    found = [obj]
    for member in obj.members.values():
        if not member.is_alias:
            found += _walk(member)  # type: ignore[arg-type]
    return found


def _comment_docstring(attr: griffe.Object) -> str:
    """The ``#:`` comment lines right above an attribute's assignment, if any."""
    if attr.lineno is None or attr.filepath is None:
        return ""
    try:
        source = attr.lines_collection[attr.filepath]  # type: ignore[index]
    except (KeyError, TypeError):
        return ""
    comment: list[str] = []
    index = attr.lineno - 2
    while index >= 0 and source[index].strip().startswith("#:"):
        comment.insert(0, source[index].strip()[2:].strip())
        index -= 1
    return " ".join(comment)


def _markdown(text: str, obj: griffe.Object) -> str:
    text = _ROLE.sub(lambda m: _crossref(m.group(2), bool(m.group(1)), obj), text)
    return _literal_blocks(text)


def _crossref(target: str, short: bool, obj: griffe.Object) -> str:
    title = target.rsplit(".", 1)[-1] if short else target
    path: str | None = target if target.startswith(f"{PACKAGE}.") else None
    if path is None:
        head, _, rest = target.partition(".")
        try:
            path = obj.resolve(head) + (f".{rest}" if rest else "")
        except Exception:
            path = None
    if path is None:
        return f"`{title}`"
    return f'<autoref identifier="{path}" optional><code>{title}</code></autoref>'


def _literal_blocks(text: str) -> str:
    """reST ``::`` literal blocks -> fenced code (Python when it parses as Python)."""
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.rstrip()
        if not stripped.endswith("::") or stripped.endswith(":::") or line.startswith(" "):
            out.append(line)
            i += 1
            continue
        if stripped != "::":
            out.append(stripped[:-1])  # "Like this::" -> "Like this:"
        i += 1
        block: list[str] = []
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith(" ")):
            block.append(lines[i])
            i += 1
        code = textwrap.dedent("\n".join(block)).strip("\n")
        if not code:
            continue
        out += ["", f"```{_language(code)}", code, "```", ""]
    return "\n".join(out)


def _language(code: str) -> str:
    try:
        compile(code, "<docstring>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError:
        return "text"
    return "python"
