"""What the tests' HTTP servers share (tests/hub_server.py, tests/dataset_server.py).

An HTTP/1.1 server on 127.0.0.1 only, on a free port written to a file once it
listens, that stops after a lifetime; a request handler with HEAD and GET
routed to one method, and the one way both servers send a file's bytes:

  Range "bytes=N-"   206 with Content-Range (416 past the end), else 200;
                     Accept-Ranges: bytes
  log                one line per body started, written before the bytes (the
                     client may be done before the server is)
  faults             reset: half of the body, then the connection closed;
                     stall: 16 bytes, then nothing for 60 s (both on the body
                     the caller says is the first); slow: every body in 20
                     pieces 0.05 s apart (so two clients overlap)
"""
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    """Subclasses define route(); self.server.lock guards shared counters."""
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):
        pass

    def do_HEAD(self):
        self.route()

    def do_GET(self):
        self.route()

    def route(self):
        raise NotImplementedError

    def send(self, code, headers=None, body=b""):
        """A whole response: status, headers, Content-Length, the body unless HEAD."""
        self.send_response(code)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def send_bytes(self, data, log_file="", log_name="", faults=(), first=lambda: False):
        """data with Range, the log line and the faults (module doc). first()
        is asked once the body is about to be sent: whether it is the first."""
        start = 0
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            if start >= len(data):
                return self.send(416, {"Content-Range": "bytes */%d" % len(data)})
        body = data[start:]
        self.send_response(206 if start else 200)
        if start:
            self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        if self.command == "HEAD":
            return None
        if log_file:
            with self.server.lock, open(log_file, "a") as f:
                f.write("%s %d %d\n" % (log_name, 206 if start else 200, len(body)))
        is_first = first()
        if is_first and "reset" in faults:
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return None
        if is_first and "stall" in faults:
            self.wfile.write(body[:16])
            self.wfile.flush()
            time.sleep(60)
            self.close_connection = True
            return None
        if "slow" in faults:
            step = max(1, len(body) // 20)
            for i in range(0, len(body), step):
                self.wfile.write(body[i:i + step])
                self.wfile.flush()
                time.sleep(0.05)
        else:
            self.wfile.write(body)
        return None


def serve(handler, port_file, lifetime, **attrs):
    """Serves handler on 127.0.0.1 (a free port, written to port_file once
    listening, atomically) until lifetime seconds have passed. attrs become
    attributes of the server (the handlers' self.server), beside `lock`."""
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    srv.lock = threading.Lock()
    for k, v in attrs.items():
        setattr(srv, k, v)
    tmp = port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write(str(srv.server_address[1]))
    os.replace(tmp, port_file)
    threading.Timer(lifetime, srv.shutdown).start()
    srv.serve_forever()
