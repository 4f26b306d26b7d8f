#!/usr/bin/env python3
"""A static file server for tests/test_datasets.sh, on 127.0.0.1 only.

GET/HEAD /<path> serves ROOT/<path> (Range "bytes=N-" gives 206), 404 when
there is no such file. --slow sends each body in 20 pieces 0.05 s apart (so
two clients overlap). --reset sends half of the first body, then closes the
connection (the client resumes with Range). --log FILE: one line "<path> <status> <bytes>" per body
started. The port is written to --port-file once the server listens; the
server stops after --lifetime seconds.
"""
import argparse
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "dataset-test"

    def log_message(self, fmt, *a):
        pass

    def do_HEAD(self):
        self.serve()

    def do_GET(self):
        self.serve()

    def serve(self):
        args = self.server.args
        rel = self.path.split("?", 1)[0].lstrip("/")
        path = os.path.realpath(os.path.join(args.root, rel))
        if not path.startswith(os.path.realpath(args.root) + os.sep) or not os.path.isfile(path):
            body = b"not found"
            self.send_response(404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command == "GET":
                self.wfile.write(body)
            return
        with open(path, "rb") as f:
            data = f.read()
        start = 0
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", "bytes */%d" % len(data))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
        body = data[start:]
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if self.command == "HEAD":
            return
        if args.log:
            with self.server.lock, open(args.log, "a") as f:
                f.write("%s %d %d\n" % (rel, 206 if start else 200, len(body)))
        with self.server.lock:
            first = not self.server.bodies
            self.server.bodies += 1
        if first and args.reset:
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        if args.slow:
            step = max(1, len(body) // 20)
            for i in range(0, len(body), step):
                self.wfile.write(body[i:i + step])
                self.wfile.flush()
                time.sleep(0.05)
        else:
            self.wfile.write(body)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", default="")
    ap.add_argument("--slow", action="store_true")
    ap.add_argument("--reset", action="store_true")
    ap.add_argument("--lifetime", type=float, default=300)
    args = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.args = args
    srv.lock = threading.Lock()
    srv.bodies = 0
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.replace(tmp, args.port_file)
    threading.Timer(args.lifetime, srv.shutdown).start()
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
