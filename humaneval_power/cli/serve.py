"""``hepower serve``: the interactive planner in the browser (a local web app and its JSON API)."""
from __future__ import annotations

import argparse
import ipaddress
import sys

from ..errors import InputError

LOCAL_HOSTS = ("127.0.0.1", "localhost", "[::1]")  #: Host headers a server on localhost answers


def run(args: argparse.Namespace) -> int:
    """Start the server (until Ctrl-C)."""
    from dataclasses import replace

    try:
        import uvicorn

        from ..serve.app import create_app
        from ..serve.commands import Limits
    except ImportError as exc:
        raise InputError(f"hepower serve needs FastAPI and uvicorn ({exc.name} is missing): "
                         "pip install 'humaneval-power[serve]'") from None
    if not args.time_limit > 0:
        raise InputError(f"--time-limit must be > 0, got {args.time_limit:g}")
    if args.port > 65535:
        raise InputError(f"--port must be at most 65535, got {args.port}")
    _check_free(args.host, args.port)
    limits = replace(Limits(), time_limit=args.time_limit, max_sims=args.max_sims, max_jobs=args.max_jobs)
    if not _is_loopback(args.host):
        print(f"hepower: warning: listening on {args.host}: anyone who can reach this machine can run computations",
              file=sys.stderr)
    print(f"hepower: planner at http://{args.host}:{args.port}/ (Ctrl-C to stop)", file=sys.stderr)
    hosts = LOCAL_HOSTS if _is_loopback(args.host) else None  # on localhost: no DNS rebinding
    uvicorn.run(create_app(limits, hosts=hosts), host=args.host, port=args.port, log_level="warning",
                timeout_graceful_shutdown=3)  # Ctrl-C: open browser connections do not keep it running
    return 0


def _check_free(host: str, port: int) -> None:
    """A one-line error, before anything starts, when the address cannot be listened on."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        with socket.socket(infos[0][0], socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(infos[0][4])
    except OSError as exc:
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
