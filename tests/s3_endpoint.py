"""A real S3 endpoint on loopback for tests: moto's standalone server in its own
process, and a proxy in front of it that drops conditional-write headers (an endpoint
without conditional puts, as some S3 look-alikes are)."""

from __future__ import annotations

import http.client
import http.server
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

KEY = SECRET = "testing"
REGION = "us-east-1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Endpoint:
    """An S3 endpoint URL and the storage options s3fs needs to reach it."""

    url: str

    def options(self) -> dict:
        return {"key": KEY, "secret": SECRET, "client_kwargs": {"endpoint_url": self.url, "region_name": REGION}}

    def create_bucket(self, name: str) -> None:
        import boto3

        boto3.client("s3", endpoint_url=self.url, aws_access_key_id=KEY, aws_secret_access_key=SECRET,
                     region_name=REGION).create_bucket(Bucket=name)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        import boto3

        client = boto3.client("s3", endpoint_url=self.url, aws_access_key_id=KEY, aws_secret_access_key=SECRET,
                              region_name=REGION)
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


class MotoServer:
    """``python -m moto.server`` on a free loopback port, in its own process."""

    def __init__(self):
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    break
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError("moto's S3 server exited at start")
                time.sleep(0.1)
        else:
            self.stop()
            raise RuntimeError("moto's S3 server did not start within 60 s")
        self.endpoint = Endpoint(f"http://127.0.0.1:{self.port}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class NoConditionalWritesProxy:
    """Forwards every request to ``upstream`` without ``If-None-Match`` / ``If-Match``:
    conditional puts then overwrite, as on an endpoint that ignores the condition."""

    DROPPED = {"if-none-match", "if-match"}

    def __init__(self, upstream_port: int):
        dropped, port = self.DROPPED, upstream_port

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in dropped}
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                conn.request(self.command, self.path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                self.send_response(resp.status, resp.reason)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                conn.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.endpoint = Endpoint(f"http://127.0.0.1:{self.server.server_address[1]}")

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
