#!/usr/bin/env python3
"""The molecule's alert receiver: a webhook that keeps every notice Alertmanager posts, one JSON line each.

Stands where a user's chat bridge or pager would (monitoring_alert_webhook_url). Run on the monitoring node:
    alert_receiver.py 127.0.0.1:9199 /var/tmp/sparkfleet-alerts.jsonl
"""

import http.server
import json
import sys


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with open(sys.argv[2], "a", encoding="utf-8") as kept:
            kept.write(json.dumps(json.loads(body)) + "\n")
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    host, port = sys.argv[1].rsplit(":", 1)
    http.server.HTTPServer((host, int(port)), Receiver).serve_forever()
