"""jobs.py - the list elements one caller's job becomes, as ferryctl enqueue
builds them (src/format/chunk.c): a "data" array of more than chunk_rows rows is
split into jobs {"id":"ID:INDEX",<the other members>,"data":[rows]}; with a
cache, each job's "data" becomes the value of a key of its own,
PREFIX:{QUEUE}:cache:<16 hex digits, random>.<n>, and the job names it (a job
without "data" is refused: its members are its row and what ferry reads of
the job). Built from the caller's objects; a job given as JSON text is
pushed byte for byte. ID is the job's "id", else the SHA-1 of its document
(as ferryctl prints it). A job that names a cache_key itself (the
application's key) carries it as named_key, so that enqueue.lua protects
it."""

import hashlib
import json
import os
from dataclasses import dataclass

from .errors import InvalidJobError

ID_MAX = 128          # src/format/job.h JOB_ID_MAX
OWN_KEYS = ("id", "data", "cache_key")
BARE_REFUSAL = ("a job without \"data\" cannot be cached: its members are "
                "its row and also what ferry reads of the job (op, the table "
                "member); put the rows under \"data\", or enqueue it without "
                "the cache")     # src/format/chunk.h CHUNK_BARE_REFUSAL


@dataclass
class Element:
    """One list element, the caller's job it came from, the cache key it
    writes (key, value) or the application's key it names (named_key), and
    the element's own "id" as a worker reads it ("" without one: a queue
    that keeps ids deduplicates by it), and its layout: " F+C" when it
    holds rows F to F+C-1 of a document's "data" array (enqueue.lua
    refuses the document sent again in other chunks), else ""."""
    element: bytes
    id: str
    index: int
    key: str = None
    value: bytes = b""
    named_key: str = None
    own_id: str = ""
    layout: str = ""


def encode(obj):
    """Compact JSON, UTF-8 as it is (what a worker reads back)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode()


def _name(doc_id, raw):
    if doc_id is None or doc_id == "":
        return hashlib.sha1(raw).hexdigest()
    return str(doc_id)


def _text_job(text, index, cache, given_id, chunk_rows):
    raw = text.encode() if isinstance(text, str) else bytes(text)
    if cache or given_id is not None:
        raise InvalidJobError(index, "a job given as JSON text is pushed as "
                              "it is: pass a dict to cache it or give it an id")
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        doc = None          # enqueue.lua says what is wrong with it
    doc_id = doc.get("id") if isinstance(doc, dict) else None
    if not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool):
        doc_id = None
    data = doc.get("data") if isinstance(doc, dict) else None
    if isinstance(data, list) and len(data) > chunk_rows:
        raise InvalidJobError(index, "its \"data\" has %d rows, over "
                              "chunk_rows %d: pass it as a dict to split it"
                              % (len(data), chunk_rows))
    named = doc.get("cache_key") if isinstance(doc, dict) else None
    return [Element(raw, _name(doc_id, raw), index,
                    named_key=named if isinstance(named, str) else None,
                    own_id="" if doc_id is None else str(doc_id),
                    layout=_layout(data, 0))]


KEY_GROUP = 1000       # src/format/chunk.h CHUNK_KEY_GROUP


class CacheKeys:
    """The keys of ferry's own of one call: "<prefix><16 hex>.<n>", a new
    random group every KEY_GROUP keys (enqueue.lua counts a group in one
    entry of the protected hash)."""

    def __init__(self, prefix):
        self.prefix = prefix
        self.count = 0
        self.group = ""

    def next(self):
        n = self.count % KEY_GROUP
        self.count += 1
        if n == 0:
            self.group = os.urandom(8).hex()
        return "%s%s.%d" % (self.prefix, self.group, n)


def build(doc, index, cache_prefix, chunk_rows, given_id=None):
    """The elements of job `doc` (the caller's `index`). cache_prefix is
    the call's CacheKeys with a cache, else None."""
    if isinstance(doc, (str, bytes, bytearray)):
        return _text_job(doc, index, cache_prefix, given_id, chunk_rows)
    if not isinstance(doc, dict):
        raise InvalidJobError(index, "job is not a JSON object")
    if given_id is not None:
        if "id" in doc and doc["id"] != given_id:
            raise InvalidJobError(index, "id=%r but the job's \"id\" is %r"
                                  % (given_id, doc["id"]))
        doc = dict({"id": given_id}, **{k: v for k, v in doc.items()
                                       if k != "id"})
    doc_id = doc.get("id")
    if doc_id is not None and (not isinstance(doc_id, (str, int)) or
                               isinstance(doc_id, bool)):
        raise InvalidJobError(index, "job id is not a string or integer")
    try:
        raw = encode(doc)
    except (TypeError, ValueError) as e:
        raise InvalidJobError(index, "cannot be written as JSON: %s" % e)
    name = _name(doc_id, raw)
    data = doc.get("data")
    split = isinstance(data, list) and len(data) > chunk_rows
    if "cache_key" in doc and (cache_prefix or split):
        raise InvalidJobError(index, "the job names a cache_key already: it "
                              "cannot be %s" % ("cached again (cache=True)"
                              if cache_prefix else "split into chunks (its "
                              "key would be shared)"))
    others = {k: v for k, v in doc.items() if k not in OWN_KEYS}
    if split:
        # the first chunk goes by the document's id, the others by their
        # first row: the same id for the same rows (src/format/chunk.c)
        last = "%s:%d" % (name, (len(data) - 1) // chunk_rows * chunk_rows)
        if len(last.encode()) > ID_MAX:
            raise InvalidJobError(index, "the job id is too long to name its "
                                  "chunks (\"%s\", its last chunk's, must "
                                  "fit in %d bytes)" % (last, ID_MAX))
        return [_element(index, name if at == 0 else "%s:%d" % (name, at),
                         others, data[at:at + chunk_rows], cache_prefix, at)
                for at in range(0, len(data), chunk_rows)]
    if cache_prefix:
        if "data" not in doc:
            raise InvalidJobError(index, BARE_REFUSAL)
        return [_element(index, name, others, data, cache_prefix, 0)]
    named = doc.get("cache_key")
    return [Element(raw, name, index,
                    named_key=named if isinstance(named, str) else None,
                    own_id="" if doc_id is None or doc_id == "" else
                    str(doc_id), layout=_layout(data, 0))]


def _layout(rows, first):
    """" F+C" for rows (a list) from row `first` of a document, else ""."""
    return " %d+%d" % (first, len(rows)) if isinstance(rows, list) else ""


def _element(index, job_id, others, rows, cache_prefix, first):
    job = dict({"id": job_id}, **others)
    layout = _layout(rows, first)
    if not cache_prefix:
        job["data"] = rows
        return Element(encode(job), job_id, index, own_id=job_id,
                       layout=layout)
    # a key of its own: no later job (of this id, byte-identical) writes it
    key = cache_prefix.next()
    job["cache_key"] = key
    return Element(encode(job), job_id, index, key, encode(rows),
                   own_id=job_id, layout=layout)
