"""Stand-ins for the outside services the benchmark needs, on loopback; prints its port.

POST /api/v1/ answers like Apple's AdServices endpoint (an attributed answer for every
text/plain token); /hook like a webhook receiver; /engage and /import like Mixpanel
(verbose and strict answers). Each counts what it received: GET /counts."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

APPLE_ANSWER = (b'{"attribution":true,"orgId":40669820,"campaignId":542370539,"conversionType":"Download",'
                b'"claimType":"Click","adGroupId":542317095,"countryOrRegion":"US","keywordId":87675432,'
                b'"adId":542317136,"clickDate":"2024-10-08T17:17Z"}')
counts = {"apple": 0, "webhook_records": 0, "engage_updates": 0, "import_events": 0}
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; with Nagle's algorithm on, the client's
    # delayed ACK holds every answer ~40 ms and the benchmark measures that instead.
    disable_nagle_algorithm = True

    def answer(self, status, body=b""):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def count(self, key, n):
        with lock:
            counts[key] += n

    def do_GET(self):
        with lock:
            body = json.dumps(counts).encode()
        self.answer(200, body)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        path = self.path.split("?")[0]
        if path == "/api/v1/":
            if self.headers.get("Content-Type") != "text/plain":
                return self.answer(400)
            self.count("apple", 1)
            return self.answer(200, APPLE_ANSWER)
        if path == "/hook":
            self.count("webhook_records", len(json.loads(body)["records"]))
            return self.answer(200)
        if path == "/engage":
            self.count("engage_updates", len(json.loads(body)))
            return self.answer(200, b'{"status":1,"error":null}')
        if path == "/import":
            events = json.loads(body)
            self.count("import_events", len(events))
            return self.answer(200, json.dumps({"code": 200, "num_records_imported": len(events), "status": "OK"}).encode())
        self.answer(404)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
