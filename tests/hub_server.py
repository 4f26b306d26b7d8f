#!/usr/bin/env python3
"""A small Hugging Face hub stand-in for tests/test_hub.sh, on 127.0.0.1 only.

Serves the model repos found under --root (ROOT/org/name/<files>, or
ROOT/name/<files> for a name without org) with the parts of the hub protocol
huggingface_hub and tfcore use:

  HEAD/GET /{repo}/resolve/{revision}/{file}
      revision: "main" or the repo's commit (sha1 of its files' digests)
      small files: 200, ETag "<git blob sha1>", Content-Length, X-Repo-Commit
      LFS files (*.safetensors, *.bin): 302 to an absolute /lfs/<sha256>,
      X-Linked-Etag "<sha256>", X-Linked-Size, X-Repo-Commit
      missing file: 404 X-Error-Code: EntryNotFound (with X-Repo-Commit)
      missing repo or revision: 404 RepoNotFound / RevisionNotFound
      /old-{org}/{name}/...: 307 relative redirect to /{org}/{name}/... (a renamed repo)
  GET /lfs/<sha256>                 the bytes, with Range support (206)
  GET /api/models/{repo}/revision/{revision}   what snapshot_download asks

Fault modes (--fault, comma-separated), for the first LFS GET unless said:
  reset     send half of the file, then close the connection
  badsum    serve the file with one byte changed (every time)
  stall     send a few bytes, then nothing for 60 s
  error500  answer the first two resolve requests with 500
  slow      send LFS files in small pieces, slowly (every time)
--token T: resolve requests without "Authorization: Bearer T" get 401 GatedRepo.
--log FILE: one line per LFS body started: "<sha256> <status> <bytes>".
The port is written to --port-file once the server listens. The serving of
bytes (Range, the log, reset/stall/slow) is tests/loopback_http.py's.
"""
import argparse
import hashlib
import json
import os
import sys
import threading

import loopback_http

LFS_SUFFIXES = (".safetensors", ".bin")


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repo:
    def __init__(self, folder):
        self.files = {}
        for dirpath, _, names in os.walk(folder):
            for n in names:
                p = os.path.join(dirpath, n)
                rel = os.path.relpath(p, folder)
                with open(p, "rb") as f:
                    self.files[rel] = f.read()
        h = hashlib.sha1()
        for rel in sorted(self.files):
            h.update(rel.encode() + b"\0" + hashlib.sha256(self.files[rel]).digest())
        self.commit = h.hexdigest()


class State:
    def __init__(self, args):
        self.args = args
        self.faults = set(f for f in (args.fault or "").split(",") if f)
        self.lock = threading.Lock()
        self.lfs_gets = 0
        self.resolve_count = 0
        self.repos = {}
        self.blobs = {}
        for org in sorted(os.listdir(args.root)):
            p = os.path.join(args.root, org)
            if not os.path.isdir(p):
                continue
            if os.path.exists(os.path.join(p, "config.json")) or not any(
                    os.path.isdir(os.path.join(p, x)) for x in os.listdir(p)):
                self.add(org, p)
            else:
                for name in sorted(os.listdir(p)):
                    self.add(org + "/" + name, os.path.join(p, name))

    def add(self, repo_id, folder):
        r = Repo(folder)
        self.repos[repo_id] = r
        for data in r.files.values():
            self.blobs[hashlib.sha256(data).hexdigest()] = data


class Handler(loopback_http.Handler):
    server_version = "hub-test"

    @property
    def st(self):
        return self.server.state

    def error(self, code, error_code, extra=None):
        h = {"X-Error-Code": error_code, "X-Error-Message": error_code}
        h.update(extra or {})
        self.send(code, h, json.dumps({"error": error_code}).encode())

    def split_repo(self, parts, marker):
        """parts before `marker` form the repo id"""
        if marker not in parts:
            return None, None
        i = parts.index(marker)
        return "/".join(parts[:i]), parts[i + 1:]

    def route(self):
        path = self.path.split("?", 1)[0]
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["lfs"] and len(parts) == 2:
            return self.lfs(parts[1])
        if parts[:2] == ["api", "models"]:
            repo_id, rest = self.split_repo(parts[2:], "revision")
            return self.api(repo_id, rest)
        repo_id, rest = self.split_repo(parts, "resolve")
        if repo_id is None or len(rest) < 2:
            return self.send(404, {}, b"not found")
        if repo_id.startswith("old-"):
            return self.send(307, {"Location": "/" + repo_id[4:] + "/resolve/" + "/".join(rest)})
        return self.resolve(repo_id, rest[0], "/".join(rest[1:]))

    def authorised(self):
        tok = self.st.args.token
        if not tok:
            return True
        if self.headers.get("Authorization") == "Bearer " + tok:
            return True
        self.error(401, "GatedRepo")
        return False

    def find(self, repo_id, revision):
        repo = self.st.repos.get(repo_id)
        if repo is None:
            self.error(404, "RepoNotFound")
            return None
        if revision not in ("main", repo.commit):
            self.error(404, "RevisionNotFound")
            return None
        return repo

    def resolve(self, repo_id, revision, filename):
        with self.st.lock:
            self.st.resolve_count += 1
            n = self.st.resolve_count
        if "error500" in self.st.faults and n <= 2:
            return self.send(500, {}, b"internal error")
        if not self.authorised():
            return
        repo = self.find(repo_id, revision)
        if repo is None:
            return
        data = repo.files.get(filename)
        if data is None:
            return self.error(404, "EntryNotFound", {"X-Repo-Commit": repo.commit})
        if filename.endswith(LFS_SUFFIXES):
            sha = hashlib.sha256(data).hexdigest()
            host = "http://127.0.0.1:%d" % self.server.server_address[1]
            return self.send(302, {
                "Location": host + "/lfs/" + sha,
                "X-Repo-Commit": repo.commit,
                "X-Linked-Etag": '"%s"' % sha,
                "X-Linked-Size": str(len(data)),
                "ETag": '"%s"' % git_blob_sha1(data),
            })
        self.send(200, {"X-Repo-Commit": repo.commit, "ETag": 'W/"%s"' % git_blob_sha1(data),
                        "Content-Type": "application/octet-stream"}, data)

    def api(self, repo_id, rest):
        if not self.authorised():
            return
        repo = self.find(repo_id, "/".join(rest or []) or "main")
        if repo is None:
            return
        body = json.dumps({"id": repo_id, "modelId": repo_id, "sha": repo.commit,
                           "siblings": [{"rfilename": f} for f in sorted(repo.files)]}).encode()
        self.send(200, {"Content-Type": "application/json"}, body)

    def lfs(self, sha):
        data = self.st.blobs.get(sha)
        if data is None:
            return self.send(404, {}, b"no such object")
        faults = self.st.faults
        if "badsum" in faults:
            data = data[:-1] + bytes([data[-1] ^ 0xFF])
        with self.st.lock:
            self.st.lfs_gets += 1
            first = self.st.lfs_gets == 1
        self.send_bytes(data, self.st.args.log, sha, faults, lambda: first)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--fault", default="")
    ap.add_argument("--token", default="")
    ap.add_argument("--log", default="")
    ap.add_argument("--lifetime", type=float, default=300, help="stop after this many seconds")
    args = ap.parse_args()
    loopback_http.serve(Handler, args.port_file, args.lifetime, state=State(args))


if __name__ == "__main__":
    sys.exit(main())
