#!/usr/bin/env python3
"""Crash evidence: ingest load on several routes while the gateway is killed with SIGKILL
at random moments, several times, and restarted each time. Afterwards every record that
was answered 2xx must be in the SQLite sink's table (keyed by record_id: a re-delivery
after a kill overwrites its row), every stored record must have been delivered, no answer
may be other than 2xx (requests cut off by a kill got none and may or may not be
stored), and each restarted gateway must have taken load. Started by scripts/crash-test.

The routes: iAd, /v1/events (one event and arrays) and AdServices tokens, which a fake
Apple on loopback answers (a fifth of them "not found yet" at first): a token is
acknowledged before Apple answers, so the kills also land between the acknowledgement
and the record, and the record must still arrive once.
"""
import argparse
import base64
import http.client
import http.server
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

from gateway_harness import free_port, wait_healthy


APPLE_ANSWER = (b'{"attribution":true,"orgId":40669820,"campaignId":542370539,"conversionType":"Download",'
                b'"adGroupId":542317095,"countryOrRegion":"US","keywordId":87675432,"adId":542317136,'
                b'"clickDate":"2024-10-08T17:17Z"}')


def fake_apple():
    """Apple's AdServices endpoint on loopback: each token's first call is answered 404
    (not found yet) for one token in five, then the attributed answer. Returns its port."""
    seen = set()
    lock = threading.Lock()

    class Apple(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            token = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with lock:
                first = token not in seen
                seen.add(token)
            if self.headers.get("Content-Type") != "text/plain":
                status, body = 400, b""
            elif first and token[-1] % 5 == 0:
                status, body = 404, b""
            else:
                status, body = 200, APPLE_ANSWER
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Apple)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def payload(rng, worker, sequence):
    """An iAd dictionary, a raw event (one object or an array of three), or an
    AdServices token."""
    user = f"crash-{worker}-{sequence}"
    kind = rng.randrange(4)
    if kind == 3:
        token = base64.b64encode(rng.randbytes(96)).decode()
        return "/v1/adservices", {"token": token, "app_id": "1234567890", "app_user_id": user}
    if kind == 0:
        return "/v1/iad", {"app_id": "1234567890", "app_user_id": user,
                           "Version3.1": {"iad-attribution": "true", "iad-campaign-id": "542370539",
                                          "iad-keyword-id": "87675432"}}
    event = {"type": "event", "name": "level_up", "app_id": "1234567890", "app_user_id": user,
             "event_id": user, "att_status": 2}
    if kind == 1:
        return "/v1/events", event
    return "/v1/events", [dict(event, event_id=f"{user}-{i}") for i in range(3)]


def load(port_box, stop, acknowledged, refused, lock, worker, seed):
    rng = random.Random(seed)
    sequence = 0
    connection = None
    while not stop.is_set():
        if connection is None:
            connection = http.client.HTTPConnection("127.0.0.1", port_box[0], timeout=5)
        sequence += 1
        path, body = payload(rng, worker, sequence)
        try:
            connection.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            data = response.read()
            if 200 <= response.status < 300:
                answer = json.loads(data or b"{}")
                ids = [r["record_id"] for r in answer.get("results", [answer])]
                with lock:
                    acknowledged.update(ids)
            else:
                # An answer that is not 2xx (a 503 from a store that is not ready, say)
                # is a failure: only a cut-off connection is excused.
                with lock:
                    refused.append((response.status, data[:200]))
        except (OSError, http.client.HTTPException, ValueError):
            # The process died under the request: no answer, no promise.
            connection.close()
            connection = None
            time.sleep(0.05)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--binary", default=".build/debug/attribution-gateway")
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=20261123)
    args = parser.parse_args()
    rng = random.Random(args.seed)

    work = tempfile.mkdtemp()
    database = os.path.join(work, "gateway.sqlite")
    port = free_port()
    apple_port = fake_apple()
    config = os.path.join(work, "config.yaml")
    with open(config, "w") as f:
        f.write(f"""
server: {{ host: 127.0.0.1, port: {port}, log_level: error }}
storage: {{ sqlite: {{ path: {database}, durability: full }} }}
providers:
  iad: {{}}
  s2s: {{}}
  adservices: {{ endpoint: "http://127.0.0.1:{apple_port}/api/v1/", answer_wait_ms: 0, not_found_interval_ms: 200 }}
sinks:
  local: {{ type: sqlite, batch_size: 50, backoff_initial_ms: 50, backoff_max_ms: 500 }}
""")
    log = open(os.path.join(work, "gateway.log"), "a")

    def start():
        process = subprocess.Popen([args.binary, "serve", "--config", config], stderr=log)
        if not wait_healthy(port):
            print("FAIL the gateway did not start; see", log.name)
            sys.exit(1)
        return process

    acknowledged = set()
    refused = []
    lock = threading.Lock()
    stop = threading.Event()
    port_box = [port]
    process = start()
    threads = [threading.Thread(target=load, args=(port_box, stop, acknowledged, refused, lock, i, args.seed + i))
               for i in range(args.threads)]
    for thread in threads:
        thread.start()
    counts = []
    for kill in range(args.kills):
        time.sleep(rng.uniform(0.3, 2.0))
        process.send_signal(signal.SIGKILL)
        process.wait()
        with lock:
            counts.append(len(acknowledged))
        print(f"kill {kill + 1}: SIGKILL with {counts[-1]} records acknowledged so far")
        process = start()
    time.sleep(rng.uniform(0.3, 1.0))
    stop.set()
    for thread in threads:
        thread.join()

    # Let the restarted gateway deliver what the kills left in the outbox.
    deadline = time.time() + 120
    delivered = set()
    while time.time() < deadline:
        with sqlite3.connect(database) as db:
            try:
                delivered = {row[0] for row in db.execute("SELECT record_id FROM attribution_records")}
                # Rows waiting for a sink, and tokens still waiting for Apple.
                pending = (db.execute("SELECT COUNT(*) FROM outbox").fetchone()[0]
                           + db.execute("SELECT COUNT(*) FROM pending").fetchone()[0])
            except sqlite3.OperationalError:
                delivered, pending = set(), 1
        if acknowledged <= delivered and pending == 0:
            break
        time.sleep(0.2)
    process.terminate()
    process.wait()

    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT COUNT(*), COUNT(DISTINCT record_id) FROM attribution_records").fetchone()
        stored = db.execute("SELECT COUNT(*) FROM records").fetchone()[0]
        dead = db.execute("SELECT COUNT(*) FROM dead_letters").fetchone()[0]
        tokens = db.execute("SELECT COUNT(*) FROM records WHERE provider = 'adservices'").fetchone()[0]
        waiting = db.execute("SELECT COUNT(*) FROM pending").fetchone()[0]
    missing = acknowledged - delivered
    print(f"acknowledged {len(acknowledged)}; stored {stored} ({tokens} from AdServices tokens, {waiting} still "
          f"waiting for Apple); sink rows {rows[0]} ({rows[1]} distinct); dead letters {dead}; missing {len(missing)}")
    failures = []
    # Each restarted gateway must have taken load before the next kill.
    if any(later <= earlier for earlier, later in zip(counts, counts[1:])) or not counts or counts[0] == 0:
        failures.append(f"some run acknowledged nothing: {counts}")
    if refused:
        failures.append(f"{len(refused)} answers were not 2xx, e.g. {refused[0]}")
    if missing:
        failures.append(f"{len(missing)} acknowledged records are not in the sink, e.g. {sorted(missing)[:3]}")
    if rows[0] != stored:
        failures.append(f"{stored - rows[0]} stored records never reached the sink")
    if dead:
        failures.append(f"{dead} dead letters")
    if tokens == 0:
        failures.append("no AdServices token became a record")
    if waiting:
        failures.append(f"{waiting} tokens never resolved")
    for failure in failures:
        print("FAIL", failure)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
