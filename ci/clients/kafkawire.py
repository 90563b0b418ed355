"""One Kafka request at an exact version, for the conformance tests: the
messages and their codec are kafka-python's (generated from Kafka's own
message schemas), so a test can ask what a given client version would ask
and read every field of the answer.

    from kafka.protocol.metadata import MetadataRequest
    resp = call(addr, MetadataRequest(topics=None), version=12)
"""

import itertools
import socket
import struct


_correlation = itertools.count(1)


def _read_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def call(addr, request, version, timeout=30.0):
    """Sends `request` at `version` to `addr` (host:port) on a new
    connection and returns the decoded response."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        return exchange(sock, request, version)


def exchange(sock, request, version):
    """One request and its response on an open connection."""
    correlation_id = next(_correlation)
    request.API_VERSION = version
    request.with_header(correlation_id=correlation_id, client_id="kaas-conformance")
    sock.sendall(request.encode(version=version, header=True, framed=True))
    (size,) = struct.unpack(">i", _read_exact(sock, 4))
    payload = _read_exact(sock, size)
    response_class = type(request).__name__.replace("Request", "Response")
    module = __import__(type(request).__module__, fromlist=[response_class])
    response = getattr(module, response_class).decode(payload, version=version, header=True)
    assert response.header.correlation_id == correlation_id
    return response
