"""Loaded first by every Python process of the session's vLLM engine (tests/conftest.py puts this folder on its
PYTHONPATH): records, then refuses, non-loopback name resolutions and connections, as on a machine without a
network (one line each in $SOCIALRL_OUTBOUND_LOG; "probe <pid>" says it was loaded). tests/test_offline.py
reads the record."""

import ipaddress
import os
import socket

_LOG = os.environ["SOCIALRL_OUTBOUND_LOG"]


def _note(line):
    with open(_LOG, "a") as log:
        log.write(line + "\n")


def _is_local(host):
    if host is None:
        return True
    name = host.decode() if isinstance(host, bytes) else str(host)
    if name in ("", "localhost", "0.0.0.0", "::"):
        return True
    try:
        return ipaddress.ip_address(name.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


_getaddrinfo, _connect = socket.getaddrinfo, socket.socket.connect


def getaddrinfo(host, port, *args, **kwargs):
    if not _is_local(host):
        _note(f"resolve {host}:{port} (pid {os.getpid()})")
        raise socket.gaierror(socket.EAI_NONAME, "outbound connections are refused in this test")
    return _getaddrinfo(host, port, *args, **kwargs)


def connect(sock, address):
    if sock.family in (socket.AF_INET, socket.AF_INET6) and not _is_local(address[0]):
        _note(f"connect {address} (pid {os.getpid()})")
        raise ConnectionRefusedError("outbound connections are refused in this test")
    return _connect(sock, address)


socket.getaddrinfo = getaddrinfo
socket.socket.connect = connect
_note(f"probe {os.getpid()}")
