"""Test double: a stand-in for the Hugging Face Hub's API, for the simulation only.

Serves one private model repository from a directory at one commit, the way
huggingface_hub's snapshot_download reaches the Hub (HF_ENDPOINT): the tree of
a revision (/api/models/REPO/tree/REV), a revision's info
(/api/models/REPO/revision/REV) and each file (/REPO/resolve/REV/PATH, HEAD and
GET with ranges, X-Repo-Commit and ETag as the Hub sends them). The branch
`main` resolves to that commit. Every request must carry `Authorization: Bearer
TOKEN`: without it the repository does not exist, as the Hub answers for a
private one. Each request is logged as a JSON line (method, path, authorized),
never the token.

Usage: hf_hub_standin.py --root DIR --repo OWNER/NAME --revision SHA40 --token-file F
       --bind ADDR --port-file F --log F
Prints nothing; writes the port it listens on to --port-file once it serves.
"""

from __future__ import annotations

import argparse
import hashlib
import http.server
import json
import os
import pathlib
import re
import threading
import urllib.parse


def git_blob_id(data):
    """A file's git blob id, as the Hub lists and tags files stored in git (no LFS here: the files are small)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Repository:
    def __init__(self, root, repo, revision, token):
        self.root, self.repo, self.revision, self.token = pathlib.Path(root), repo, revision, token
        self.files = {str(path.relative_to(self.root)): path for path in sorted(self.root.rglob("*")) if path.is_file()}

    def commit(self, revision):
        return self.revision if revision in (self.revision, "main") else None

    def tree(self):
        entries = []
        for name, path in self.files.items():
            data = path.read_bytes()
            entries.append({"type": "file", "oid": git_blob_id(data), "size": len(data), "path": name})
        return entries


class Handler(http.server.BaseHTTPRequestHandler):
    server_version = "hf-hub-standin"
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):
        pass

    def _record(self, authorized):
        line = json.dumps({"method": self.command, "path": self.path, "authorized": authorized})
        with self.server.lock, open(self.server.log_path, "a") as log:
            log.write(line + "\n")

    def _error(self, status, code, message):
        body = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, payload):
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _route(self):
        repository = self.server.repository
        authorized = self.headers.get("Authorization", "") == f"Bearer {repository.token}"
        self._record(authorized)
        path = urllib.parse.unquote(urllib.parse.urlsplit(self.path).path)
        repo = re.escape(repository.repo)
        if repository.repo not in path:  # the client's other calls (huggingface_hub 2.x asks for more than the repo)
            return self._error(404, "EntryNotFound", "Not served by this stand-in")
        if not authorized:
            return self._error(401, "RepoNotFound", "Repository not found")
        if match := re.fullmatch(rf"/api/models/{repo}/tree/([^/]+)(/.*)?", path):
            if repository.commit(match.group(1)) is None:
                return self._error(404, "RevisionNotFound", f"Invalid rev id: {match.group(1)}")
            prefix = (match.group(2) or "").strip("/")
            return self._json([entry for entry in repository.tree() if entry["path"].startswith(prefix)])
        if match := re.fullmatch(rf"/api/models/{repo}/revision/([^/]+)", path):
            commit = repository.commit(match.group(1))
            if commit is None:
                return self._error(404, "RevisionNotFound", f"Invalid rev id: {match.group(1)}")
            return self._json({"id": repository.repo, "sha": commit, "private": True, "siblings": [{"rfilename": name} for name in repository.files]})
        if match := re.fullmatch(rf"/{repo}/resolve/([^/]+)/(.+)", path):
            commit = repository.commit(match.group(1))
            if commit is None:
                return self._error(404, "RevisionNotFound", f"Invalid rev id: {match.group(1)}")
            if match.group(2) not in repository.files:
                return self._error(404, "EntryNotFound", f"{match.group(2)} does not exist at {commit}")
            return self._file(repository.files[match.group(2)], commit)
        return self._error(404, "RepoNotFound", "Repository not found")

    def _file(self, path, commit):
        data = path.read_bytes()
        start = 0
        if match := re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", "")):
            start = min(int(match.group(1)), len(data))
        self.send_response(206 if start else 200)
        self.send_header("X-Repo-Commit", commit)
        self.send_header("ETag", f'"{git_blob_id(data)}"')
        self.send_header("Content-Length", str(len(data) - start))
        if start:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.end_headers()
        if self.command == "GET":
            self.wfile.write(data[start:])

    def do_GET(self):
        self._route()

    def do_HEAD(self):
        self._route()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--repo", required=True)
    parser.add_argument("--revision", required=True)
    parser.add_argument("--token-file", required=True)
    parser.add_argument("--bind", default="127.0.0.1")
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--log", required=True)
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer((args.bind, 0), Handler)
    server.repository = Repository(args.root, args.repo, args.revision, pathlib.Path(args.token_file).read_text().strip())
    server.log_path, server.lock = args.log, threading.Lock()
    port_file = pathlib.Path(args.port_file)
    port_file.with_suffix(".tmp").write_text(str(server.server_address[1]))
    os.replace(port_file.with_suffix(".tmp"), port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
