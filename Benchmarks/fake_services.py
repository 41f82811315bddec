"""A stand-in for Apple's AdServices endpoint for the benchmark: answers every
text/plain token with an attributed answer, on loopback, and prints its port."""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ANSWER = (b'{"attribution":true,"orgId":40669820,"campaignId":542370539,"conversionType":"Download",'
          b'"claimType":"Click","adGroupId":542317095,"countryOrRegion":"US","keywordId":87675432,'
          b'"adId":542317136,"clickDate":"2024-10-08T17:17Z"}')


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        ok = self.headers.get("Content-Type") == "text/plain"
        self.send_response(200 if ok else 400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(ANSWER) if ok else 0))
        self.end_headers()
        if ok:
            self.wfile.write(ANSWER)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
