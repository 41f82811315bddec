"""Stand-ins for the outside services the benchmark needs, on loopback; prints its port.

POST /api/v1/ answers like Apple's AdServices endpoint (an attributed answer for every
text/plain token); /hook like a webhook receiver; /engage and /import like Mixpanel
(verbose and strict answers). Each counts what it received: GET /counts.

The real services run on other machines; here they share the gateway's two cores. So
this is HTTP/1.1 on asyncio's bare protocol, one write per answer, rather than
http.server, which took a sixth to a third of a core while the AdServices resolver
called it (155 µs of CPU a call) and so weighed on the figures measured for the
gateway."""
import asyncio
import json
import socket

APPLE_ANSWER = (b'{"attribution":true,"orgId":40669820,"campaignId":542370539,"conversionType":"Download",'
                b'"claimType":"Click","adGroupId":542317095,"countryOrRegion":"US","keywordId":87675432,'
                b'"adId":542317136,"clickDate":"2024-10-08T17:17Z"}')
REASONS = {200: b"OK", 400: b"Bad Request", 404: b"Not Found"}
counts = {"apple": 0, "webhook_records": 0, "webhook_forgets": 0, "engage_updates": 0, "import_events": 0}


def handle(method, path, headers, body):
    """(status, body) for one request."""
    path = path.split("?")[0]
    if method == "GET":
        return 200, json.dumps(counts).encode()
    if path == "/api/v1/":
        if headers.get("content-type") != "text/plain":
            return 400, b""
        counts["apple"] += 1
        return 200, APPLE_ANSWER
    if path == "/hook":
        message = json.loads(body)
        if message.get("type") == "user.forgotten":  # a forget request: nothing kept here
            counts["webhook_forgets"] += 1
        else:
            counts["webhook_records"] += len(message["records"])
        return 200, b""
    if path == "/engage":
        counts["engage_updates"] += len(json.loads(body))
        return 200, b'{"status":1,"error":null}'
    if path == "/import":
        events = json.loads(body)
        counts["import_events"] += len(events)
        return 200, json.dumps({"code": 200, "num_records_imported": len(events), "status": "OK"}).encode()
    return 404, b""


def dechunk(data):
    """The body of a chunked message and its length on the wire, or None while incomplete."""
    body, at = b"", 0
    while True:
        end = data.find(b"\r\n", at)
        if end < 0:
            return None
        size = int(data[at:end].split(b";")[0], 16)
        if size == 0:
            trailer = data.find(b"\r\n\r\n", end)
            return None if trailer < 0 else (body, trailer + 4)
        if len(data) < end + 2 + size + 2:
            return None
        body += data[end + 2:end + 2 + size]
        at = end + 2 + size + 2


class Connection(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
        self.buffer = b""
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data):
        self.buffer += data
        while True:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            lines = self.buffer[:head_end].decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            rest = self.buffer[head_end + 4:]
            if headers.get("transfer-encoding", "").lower() == "chunked":
                decoded = dechunk(rest)
                if decoded is None:
                    return
                body, used = decoded
            else:
                used = int(headers.get("content-length", "0"))
                if len(rest) < used:
                    return
                body = rest[:used]
            self.buffer = rest[used:]
            status, answer = handle(method, path, headers, body)
            self.transport.write(b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                                 % (status, REASONS[status], len(answer), answer))
            if headers.get("connection", "").lower() == "close":
                self.transport.close()
                return


async def main():
    server = await asyncio.get_running_loop().create_server(Connection, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


asyncio.run(main())
