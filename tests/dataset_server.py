#!/usr/bin/env python3
"""A static file server for tests/test_datasets.sh, on 127.0.0.1 only.

GET/HEAD /<path> serves ROOT/<path> (Range "bytes=N-" gives 206), 404 when
there is no such file. --slow sends each body in 20 pieces 0.05 s apart (so
two clients overlap). --reset sends half of the first body, then closes the
connection (the client resumes with Range). --log FILE: one line "<path> <status> <bytes>" per body
started. The port is written to --port-file once the server listens; the
server stops after --lifetime seconds. The serving of bytes (Range, the log,
reset/slow) is tests/loopback_http.py's.
"""
import argparse
import os
import sys

import loopback_http


class Handler(loopback_http.Handler):
    server_version = "dataset-test"

    def route(self):
        args = self.server.args
        rel = self.path.split("?", 1)[0].lstrip("/")
        path = os.path.realpath(os.path.join(args.root, rel))
        if not path.startswith(os.path.realpath(args.root) + os.sep) or not os.path.isfile(path):
            return self.send(404, {}, b"not found")
        with open(path, "rb") as f:
            data = f.read()
        faults = [f for f, on in (("reset", args.reset), ("slow", args.slow)) if on]
        self.send_bytes(data, args.log, rel, faults, self.first_body)

    def first_body(self):
        with self.server.lock:
            first = not self.server.bodies
            self.server.bodies += 1
        return first


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", default="")
    ap.add_argument("--slow", action="store_true")
    ap.add_argument("--reset", action="store_true")
    ap.add_argument("--lifetime", type=float, default=300)
    args = ap.parse_args()
    loopback_http.serve(Handler, args.port_file, args.lifetime, args=args, bodies=0)


if __name__ == "__main__":
    sys.exit(main())
