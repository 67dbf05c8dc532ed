"""The ResourceManager delegation token of a secure cluster's application, for the AM's REST reads.

The AM's container holds no Kerberos ticket, only the tokens YARN gave it: the file
``HADOOP_TOKEN_FILE_LOCATION`` (Hadoop's ``Credentials``, ``HDTS``). On a secure cluster skein's
driver puts an RM delegation token (kind ``RM_DELEGATION_TOKEN``) among them, and the RM's web
services take one in a header, in Hadoop's URL-safe base64 of the token's ``Writable`` form:
``X-Hadoop-Delegation-Token`` (Hadoop's ``DelegationTokenAuthenticationHandler``, which the
RM's web endpoints run behind: seen on Hadoop 3.1.2, where the RM's own
``Hadoop-YARN-RM-Delegation-Token`` still got 401), both sent. So the AM reads the cluster's
room (gang admission) as the job's user without a ticket.
"""
from __future__ import annotations

import base64
import os
from typing import Dict, Iterator, List, Optional, Tuple

#: Hadoop's header for a delegation token (``DelegationTokenAuthenticator``), and the RM's own
#: (``RMAuthenticationFilter``).
TOKEN_HEADERS = ("X-Hadoop-Delegation-Token", "Hadoop-YARN-RM-Delegation-Token")
RM_TOKEN_KIND = b"RM_DELEGATION_TOKEN"

#: A token as Hadoop keeps it: (identifier, password, kind, service).
Token = Tuple[bytes, bytes, bytes, bytes]


def rm_token_header(path: Optional[str] = None) -> Dict[str, str]:
    """``{header: token}`` (both headers) for the RM delegation token of the container's token
    file ({} where there is none: a plain cluster, or a file this cannot read)."""
    path = path or os.environ.get("HADOOP_TOKEN_FILE_LOCATION") or ""
    try:
        with open(path, "rb") as f:
            data = f.read()
        tokens = read_credentials(data)
    except (OSError, ValueError, IndexError):
        return {}
    for token in tokens:
        if token[2] == RM_TOKEN_KIND:
            return {header: url_string(token) for header in TOKEN_HEADERS}
    return {}


def read_credentials(data: bytes) -> List[Token]:
    """The tokens of a Hadoop ``Credentials`` file: version 0 (``Writable``) or 1 (protobuf)."""
    if data[:4] != b"HDTS":
        raise ValueError("not a Hadoop token file")
    version, rest = data[4], data[5:]
    if version == 0:
        return list(_writable_tokens(rest))
    if version == 1:
        return list(_proto_tokens(rest))
    raise ValueError(f"token file version {version}")


def url_string(token: Token) -> str:
    """Hadoop's ``Token.encodeToUrlString``: URL-safe base64, unpadded, of its ``Writable`` form."""
    ident, password, kind, service = token
    raw = b"".join(write_vint(len(x)) + x for x in (ident, password, kind, service))
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# -- Hadoop's Writable encoding ------------------------------------------------------------------
def read_vint(data: bytes, at: int) -> Tuple[int, int]:
    """``WritableUtils.readVInt``: (value, next offset)."""
    first = data[at] - 256 if data[at] > 127 else data[at]
    if first >= -112:
        return first, at + 1
    negative = first < -120
    size = -(first + 120) if negative else -(first + 112)
    if at + 1 + size > len(data):
        raise ValueError("truncated")
    value = int.from_bytes(data[at + 1:at + 1 + size], "big")
    return (~value if negative else value), at + 1 + size


def write_vint(value: int) -> bytes:
    """``WritableUtils.writeVInt``."""
    if -112 <= value <= 127:
        return bytes([value & 0xFF])
    marker = -120 if value < 0 else -112
    if value < 0:
        value = ~value
    size = (value.bit_length() + 7) // 8
    return bytes([(marker - size) & 0xFF]) + value.to_bytes(size, "big")


def _field(data: bytes, at: int) -> Tuple[bytes, int]:
    size, at = read_vint(data, at)
    if size < 0 or at + size > len(data):
        raise ValueError("truncated")
    return data[at:at + size], at + size


def _writable_tokens(data: bytes) -> Iterator[Token]:
    count, at = read_vint(data, 0)
    for _ in range(count):
        _, at = _field(data, at)  # the alias
        ident, at = _field(data, at)
        password, at = _field(data, at)
        kind, at = _field(data, at)
        service, at = _field(data, at)
        yield ident, password, kind, service


# -- protobuf (CredentialsProto, length-delimited) --------------------------------------------------
def _varint(data: bytes, at: int) -> Tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7


def _messages(data: bytes) -> Iterator[Tuple[int, bytes]]:
    """(field number, bytes) of a message's length-delimited fields (others skipped)."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 2:
            size, at = _varint(data, at)
            yield number, data[at:at + size]
            at += size
        elif wire == 0:
            _, at = _varint(data, at)
        else:
            raise ValueError(f"unexpected wire type {wire}")


def _proto_tokens(data: bytes) -> Iterator[Token]:
    size, at = _varint(data, 0)
    for number, kv in _messages(data[at:at + size]):
        if number != 1:  # CredentialsProto.tokens
            continue
        for n, token in _messages(kv):
            if n == 2:  # CredentialsKVProto.token: TokenProto
                parts = dict(_messages(token))
                yield parts.get(1, b""), parts.get(2, b""), parts.get(3, b""), parts.get(4, b"")
