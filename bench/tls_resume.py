#!/usr/bin/env python3
"""What TLS session resumption saves a reconnect: full and resumed TLS 1.3
handshakes with one redis-server, alternating, timed from the TCP connect to
the first reply (PING). The library resumes the last connection's session on
every reconnect to a master that did not restart (MasterStats::tls_resumed);
this measures what that is worth on this machine.

    bench/tls_resume.py --port TLS_PORT --ca CA_FILE [--rounds N] [--rep R]

Prints one JSON line per repetition: the median microseconds of each kind.
"""
import argparse
import json
import socket
import ssl
import statistics
import time


def handshake_us(context, port, session):
    start = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname="127.0.0.1", session=session) as tls:
            tls.sendall(b"PING\r\n")
            if tls.recv(64) != b"+PONG\r\n":
                raise RuntimeError("no PONG")
            # TLS 1.3 sends its tickets after the handshake: the session is
            # whole once a reply was read.
            return (time.perf_counter() - start) * 1e6, tls.session, tls.session_reused


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ca", required=True)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--rep", type=int, default=3)
    args = parser.parse_args()

    context = ssl.create_default_context(cafile=args.ca)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    for rep in range(1, args.rep + 1):
        full, resumed = [], []
        _, session, _ = handshake_us(context, args.port, None)
        for _ in range(args.rounds):
            us, _, reused = handshake_us(context, args.port, None)
            if reused:
                raise RuntimeError("a handshake without a session was resumed")
            full.append(us)
            us, session, reused = handshake_us(context, args.port, session)
            if not reused:
                raise RuntimeError("the server did not resume the session")
            resumed.append(us)
        full_p50, resumed_p50 = statistics.median(full), statistics.median(resumed)
        print(json.dumps({
            "bench": "tls_resume", "rep": rep, "rounds": args.rounds,
            "full_p50_us": round(full_p50, 1), "resumed_p50_us": round(resumed_p50, 1),
            "ratio": round(resumed_p50 / full_p50, 3),
        }), flush=True)


if __name__ == "__main__":
    main()
