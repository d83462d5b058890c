"""Versioned JSON files for graphs and schedules (docs/format.md).

Loading validates everything before returning; saving writes a temporary file
and renames it, so a crash never leaves a half-written file behind.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import tempfile
import zlib
from typing import Any

from overlapsat.errors import GraphError
from overlapsat.gc_pause import paused_gc
from overlapsat.graph import Buffer, Graph, Node, NodeKind

GRAPH_FORMAT = "overlapsat-graph"
SCHEDULE_FORMAT = "overlapsat-schedule"
VERSION = 1  # schedules; graphs without pre-fusion data are also written as version 1
GRAPH_VERSION = 3  # graphs whose waits or launches cost time (docs/format.md)
KEY_VERSION = 4  # graphs whose collectives carry a bucket key; versions 1 to 4 are read
PREFUSION_VERSION = 2  # graphs with `prefusion` or `estimate` and no stream costs


STDOUT = "-"  # a path of "-" is standard output, for every writer


def write_target(path: str) -> str:
    """Where writing `path` lands: a symbolic link is written through (its target is replaced, the link stays)."""
    return os.path.realpath(path) if os.path.islink(path) else path


def check_writable(path: str | os.PathLike[str]) -> str:
    """The directory `path` would be written to; a GraphError naming `path` if it cannot be, checked before any
    work by a real probe (a file created and removed there: `os.access` says yes to root on a read-only disk).

    Only a regular file (or nothing) may stand at the target: a device, a FIFO, a socket or a directory is
    refused rather than replaced by the rename that writes a file. `-` is standard output."""
    path = os.fspath(path)
    if path == STDOUT:
        return STDOUT
    target = write_target(path)
    d = os.path.dirname(os.path.abspath(target))
    if not os.path.isdir(d):
        raise GraphError(f"cannot write {path!r}: directory {d!r} does not exist")
    if os.path.isdir(target):
        raise GraphError(f"cannot write {path!r}: it is a directory")
    if os.path.exists(target) and not os.path.isfile(target):
        raise GraphError(f"cannot write {path!r}: it is not a regular file (a device, FIFO or socket); "
                         "overlapsat writes whole files, and '-' is standard output")
    try:
        fd, probe = tempfile.mkstemp(prefix=".overlapsat-probe-", dir=d)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise GraphError(f"cannot write {path!r}: {e.strerror or e} in {d!r}") from None
    return d


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write `text` whole or not at all: a temporary file beside the target, then a rename; `-` is stdout."""
    path = os.fspath(path)
    if path == STDOUT:
        if text.endswith("\n"):
            text = text[:-1]
        print(text, flush=True)
        return
    d = check_writable(path)
    target = write_target(path)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=d)
    try:
        if path.endswith(".gz"):  # compressed, as the corpus files are
            with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
                f.write(text.encode("utf-8"))
        else:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):  # the user's path, not our temporary file
            raise GraphError(f"cannot write {path!r}: {e.strerror or e}") from None
        raise


def read_json(path: str | os.PathLike[str], what: str) -> dict[str, Any]:
    """A JSON object from `path`; any failure is a GraphError naming the file."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as raw:
            blob = raw.read()
        if blob[:2] == b"\x1f\x8b":  # gzip, whatever the file is called
            blob = gzip.decompress(blob)
        data = json.loads(blob.decode("utf-8"))
    except FileNotFoundError:
        raise GraphError(f"{what} file {path!r} does not exist") from None
    except IsADirectoryError:
        raise GraphError(f"{what} file {path!r} is a directory") from None
    except json.JSONDecodeError as e:
        raise GraphError(f"{what} file {path!r} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}") from None
    except (UnicodeDecodeError, OSError, EOFError, zlib.error) as e:
        raise GraphError(f"cannot read {what} file {path!r}: {e}") from None
    except RecursionError:
        raise GraphError(f"{what} file {path!r}: JSON nested too deeply to read") from None
    except ValueError as e:  # e.g. an integer of thousands of digits (Python's int_max_str_digits)
        raise GraphError(f"{what} file {path!r}: {e}") from None
    if not isinstance(data, dict):
        raise GraphError(f"{what} file {path!r}: top level must be a JSON object")
    return data


def graph_to_dict(g: Graph) -> dict[str, Any]:
    nodes = []
    for nd in g.nodes:
        d: dict[str, Any] = {"name": nd.name, "kind": nd.kind.value, "duration": nd.duration}
        if nd.kind is NodeKind.COLLECTIVE:
            d.update(group=nd.group, op=nd.op, bytes=nd.nbytes, group_size=nd.group_size)
            if nd.launch:
                d["launch"] = nd.launch
            if nd.bucket_key is not None:
                d["bucket_key"] = nd.bucket_key
        elif nd.kind is NodeKind.WAIT:
            d["collective"] = nd.collective
        if nd.flops:
            d["flops"] = nd.flops
        if nd.bytes_accessed:
            d["bytes_accessed"] = nd.bytes_accessed
        if nd.gemm_like:
            d["gemm_like"] = True
        if nd.estimate is not None:
            d["estimate"] = nd.estimate
        nodes.append(d)
    bufs = []
    for b in g.buffers:
        d = {"name": b.name, "producer": b.producer, "consumers": list(b.consumers),
             "size_alloc": b.size_alloc, "size_free": b.size_free}
        if b.output:
            d["output"] = True
        if b.freeable_input:
            d["freeable_input"] = True
        bufs.append(d)
    v2 = bool(g.prefusion) or any(nd.estimate is not None for nd in g.nodes)
    # a reader of an earlier version refuses the file rather than drop what it cannot use
    version = (KEY_VERSION if any(nd.bucket_key is not None for nd in g.nodes) else GRAPH_VERSION
               if g.has_stream_costs else PREFUSION_VERSION if v2 else VERSION)
    out = {"format": GRAPH_FORMAT, "version": version, "name": g.name,
           "nodes": nodes, "buffers": bufs,
           "edges": [list(e) for e in g.edges], "fake_edges": [list(e) for e in g.fake_edges],
           "implied_edges": [list(e) for e in g.implied_edges],
           "atomic_groups": [list(a) for a in g.atomic_groups],
           "meta": g.meta}
    if g.prefusion:
        out["prefusion"] = [[m, f, list(ps)] for m, f, ps in g.prefusion]
    return out


_ABSENT = object()


def _field(obj: dict[str, Any], key: str, where: str, types: type | tuple[type, ...], default: Any = ...) -> Any:
    v = obj.get(key, _ABSENT)
    t = type(v)
    if t is types or (types is _NUM and (t is int or t is float)):  # the common case, exactly a type asked for
        return v
    if v is _ABSENT:
        if default is ...:
            raise GraphError(f"{where}: missing field {key!r}")
        return default
    if isinstance(v, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise GraphError(f"{where}.{key}: expected {_tname(types)}, got {v!r}")
    if not isinstance(v, types):
        raise GraphError(f"{where}.{key}: expected {_tname(types)}, got {type(v).__name__} {v!r}")
    return v


def _tname(t: type | tuple[type, ...]) -> str:
    ts = t if isinstance(t, tuple) else (t,)
    return " or ".join(x.__name__ for x in ts)


_NUM = (int, float)
# every field a graph file may hold (docs/format.md); any other is refused by name (decision 33)
GRAPH_FIELDS = frozenset({"format", "version", "name", "nodes", "buffers", "edges", "fake_edges", "implied_edges",
                          "atomic_groups", "meta", "prefusion"})
_COMMON = {"name", "kind", "duration", "flops", "bytes_accessed", "gemm_like", "estimate"}
NODE_FIELDS = {NodeKind.COMPUTE: frozenset(_COMMON),
               NodeKind.COLLECTIVE: frozenset(_COMMON | {"group", "op", "bytes", "group_size", "launch", "bucket_key"}),
               NodeKind.WAIT: frozenset(_COMMON | {"collective"})}
BUFFER_FIELDS = frozenset({"name", "producer", "consumers", "size", "size_alloc", "size_free", "output",
                           "freeable_input"})


def _known(obj: dict[str, Any], fields: frozenset[str], where: str) -> None:
    """Refuse a field this format does not have: a misspelling would otherwise fall back to a default."""
    if fields.issuperset(obj):
        return
    unknown = sorted(set(obj) - fields)
    if unknown:
        raise GraphError(f"{where}: unknown field{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
                         f"(this object takes {', '.join(sorted(fields))})")


def graph_from_dict(data: dict[str, Any], source: str = "<dict>") -> Graph:
    where = source
    if "format" not in data and isinstance(data.get("graph"), dict):  # a corpus file: the graph and torch's orders
        data = data["graph"]
    fmt = data.get("format")
    if fmt != GRAPH_FORMAT:
        raise GraphError(f"{where}: field 'format' must be {GRAPH_FORMAT!r}, got {fmt!r}")
    ver = data.get("version")
    if ver not in (VERSION, PREFUSION_VERSION, GRAPH_VERSION, KEY_VERSION) or isinstance(ver, bool):
        raise GraphError(f"{where}: unsupported version {ver!r} (this overlapsat reads versions {VERSION} to "
                         f"{KEY_VERSION})")
    _known(data, GRAPH_FIELDS, where)
    raw_nodes = _field(data, "nodes", where, list)
    nodes: list[Node] = []
    for i, d in enumerate(raw_nodes):
        w = f"{where}: nodes[{i}]"
        if not isinstance(d, dict):
            raise GraphError(f"{w}: expected an object")
        name = _field(d, "name", w, str)
        w = f"{where}: node {name!r}"
        kind_s = _field(d, "kind", w, str)
        try:
            kind = NodeKind(kind_s)
        except ValueError:
            raise GraphError(f"{w}.kind: {kind_s!r} is not one of compute, collective, wait") from None
        _known(d, NODE_FIELDS[kind], w)
        # a compute node or collective without a duration is an error, not 0 (a wait costs 0 unless it says)
        kw: dict[str, Any] = dict(duration=float(_field(d, "duration", w, _NUM, 0.0 if kind is NodeKind.WAIT else ...)),
                                  flops=float(_field(d, "flops", w, _NUM, 0.0)),
                                  bytes_accessed=float(_field(d, "bytes_accessed", w, _NUM, 0.0)),
                                  gemm_like=bool(_field(d, "gemm_like", w, bool, False)))
        if ver >= PREFUSION_VERSION and "estimate" in d:
            est = _field(d, "estimate", w, _NUM)
            if not (math.isfinite(est) and est >= 0):
                raise GraphError(f"{w}.estimate: must be finite and >= 0, got {est!r}")
            kw["estimate"] = float(est)
        if kind is NodeKind.COLLECTIVE:
            kw.update(group=_field(d, "group", w, str), op=_field(d, "op", w, str, "all_reduce"),
                      nbytes=_field(d, "bytes", w, int, 0), group_size=_field(d, "group_size", w, int, 1))
            if "launch" in d:
                if ver < GRAPH_VERSION:
                    raise GraphError(f"{w}.launch: launch costs need graph format version {GRAPH_VERSION}, "
                                     f"the file says {ver}")
                kw["launch"] = float(_field(d, "launch", w, _NUM))
            if "bucket_key" in d:
                if ver < KEY_VERSION:
                    raise GraphError(f"{w}.bucket_key: bucket keys need graph format version {KEY_VERSION}, "
                                     f"the file says {ver}")
                kw["bucket_key"] = _field(d, "bucket_key", w, str)
        elif kind is NodeKind.WAIT:
            kw["collective"] = _field(d, "collective", w, str)
            if kw["duration"] and ver < GRAPH_VERSION:
                raise GraphError(f"{w}.duration: a wait costs nothing before graph format version {GRAPH_VERSION} "
                                 f"(the file says {ver}), got {kw['duration']!r}")
        nodes.append(Node(name, kind, **kw))
    bufs: list[Buffer] = []
    for i, d in enumerate(_field(data, "buffers", where, list, [])):
        w = f"{where}: buffers[{i}]"
        if not isinstance(d, dict):
            raise GraphError(f"{w}: expected an object")
        name = _field(d, "name", w, str)
        w = f"{where}: buffer {name!r}"
        _known(d, BUFFER_FIELDS, w)
        prod = _field(d, "producer", w, (str, type(None)), None)
        cons = _field(d, "consumers", w, list, [])
        if not all(isinstance(c, str) for c in cons):
            raise GraphError(f"{w}.consumers: expected a list of node names")
        size = _field(d, "size", w, int, 0)  # the shorthand for equal sizes: an int like the others
        sa = _field(d, "size_alloc", w, int, size)
        sf = _field(d, "size_free", w, int, sa)
        bufs.append(Buffer(name, prod, tuple(cons), sa, sf, output=bool(_field(d, "output", w, bool, False)),
                           freeable_input=bool(_field(d, "freeable_input", w, bool, False))))
    edges: dict[str, list[tuple[str, str]]] = {"edges": [], "fake_edges": [], "implied_edges": []}
    for key, out in edges.items():
        for i, e in enumerate(_field(data, key, where, list, [])):
            if not (isinstance(e, list) and len(e) == 2 and all(isinstance(x, str) for x in e)):
                raise GraphError(f"{where}: {key}[{i}]: expected [before, after] node names, got {e!r}")
            out.append((e[0], e[1]))
    atomic = []
    for i, a in enumerate(_field(data, "atomic_groups", where, list, [])):
        if not (isinstance(a, list) and all(isinstance(x, str) for x in a)):
            raise GraphError(f"{where}: atomic_groups[{i}]: expected a list of node names")
        atomic.append(tuple(a))
    meta = _field(data, "meta", where, dict, {})
    name = _field(data, "name", where, str, "graph")
    prefusion = []
    for i, e in enumerate(_field(data, "prefusion", where, list, []) if ver >= PREFUSION_VERSION else []):
        if not (isinstance(e, list) and len(e) == 3 and isinstance(e[0], str) and isinstance(e[1], str)
                and isinstance(e[2], list) and all(isinstance(x, str) for x in e[2])):
            raise GraphError(f"{where}: prefusion[{i}]: expected [member, fused node, [members before it]], got {e!r}")
        prefusion.append((e[0], e[1], tuple(e[2])))
    try:
        return Graph(nodes, bufs, edges["edges"], atomic, name, meta, fake_edges=edges["fake_edges"],
                     implied_edges=edges["implied_edges"], prefusion=tuple(prefusion))
    except GraphError as e:
        raise GraphError(f"{where}: {e}", problems=e.problems) from None


def load_graph(path: str | os.PathLike[str]) -> Graph:
    with paused_gc():  # millions of small objects, all alive until the graph is built (gc_pause.py)
        return graph_from_dict(read_json(path, "graph"), source=os.fspath(path))


def as_graph(graph: Graph | str | os.PathLike[str]) -> Graph:
    """A `Graph`, or the graph file at a path (what the public calls accept); anything else is refused by name."""
    if isinstance(graph, Graph):
        return graph
    if isinstance(graph, (str, os.PathLike)):
        return load_graph(graph)
    raise GraphError(f"expected a Graph or the path of a graph file, got {type(graph).__name__} {graph!r:.80}")


def save_graph(g: Graph, path: str | os.PathLike[str]) -> None:
    atomic_write_text(path, json.dumps(graph_to_dict(g), separators=(",", ":")))


