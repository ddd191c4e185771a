"""A Hub on 127.0.0.1 for the round-trip tests: the part of the Hugging Face Hub's HTTP protocol huggingface_hub speaks
when it creates a repo, commits files (regular and LFS) and downloads them again.

huggingface_hub tests itself against a staging Hub; these machines reach only 127.0.0.1, so this module serves the
same requests from a temporary folder (standard library only: `http.server` and `threading`). It is a test double,
not a Hub: one user, model repos, one branch (`main`), no pull requests, no Xet storage (huggingface_hub uploads
through Xet whenever `hf_xet` is installed, so clients set `HF_HUB_DISABLE_XET=1` and use the git-LFS path).

Endpoints (huggingface_hub 2.x; the module each request comes from in brackets):
- `GET /api/whoami-v2` [hf_api.whoami]: the one fake user. It and every write need a token (`Bearer hf_...`).
- `POST /api/repos/create` [hf_api.create_repo]: a repo with an initial commit of `.gitattributes`, as the Hub makes;
  409 when it exists (`exist_ok=True` accepts that).
- `POST /api/validate-yaml` [create_commit, before a README.md is committed]: accepts; the tests parse the card.
- `GET /api/models/{repo}[/revision/{rev}]` [repo_info, model_info]: the head commit's sha and its files.
- `POST /api/models/{repo}/preupload/{rev}` [_commit_api._fetch_upload_modes]: each file's upload mode (`lfs` for
  binary files and the Hub's default LFS suffixes) and the oid of the committed file at that path, from which the
  client drops unchanged files (and skips a commit where nothing changed).
- `POST /{repo}.git/info/lfs/objects/batch` [lfs.post_lfs_batch_info]: the git-LFS batch API: an upload action per
  object the store lacks, whose `href` is a PUT on the storage server.
- `PUT {storage}/upload/{sha256}` [lfs._upload_single_part]: the object, refused unless its sha256 and size match.
- `POST /api/models/{repo}/commit/{rev}` [_commit_api._send_commit]: NDJSON lines `header`, `file` (base64),
  `lfsFile` (an uploaded object), `deletedFile`, `deletedFolder`; refused when an LFS object was never uploaded.
- `GET /api/models/{repo}/tree/{rev}[/{path}]` and `POST /api/models/{repo}/paths-info/{rev}` [list_repo_tree,
  get_paths_info]: file entries (`oid`, `size`, `lfs`).
- `GET /api/models/{repo}/commits/{rev}` [list_repo_commits]: the history, newest first.
- `HEAD|GET /{repo}/resolve/{rev}/{path}` [file_download]: a regular file with its git blob sha1 as ETag and
  `X-Repo-Commit`; an LFS file as a redirect to the storage server carrying `X-Linked-Etag` (its sha256),
  `X-Linked-Size` and `X-Repo-Commit`, as the Hub redirects to its CDN (another origin, so the client takes the
  file's metadata from the redirect itself).

Errors carry the `X-Error-Code` huggingface_hub maps to its exceptions (`RepoNotFound`, `RevisionNotFound`,
`EntryNotFound`), which transformers relies on to tell an optional file's absence from a failure.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

USER = "someone"
# The Hub's default .gitattributes routes these suffixes through LFS (a subset: what model repos hold).
LFS_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".h5", ".onnx", ".msgpack", ".model", ".pkl",
                ".npy", ".npz", ".zip", ".gz", ".tar", ".parquet", ".arrow")
GITATTRIBUTES = "".join(f"*{suffix} filter=lfs diff=lfs merge=lfs -text\n" for suffix in LFS_SUFFIXES).encode()
LFS_THRESHOLD = 10 * 1024 * 1024  # larger files go through LFS whatever their name


def git_blob_sha1(content: bytes) -> str:
    """The oid git gives a blob: the sha1 of `blob <size>\\0<content>` (huggingface_hub.utils.sha.git_hash)."""
    return hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()


@dataclass(frozen=True)
class StoredFile:
    """One file of a commit's tree: its content is the stored object `sha256`."""

    sha256: str
    size: int
    lfs: bool

    def oid(self, content: bytes) -> str:
        """The oid the Hub reports for the file (and huggingface_hub compares): sha256 for LFS, git sha1 otherwise."""
        return self.sha256 if self.lfs else git_blob_sha1(content)


@dataclass(frozen=True)
class Commit:
    sha: str
    parent: str | None
    title: str
    description: str
    files: dict[str, StoredFile]


@dataclass
class Repo:
    commits: list[Commit] = field(default_factory=list)  # oldest first; the last is main's head

    def resolve(self, revision: str) -> Commit | None:
        """The commit a revision names: `main` (the only branch) or a commit sha (7 characters or more)."""
        if revision == "main":
            return self.commits[-1]
        if len(revision) >= 7:
            return next((commit for commit in self.commits if commit.sha.startswith(revision)), None)
        return None


class HubError(Exception):
    """An HTTP error the handler answers with `X-Error-Code`, as the Hub does."""

    def __init__(self, status: int, message: str, code: str | None = None, **details: str) -> None:
        super().__init__(message)
        self.status, self.code, self.details = status, code, details


class LocalHub:
    """The Hub's state (repos and their commits, in memory; object contents in `root`) and two servers on
    127.0.0.1: the Hub API (`url`) and a storage server (`storage_url`) standing for the Hub's LFS bucket and CDN.
    Use as a context manager, or call `close()`."""

    def __init__(self, root: Path) -> None:
        self.objects = Path(root) / "objects"
        self.objects.mkdir(parents=True, exist_ok=True)
        self.repos: dict[str, Repo] = {}
        self.requests: list[str] = []  # "METHOD path" of every request ("METHOD storage:path" on the storage server)
        self._lock = threading.Lock()
        self._servers = [ThreadingHTTPServer(("127.0.0.1", 0), _handler(self, storage=storage))
                         for storage in (False, True)]
        self.url, self.storage_url = (f"http://127.0.0.1:{server.server_address[1]}" for server in self._servers)
        for server in self._servers:  # polling every 50 ms: close() returns at once
            threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()

    def __enter__(self) -> LocalHub:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()

    # -- what the tests read: the server's own record, not the client's ----------------------------------------------

    def commits(self, repo_id: str) -> list[Commit]:
        """The repo's history, oldest first."""
        return list(self.repos[repo_id].commits)

    def files(self, repo_id: str, revision: str = "main") -> dict[str, bytes]:
        """Path -> content of every file at `revision`."""
        commit = self.repos[repo_id].resolve(revision)
        return {path: self.read_object(stored.sha256) for path, stored in commit.files.items()}

    # -- storage ------------------------------------------------------------------------------------------------------

    def read_object(self, sha256: str) -> bytes:
        return (self.objects / sha256).read_bytes()

    def has_object(self, sha256: str) -> bool:
        return (self.objects / sha256).is_file()

    def store(self, content: bytes) -> str:
        sha256 = hashlib.sha256(content).hexdigest()
        (self.objects / sha256).write_bytes(content)
        return sha256

    # -- repos and commits --------------------------------------------------------------------------------------------

    def repo(self, repo_id: str) -> Repo:
        if repo_id not in self.repos:
            raise HubError(404, f"Repository {repo_id} not found", "RepoNotFound")
        return self.repos[repo_id]

    def commit_at(self, repo_id: str, revision: str) -> Commit:
        commit = self.repo(repo_id).resolve(revision)
        if commit is None:
            raise HubError(404, f"Invalid rev id: {revision}", "RevisionNotFound")
        return commit

    def create_repo(self, repo_id: str) -> None:
        with self._lock:
            if repo_id in self.repos:
                # huggingface_hub's create_repo(exist_ok=True) reads the url from the 409, as the Hub sends it
                raise HubError(409, "You already created this model repo", url=f"{self.url}/{repo_id}")
            self.repos[repo_id] = Repo()
            self._add_commit(repo_id, "initial commit", "", {".gitattributes": self._stored(GITATTRIBUTES, lfs=False)})

    def commit(self, repo_id: str, revision: str, lines: list[dict[str, Any]]) -> Commit:
        """Apply one NDJSON commit payload to the branch `revision`."""
        if revision != "main":
            raise HubError(400, f"this test Hub has one branch, main; got {revision}")
        header = next((line["value"] for line in lines if line["key"] == "header"), None)
        if header is None:
            raise HubError(400, "the commit payload has no header line")
        with self._lock:
            head = self.commit_at(repo_id, revision)
            if header.get("parentCommit") not in (None, head.sha):
                raise HubError(412, f"parentCommit {header['parentCommit']} is not the head of {revision}")
            files = dict(head.files)
            for line in lines:
                key, value = line["key"], line["value"]
                if key == "file":
                    files[value["path"]] = self._stored(base64.b64decode(value["content"]), lfs=False)
                elif key == "lfsFile":
                    if not self.has_object(value["oid"]):
                        raise HubError(422, f"LFS object {value['oid']} of {value['path']} was never uploaded")
                    files[value["path"]] = StoredFile(value["oid"], (self.objects / value["oid"]).stat().st_size, True)
                elif key == "deletedFile":
                    if files.pop(value["path"], None) is None:
                        raise HubError(404, "A file with this name doesn't exist", "EntryNotFound")
                elif key == "deletedFolder":
                    prefix = value["path"].rstrip("/") + "/"
                    files = {path: stored for path, stored in files.items() if not path.startswith(prefix)}
                elif key != "header":
                    raise HubError(400, f"unknown commit line {key!r}")
            return self._add_commit(repo_id, header["summary"], header.get("description", ""), files)

    def _stored(self, content: bytes, lfs: bool) -> StoredFile:
        return StoredFile(self.store(content), len(content), lfs)

    def _add_commit(self, repo_id: str, title: str, description: str, files: dict[str, StoredFile]) -> Commit:
        repo = self.repos[repo_id]
        parent = repo.commits[-1].sha if repo.commits else None
        tree = json.dumps({path: stored.sha256 for path, stored in sorted(files.items())})
        sha = hashlib.sha1(f"{parent}\n{title}\n{description}\n{tree}\n{len(repo.commits)}".encode()).hexdigest()
        repo.commits.append(Commit(sha, parent, title, description, files))
        return repo.commits[-1]

    def entry(self, stored: StoredFile, path: str) -> dict[str, Any]:
        """A file as the tree and paths-info endpoints describe it."""
        entry = {"type": "file", "path": path, "size": stored.size, "oid": stored.oid(self.read_object(stored.sha256))}
        if stored.lfs:
            entry["lfs"] = {"oid": stored.sha256, "size": stored.size, "pointerSize": 134}
        return entry

    @staticmethod
    def upload_mode(path: str, size: int, sample: bytes) -> str:
        """`lfs` where the Hub would store the file in LFS: a default LFS suffix, a large file, or binary content."""
        return "lfs" if path.endswith(LFS_SUFFIXES) or size >= LFS_THRESHOLD or b"\0" in sample else "regular"


API_REPO = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)(?:/(?P<action>[a-z-]+)(?:/(?P<rest>.*))?)?$")
RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<revision>[^/]+)/(?P<path>.+)$")
LFS_BATCH = re.compile(r"^/(?P<repo>[^/]+/[^/]+)\.git/info/lfs/objects/batch$")


def _handler(hub: LocalHub, storage: bool) -> type[BaseHTTPRequestHandler]:
    """The request handler of the API server or, with `storage`, of the storage server."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as huggingface_hub's client expects of the Hub

        def log_message(self, format: str, *args: Any) -> None:  # the tests read `hub.requests` instead of stderr
            pass

        def do_GET(self) -> None:
            self._dispatch(head=False)

        def do_HEAD(self) -> None:
            self._dispatch(head=True)

        def do_POST(self) -> None:
            self._dispatch(head=False)

        def do_PUT(self) -> None:
            self._dispatch(head=False)

        def _dispatch(self, head: bool) -> None:
            url = urlsplit(self.path)
            path, query = unquote(url.path), parse_qs(url.query)
            body = self._read_body()
            hub.requests.append(f"{self.command} {'storage:' if storage else ''}{url.path}")
            try:
                if storage:
                    self._storage(path, body, head)
                else:
                    self._api(path, query, body, head)
            except HubError as error:
                self._send(error.status, json.dumps({"error": str(error), **error.details}).encode(), head=head,
                           headers={"X-Error-Code": error.code} if error.code else {})

        def _read_body(self) -> bytes:
            """The request body, whole: with Content-Length, or chunked (httpx streams a file object that way)."""
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                chunks = []
                while size := int(self.rfile.readline().split(b";")[0].strip(), 16):
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                    pass
                return b"".join(chunks)
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _send(self, status: int, body: bytes = b"", *, head: bool = False, headers: dict[str, str] | None = None,
                  content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def _json(self, value: Any, status: int = 200) -> None:
            self._send(status, json.dumps(value).encode())

        # -- the storage server: LFS uploads and downloads by sha256 ---------------------------------------------

        def _storage(self, path: str, body: bytes, head: bool) -> None:
            kind, _, sha256 = path.strip("/").partition("/")
            if kind == "upload" and self.command == "PUT":
                expected_size = int(parse_qs(urlsplit(self.path).query)["size"][0])
                if hashlib.sha256(body).hexdigest() != sha256 or len(body) != expected_size:
                    raise HubError(400, f"the uploaded object does not match {sha256} ({expected_size} bytes)")
                hub.store(body)
                self._send(200, head=head)
            elif kind == "objects" and hub.has_object(sha256):
                self._send(200, hub.read_object(sha256), head=head, content_type="application/octet-stream",
                           headers={"ETag": f'"{sha256}"'})
            else:
                raise HubError(404, f"no object at {path}")

        # -- the API server -------------------------------------------------------------------------------------

        def _api(self, path: str, query: dict[str, list[str]], body: bytes, head: bool) -> None:
            if (self.command == "POST" and path != "/api/validate-yaml") or path == "/api/whoami-v2":
                self._authenticate()
            if path == "/api/whoami-v2":
                self._json({"type": "user", "name": USER, "orgs": [],
                            "auth": {"type": "access_token", "accessToken": {"displayName": "test", "role": "write"}}})
            elif path == "/api/repos/create" and self.command == "POST":
                payload = json.loads(body)
                if payload.get("type", "model") != "model":
                    raise HubError(400, "this test Hub holds model repos only")
                repo_id = f"{payload.get('organization') or USER}/{payload['name']}"
                hub.create_repo(repo_id)
                self._json({"url": f"{hub.url}/{repo_id}", "name": repo_id})
            elif path == "/api/validate-yaml" and self.command == "POST":
                self._json({"errors": [], "warnings": []})
            elif match := API_REPO.match(path):
                self._repo_api(match["repo"], match["action"], match["rest"] or "", query, body)
            elif match := LFS_BATCH.match(path):
                self._lfs_batch(match["repo"], json.loads(body))
            elif match := RESOLVE.match(path):
                self._resolve(match["repo"], match["revision"], match["path"], head)
            else:
                raise HubError(404, f"this test Hub does not serve {self.command} {path}")

        def _authenticate(self) -> None:
            """Writes and whoami need a token, as on the Hub (any `Bearer hf_...` here: one fake user)."""
            if not self.headers.get("Authorization", "").startswith("Bearer hf_"):
                raise HubError(401, "Invalid credentials in Authorization header")

        def _repo_api(self, repo_id: str, action: str | None, rest: str, query: dict[str, list[str]],
                      body: bytes) -> None:
            if action is None or action == "revision":  # repo_info / model_info
                commit = hub.commit_at(repo_id, rest or "main")
                self._json({"id": repo_id, "modelId": repo_id, "author": repo_id.split("/")[0], "sha": commit.sha,
                            "private": False, "disabled": False, "gated": False, "tags": [],
                            "siblings": [{"rfilename": path} for path in sorted(commit.files)]})
            elif action == "preupload":
                commit = hub.commit_at(repo_id, rest)
                files = []
                for file in json.loads(body)["files"]:
                    committed = commit.files.get(file["path"])
                    oid = committed.oid(hub.read_object(committed.sha256)) if committed else None
                    mode = hub.upload_mode(file["path"], file["size"], base64.b64decode(file["sample"]))
                    files.append({"path": file["path"], "uploadMode": mode, "shouldIgnore": False, "oid": oid})
                self._json({"files": files, "commitOid": commit.sha})
            elif action == "commit":
                lines = [json.loads(line) for line in body.splitlines() if line.strip()]
                commit = hub.commit(repo_id, rest, lines)
                self._json({"commitUrl": f"{hub.url}/{repo_id}/commit/{commit.sha}", "commitOid": commit.sha,
                            "pullRequestUrl": None})
            elif action == "tree":
                revision, _, folder = rest.partition("/")
                commit = hub.commit_at(repo_id, revision)
                recursive = query.get("recursive", ["false"])[0].lower() == "true"
                self._json(_tree(hub, commit, folder.strip("/"), recursive))
            elif action == "paths-info":
                commit = hub.commit_at(repo_id, rest)
                entries = []
                for path in parse_qs(body.decode()).get("paths", []):
                    if path in commit.files:
                        entries.append(hub.entry(commit.files[path], path))
                    elif any(name.startswith(f"{path}/") for name in commit.files):
                        entries.append(_folder(path))
                self._json(entries)
            elif action == "commits":
                head = hub.commit_at(repo_id, rest)
                history = hub.commits(repo_id)
                history = history[: history.index(head) + 1]
                self._json([{"id": commit.sha, "title": commit.title, "message": commit.description,
                             "authors": [{"user": USER}], "date": "2026-01-01T00:00:00.000Z"}
                            for commit in reversed(history)])
            else:
                raise HubError(404, f"this test Hub does not serve {self.command} /api/models/{repo_id}/{action}")

        def _lfs_batch(self, repo_id: str, payload: dict[str, Any]) -> None:
            hub.repo(repo_id)
            if payload.get("operation") != "upload" or "basic" not in payload.get("transfers", ["basic"]):
                raise HubError(400, "this test Hub takes basic LFS uploads only")
            objects = []
            for item in payload["objects"]:
                entry = {"oid": item["oid"], "size": item["size"]}
                if not hub.has_object(item["oid"]):
                    href = f"{hub.storage_url}/upload/{item['oid']}?size={item['size']}"
                    entry["actions"] = {"upload": {"href": href, "header": {}}}
                objects.append(entry)
            self._send(200, json.dumps({"transfer": "basic", "objects": objects}).encode(),
                       content_type="application/vnd.git-lfs+json")

        def _resolve(self, repo_id: str, revision: str, path: str, head: bool) -> None:
            commit = hub.commit_at(repo_id, revision)
            stored = commit.files.get(path)
            if stored is None:
                raise HubError(404, f"Entry not found: {path}", "EntryNotFound")
            headers = {"X-Repo-Commit": commit.sha}
            if stored.lfs:  # the Hub redirects to its CDN; the redirect carries the file's metadata
                headers.update({"Location": f"{hub.storage_url}/objects/{stored.sha256}",
                                "X-Linked-Etag": f'"{stored.sha256}"', "X-Linked-Size": str(stored.size),
                                "ETag": f'"{stored.sha256}"'})
                self._send(302, head=head, headers=headers)
                return
            content = hub.read_object(stored.sha256)
            headers["ETag"] = f'"{git_blob_sha1(content)}"'
            self._send(200, content, head=head, headers=headers, content_type="application/octet-stream")

    return Handler


def _tree(hub: LocalHub, commit: Commit, folder: str, recursive: bool) -> list[dict[str, Any]]:
    """The entries under `folder` (`""`: the root), folders first as the Hub lists them."""
    prefix = f"{folder}/" if folder else ""
    if folder and not any(path.startswith(prefix) for path in commit.files):
        raise HubError(404, f"Entry not found: {folder}", "EntryNotFound")
    folders, files = set(), []
    for path, stored in sorted(commit.files.items()):
        if not path.startswith(prefix):
            continue
        parts = path[len(prefix):].split("/")
        for depth in range(1, len(parts) if recursive else min(2, len(parts))):
            folders.add(prefix + "/".join(parts[:depth]))
        if recursive or len(parts) == 1:
            files.append(hub.entry(stored, path))
    return [_folder(path) for path in sorted(folders)] + files


def _folder(path: str) -> dict[str, str]:
    """A folder's entry (its oid stands for a git tree's; nothing reads it)."""
    return {"type": "directory", "path": path, "oid": hashlib.sha1(quote(path).encode()).hexdigest()}


def main() -> None:
    """`python tests/hub_server.py [FOLDER]`: serve a Hub double from FOLDER (a temporary one by default) until
    interrupted, and print the environment that points huggingface_hub at it."""
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as scratch, LocalHub(Path(sys.argv[1] if len(sys.argv) > 1 else scratch)) as hub:
        print(f"export HF_ENDPOINT={hub.url} HF_TOKEN=hf_local HF_HUB_DISABLE_XET=1; unset HF_HUB_OFFLINE", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
