"""jobs.py - the list elements one caller's job becomes, as ferryctl enqueue
builds them (src/common/chunk.c): a "data" array of more than chunk_rows rows is
split into jobs {"id":"ID:INDEX",<the other members>,"data":[rows]}; with a
cache, each job's data (or, without "data", the whole document) becomes the
value of PREFIX:{QUEUE}:cache:ID and the job names it. Built from the
caller's objects; a job given as JSON text is pushed byte for byte. ID is the
job's "id", else the SHA-1 of its document (as ferryctl prints it)."""

import hashlib
import json
from dataclasses import dataclass

from .errors import InvalidJobError

ID_MAX = 128          # src/common/job.h JOB_ID_MAX
OWN_KEYS = ("id", "data", "cache_key")


@dataclass
class Element:
    """One list element, the caller's job it came from, its cache key."""
    element: bytes
    id: str
    index: int
    key: str = None
    value: bytes = b""


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
    return [Element(raw, _name(doc_id, raw), index)]


def build(doc, index, cache_prefix, chunk_rows, given_id=None):
    """The elements of job `doc` (the caller's `index`). cache_prefix is
    "PREFIX:{QUEUE}:cache:" with a cache, else None."""
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
        last = "%s:%d" % (name, len(data) // chunk_rows)
        if len(last.encode()) > ID_MAX:
            raise InvalidJobError(index, "the job id is too long to number "
                                  "its chunks (\"%s:N\" must fit in %d bytes)"
                                  % (name, ID_MAX))
        return [_element(index, "%s:%d" % (name, i), others,
                         data[at:at + chunk_rows], True, cache_prefix)
                for i, at in enumerate(range(0, len(data), chunk_rows))]
    if cache_prefix:
        if "data" in doc:
            return [_element(index, name, others, data, True, cache_prefix)]
        return [_element(index, name, {}, doc, False, cache_prefix)]
    return [Element(raw, name, index)]


def _element(index, job_id, others, rows, has_data, cache_prefix):
    if not cache_prefix:
        job = dict({"id": job_id}, **others)
        job["data"] = rows
        return Element(encode(job), job_id, index)
    key = cache_prefix + job_id
    job = dict({"id": job_id}, **(others if has_data else {}))
    job["cache_key"] = key
    return Element(encode(job), job_id, index, key, encode(rows))
