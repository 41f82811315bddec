#!/usr/bin/env python3
"""Replica evidence: two `serve` processes on one PostgreSQL database, iAd, SKAN and
`/v1/events` load spread over both, one replica SIGKILLed and restarted at random moments
(at least --kills times), and a webhook receiver counting. Every record answered 2xx must
be stored exactly once and delivered; a record may reach the receiver twice only as a
redelivery of the same record_id after a kill of the replica that sent the first copy.
Deliberate duplicates go to the other replica, and some payloads race on both at once:
each must be answered with the original's record_id. Prints acknowledged, stored,
delivered, redelivered. Started by scripts/replicas-test, inside scripts/with-postgres
(GATEWAY_TEST_POSTGRES_URL, PGBIN).

SKAN postbacks are SKAN 4.0, as Benchmarks/PostbackMaker makes them, signed here with a
P-256 key made for the run (the replicas are given its public key as
`providers.skadnetwork.keys.skan_p256`), so they verify; the delivered records must say
`signature: verified`.
"""
import argparse
import base64
import collections
import hashlib
import hmac
import http.client
import http.server
import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid

from gateway_harness import free_port, wait_healthy

APP_ID = "1449273301"
SECRET = "replicas-test-secret-0001"
LEASE_S = 5
RECEIVER_DELAY_S = 0.05  # between storing a batch and answering: a kill may land in between


# --- ECDSA P-256 (stdlib only) for signing SKAN 4.0 postbacks --------------------------

P = 0xFFFFFFFF00000001000000000000000000000000FFFFFFFFFFFFFFFFFFFFFFFF
N = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551
G = (0x6B17D1F2E12C4247F8BCE6E563A440F277037D812DEB33A0F4A13945D898C296,
     0x4FE342E2FE1A7F9B8EE7EB4A7C0F9E162BCE33576B315ECECBB6406837BF51F5)
SPKI_PREFIX = bytes.fromhex("3059301306072a8648ce3d020106082a8648ce3d030107034200")


def _double(point):
    x, y, z = point
    if y == 0:
        return None
    delta = z * z % P
    gamma = y * y % P
    beta = x * gamma % P
    alpha = 3 * (x - delta) * (x + delta) % P
    x3 = (alpha * alpha - 8 * beta) % P
    z3 = ((y + z) ** 2 - gamma - delta) % P
    y3 = (alpha * (4 * beta - x3) - 8 * gamma * gamma) % P
    return x3, y3, z3


def _add_affine(point, affine):
    if point is None:
        return affine[0], affine[1], 1
    x1, y1, z1 = point
    x2, y2 = affine
    z1z1 = z1 * z1 % P
    u2 = x2 * z1z1 % P
    s2 = y2 * z1 * z1z1 % P
    h = (u2 - x1) % P
    r = (s2 - y1) % P
    if h == 0:
        return _double(point) if r == 0 else None
    hh = h * h % P
    hhh = h * hh % P
    v = x1 * hh % P
    x3 = (r * r - hhh - 2 * v) % P
    y3 = (r * (v - x3) - y1 * hhh) % P
    return x3, y3, z1 * h % P


def _multiply(k, affine):
    result = None
    for bit in bin(k)[2:]:
        if result is not None:
            result = _double(result)
        if bit == "1":
            result = _add_affine(result, affine)
    x, y, z = result
    zi = pow(z, -1, P)
    return x * zi * zi % P, y * zi * zi * zi % P


def _der_integer(value):
    raw = value.to_bytes((value.bit_length() + 8) // 8, "big")  # a leading zero keeps it positive
    return b"\x02" + bytes([len(raw)]) + raw


class SkanSigner:
    """A P-256 key made for the run: its SPKI for the config, and DER ECDSA signatures."""

    def __init__(self):
        self.secret = secrets.randbelow(N - 1) + 1
        x, y = _multiply(self.secret, G)
        self.spki = base64.b64encode(SPKI_PREFIX + b"\x04" + x.to_bytes(32, "big") + y.to_bytes(32, "big")).decode()

    def sign(self, message):
        z = int.from_bytes(hashlib.sha256(message).digest(), "big")
        while True:
            k = secrets.randbelow(N - 1) + 1
            r = _multiply(k, G)[0] % N
            s = pow(k, -1, N) * (z + r * self.secret) % N
            if r and s:
                body = _der_integer(r) + _der_integer(s)
                return base64.b64encode(b"\x30" + bytes([len(body)]) + body).decode()

    def postback(self, transaction_id, conversion_value):
        """A SKAN 4.0 winning postback with a web source, as Benchmarks/PostbackMaker makes."""
        signed = ["4.0", "example123.skadnetwork", "5239", "525463029", transaction_id, "false", "example.com",
                  "1", "true", "0"]
        return {"version": "4.0", "ad-network-id": "example123.skadnetwork", "source-identifier": "5239",
                "app-id": 525463029, "transaction-id": transaction_id, "redownload": False,
                "source-domain": "example.com", "fidelity-type": 1, "did-win": True, "postback-sequence-index": 0,
                "conversion-value": conversion_value,
                "attribution-signature": self.sign("\u2063".join(signed).encode())}


# --- the webhook receiver --------------------------------------------------------------

def signature_ok(header, body):
    """docs/sinks/webhook.md's check: any v1 of `t=…,v1=…` is HMAC-SHA256(secret, t.body)."""
    try:
        parts = [p.split("=", 1) for p in (header or "").split(",") if "=" in p]
        timestamp = int(dict(parts)["t"])
    except (KeyError, ValueError):
        return False
    if abs(time.time() - timestamp) > 300:
        return False
    expected = hmac.new(SECRET.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(expected, value) for key, value in parts if key == "v1")


class Receiver:
    """Counts each record's copies: (monotonic time, replica that sent it, Idempotency-Key)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.copies = collections.defaultdict(list)
        self.bodies = {}
        self.bad_signatures = 0
        self.bad_bodies = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                now = time.monotonic()
                replica = self.headers.get("X-Replica", "?")
                key = self.headers.get("Idempotency-Key")
                with receiver.lock:
                    if not signature_ok(self.headers.get("X-Gateway-Signature"), body):
                        receiver.bad_signatures += 1
                    try:
                        records = json.loads(body)["records"]
                        for record in records:
                            receiver.copies[record["record_id"]].append((now, replica, key))
                            receiver.bodies.setdefault(record["record_id"], record)
                    except (ValueError, KeyError, TypeError) as error:
                        receiver.bad_bodies.append(f"{error!r}: {body[:200]!r}")
                # Stored, and not yet answered: a replica killed now has delivered the batch
                # without knowing it.
                time.sleep(RECEIVER_DELAY_S)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        class Server(http.server.ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                # A replica killed mid-request resets its connection: nothing was counted.
                if not isinstance(sys.exc_info()[1], ConnectionError):
                    super().handle_error(request, client_address)

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def snapshot(self):
        with self.lock:
            return {rid: list(c) for rid, c in self.copies.items()}, dict(self.bodies)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


# --- the replicas ----------------------------------------------------------------------

def wait_ready(port, seconds=30):
    """True once GET /readyz answers 200, False after `seconds`."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            c.request("GET", "/readyz")
            if c.getresponse().status == 200:
                return True
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.05)
    return False


class Replica:
    def __init__(self, name, binary, work, url, port, receiver_port, spki):
        self.name, self.binary, self.port = name, binary, port
        self.config = os.path.join(work, f"config-{name}.yaml")
        self.log = os.path.join(work, f"replica-{name}.log")
        self.process = None
        self.started_at = 0.0
        # timeout_ms as the Swift tests' gateways: this checks kills, not the server's speed.
        with open(self.config, "w") as f:
            f.write(f"""
server: {{ host: 127.0.0.1, port: {port}, log_level: error }}
storage: {{ postgres: {{ url: "{url}", pool_size: 8, lease_s: {LEASE_S}, timeout_ms: 120000 }} }}
providers:
  iad: {{}}
  s2s: {{}}
  skadnetwork: {{ on_invalid_signature: quarantine, keys: {{ skan_p256: "{spki}" }} }}
sinks:
  hook:
    type: webhook
    url: http://127.0.0.1:{receiver_port}/hook
    secret: {SECRET}
    headers: {{ X-Replica: "{name}" }}
    batch_size: 50
    max_batch_size: 50
    backoff_initial_ms: 100
    backoff_max_ms: 1000
routes:
  - {{ sinks: [hook] }}
  # A postback that did not verify still reaches the receiver, which then says so.
  - {{ sinks: [hook], where: {{ quarantined: true }} }}
""")

    def start(self):
        with open(self.log, "a") as log:
            log.write(f"--- replicas_test: start at {time.strftime('%H:%M:%S')}\n")
            log.flush()
            self.process = subprocess.Popen([self.binary, "serve", "--config", self.config],
                                            stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        if not wait_healthy(self.port) or not wait_ready(self.port):
            raise StartFailure(f"replica {self.name} did not become ready on port {self.port}")
        self.started_at = time.monotonic()

    def kill(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        with open(self.log, "a") as log:
            log.write(f"--- replicas_test: SIGKILL at {time.strftime('%H:%M:%S')}\n")

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def tail(self, lines=20):
        try:
            with open(self.log, errors="replace") as f:
                return f.readlines()[-lines:]
        except OSError:
            return []


class StartFailure(Exception):
    pass


# --- PostgreSQL ------------------------------------------------------------------------

def psql(url, sql):
    binary = os.path.join(os.environ["PGBIN"], "psql") if os.environ.get("PGBIN") else "psql"
    out = subprocess.run([binary, "-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql],
                         capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"psql failed: {sql}: {out.stderr.strip()}")
    return [line for line in out.stdout.splitlines() if line]


def database_url(server_url, name):
    parts = urllib.parse.urlsplit(server_url)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


# --- the load --------------------------------------------------------------------------

class Load:
    """Client threads posting unique payloads to a random replica; what the answers said."""

    def __init__(self, replicas, signer, seed, threads):
        self.replicas = replicas
        self.signer = signer
        self.seed = seed
        self.threads = threads
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acknowledged = {}                  # record_id -> provider
        self.acked_by = collections.Counter()   # (replica, provider) -> answered 2xx
        self.acked_at = collections.defaultdict(list)  # replica -> monotonic times of 2xx
        self.unexpected = []                    # non-2xx answers, bad shapes
        self.first_duplicates = []              # a never-sent payload answered duplicate
        self.duplicate_checks = []              # (ok, detail)
        self.race_checks = []                   # (ok, detail)
        self.requests = 0
        self.cut_off = 0                        # connection errors (a replica down or killed)
        self.unanswered = 0                     # payloads never answered despite retries

    # payloads: (path, body, provider, elements)
    def payload(self, rng, worker, sequence):
        user = f"rep-{self.seed}-{worker}-{sequence}"
        kind = rng.choices(["iad", "skan", "skan-array", "skan-apple", "event", "events", "purchase"],
                           [5, 3, 1, 1, 3, 2, 1])[0]
        if kind == "iad":
            return "/v1/iad", {"app_id": APP_ID, "app_user_id": user, "att_status": 2,
                               "Version3.1": {"iad-attribution": "true", "iad-org-id": "40669820",
                                              "iad-campaign-id": "542370539", "iad-adgroup-id": "542317095",
                                              "iad-keyword-id": "87675432", "iad-keyword": "meditation",
                                              "iad-click-date": "2020-08-04T17:18:07Z"}}, "iad"
        if kind.startswith("skan"):
            count = 2 if kind == "skan-array" else 1
            postbacks = [self.signer.postback(f"{uuid.UUID(int=rng.getrandbits(128), version=4)}",
                                              rng.randrange(1, 64)) for _ in range(count)]
            if kind == "skan-apple":
                return "/.well-known/skadnetwork/report-attribution/", postbacks[0], "skadnetwork"
            return "/v1/skadnetwork/postbacks", postbacks if kind == "skan-array" else postbacks[0], "skadnetwork"
        event = {"type": "event", "name": "level_up", "app_id": APP_ID, "app_user_id": user, "event_id": user,
                 "att_status": 2}
        if kind == "event":
            return "/v1/events", event, "s2s"
        if kind == "purchase":
            return "/v1/events", {"type": "purchase", "name": "subscribe", "app_id": APP_ID, "app_user_id": user,
                                  "revenue": 9.99, "currency": "USD", "transaction_id": f"tx-{user}",
                                  "att_status": 2}, "s2s"
        return "/v1/events", [dict(event, event_id=f"{user}-{i}") for i in range(3)], "s2s"

    def send(self, connections, index, path, body):
        """(status, parsed answer) or None when the replica gave no answer."""
        replica = self.replicas[index]
        connection = connections.get(index)
        if connection is None:
            connection = connections[index] = http.client.HTTPConnection("127.0.0.1", replica.port, timeout=15)
        with self.lock:
            self.requests += 1
        try:
            connection.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException):
            connection.close()
            connections.pop(index, None)
            with self.lock:
                self.cut_off += 1
            return None
        try:
            answer = json.loads(data or b"{}")
        except ValueError:
            answer = {"unparsed": data[:200].decode(errors="replace")}
        return response.status, answer

    @staticmethod
    def elements(answer):
        return answer.get("results", [answer]) if isinstance(answer, dict) else []

    def acknowledge(self, index, provider, status, answer, path):
        """Notes a 2xx's record ids; returns them, or None (and notes why) for any other answer."""
        elements = self.elements(answer)
        ids = [e.get("record_id") for e in elements if isinstance(e, dict)]
        if not (200 <= status < 300) or not ids or None in ids:
            with self.lock:
                self.unexpected.append(f"{self.replicas[index].name} {path}: {status} {json.dumps(answer)[:300]}")
            return None
        with self.lock:
            for rid in ids:
                self.acknowledged[rid] = provider
            self.acked_by[(self.replicas[index].name, provider)] += 1
            self.acked_at[self.replicas[index].name].append(time.monotonic())
        return elements

    def deliver(self, connections, path, body, provider, first):
        """Sends until some replica answers (a replica being killed or restarted gives no
        answer: the other is tried). Returns (replica index, elements) or None."""
        index = first
        for attempt in range(40):
            result = self.send(connections, index, path, body)
            if result is not None:
                elements = self.acknowledge(index, provider, result[0], result[1], path)
                if elements is None:
                    return None
                if attempt == 0 and any(e.get("status") != "accepted" for e in elements):
                    with self.lock:
                        self.first_duplicates.append(f"{path} sent once to {self.replicas[index].name}: "
                                                     f"{result[0]} {json.dumps(result[1])[:300]}")
                return index, elements
            index = 1 - index
            time.sleep(0.05 if attempt < 2 else 0.2)
        with self.lock:
            self.unanswered += 1
        return None

    def duplicate(self, connections, path, body, index, original):
        """The same body to the other replica: 200, every element a duplicate of the original."""
        other = 1 - index
        for _ in range(10):
            result = self.send(connections, other, path, body)
            if result is not None:
                break
            time.sleep(0.2)
        else:
            return  # the other replica stayed down: nothing checked
        status, answer = result
        elements = self.elements(answer)
        expected = [e["record_id"] for e in original]
        got = [e.get("record_id") if isinstance(e, dict) else None for e in elements]
        ok = (status == 200 and got == expected and all(e.get("status") == "duplicate" for e in elements)
              and all(e.get("duplicate_of", e.get("record_id")) == e.get("record_id") for e in elements))
        with self.lock:
            self.duplicate_checks.append((ok, f"{path} first answered by {self.replicas[index].name} naming "
                                              f"{expected}; again to {self.replicas[other].name}: {status} "
                                              f"{json.dumps(answer)[:300]}"))

    def race(self, rng, path, body, provider):
        """The same new body to both replicas at once: both name one record, one says accepted."""
        answers = [None, None]
        barrier = threading.Barrier(2)

        def one(index):
            connections = {}
            try:
                barrier.wait(timeout=5)
            except threading.BrokenBarrierError:
                pass
            answers[index] = self.send(connections, index, path, body)
            for c in connections.values():
                c.close()

        pair = [threading.Thread(target=one, args=(i,)) for i in (0, 1)]
        for thread in pair:
            thread.start()
        for thread in pair:
            thread.join()
        got = []
        for index, result in enumerate(answers):
            if result is not None:
                elements = self.acknowledge(index, provider, result[0], result[1], path)
                if elements is None:
                    return
                got.append((index, result[0], elements))
        if len(got) < 2:
            if not got:  # neither answered: send it until one does, as any client would
                self.deliver({}, path, body, provider, rng.randrange(2))
            return
        (_, status_a, a), (_, status_b, b) = got
        ids_a, ids_b = [e["record_id"] for e in a], [e["record_id"] for e in b]
        accepted = [[e.get("status") for e in pair].count("accepted") for pair in zip(a, b)]
        ok = ids_a == ids_b and all(n == 1 for n in accepted)
        with self.lock:
            self.race_checks.append((ok, f"{path} to both at once: {self.replicas[0].name} {status_a} "
                                         f"{json.dumps(a)[:300]}; {self.replicas[1].name} {status_b} "
                                         f"{json.dumps(b)[:300]}"))

    def worker(self, worker):
        rng = random.Random(self.seed * 1000 + worker)
        connections = {}
        sequence = 0
        while not self.stop.is_set():
            sequence += 1
            path, body, provider = self.payload(rng, worker, sequence)
            if rng.random() < 0.05:
                self.race(rng, path, body, provider)
                continue
            first = rng.randrange(2)
            answered = self.deliver(connections, path, body, provider, first)
            if answered is not None and rng.random() < 0.12:
                self.duplicate(connections, path, body, answered[0], answered[1])
        for c in connections.values():
            c.close()

    def start(self):
        self.workers = [threading.Thread(target=self.worker, args=(i,), daemon=True) for i in range(self.threads)]
        for thread in self.workers:
            thread.start()

    def finish(self):
        self.stop.set()
        for thread in self.workers:
            thread.join(timeout=60)


# --- the run ---------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=".build/debug/attribution-gateway")
    parser.add_argument("--kills", type=int, default=3, help="SIGKILLs during the load (0: a control run)")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of the load phase")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=None, help="default: a new one each run (printed)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (configs, replica logs)")
    args = parser.parse_args()
    server_url = os.environ.get("GATEWAY_TEST_POSTGRES_URL")
    if not server_url:
        print("replicas_test: GATEWAY_TEST_POSTGRES_URL is not set; run scripts/replicas-test "
              "(it starts PostgreSQL with scripts/with-postgres)")
        return 2
    if not os.access(args.binary, os.X_OK):
        print(f"replicas_test: no gateway at {args.binary}; build it (swift build) or pass --binary")
        return 2
    args.kills = max(0, args.kills)
    seed = args.seed if args.seed is not None else random.randrange(1, 1 << 30)
    rng = random.Random(seed)
    print(f"replicas: seed {seed}, {args.kills} kills in {args.seconds:g} s of load, lease {LEASE_S} s")

    def terminate(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, terminate)

    work = tempfile.mkdtemp(prefix="replicas-test.")
    database = f"replicas_{os.getpid()}_{seed}"
    receiver = None
    replicas = []
    created = False
    failed = True
    try:
        psql(server_url, f'CREATE DATABASE "{database}"')
        created = True
        url = database_url(server_url, database)
        signer = SkanSigner()
        receiver = Receiver()
        ports = [free_port(), free_port()]
        replicas = [Replica(name, args.binary, work, url, port, receiver.port, signer.spki)
                    for name, port in zip("ab", ports)]
        for replica in replicas:
            replica.start()
        failed = run(args, rng, url, replicas, receiver, signer, seed)
    except StartFailure as error:
        print("FAIL", error)
    except KeyboardInterrupt as error:
        print("replicas: interrupted", error)
    finally:
        for replica in replicas:
            replica.stop()
        if failed:
            for replica in replicas:
                print(f"--- tail of {replica.log}")
                print("".join(replica.tail()).rstrip() or "(empty)")
        if receiver is not None:
            receiver.stop()
        if created:
            try:
                psql(server_url, f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')
            except Exception as error:  # cleanup goes on
                print("replicas: could not drop the database:", error)
        if args.keep:
            print("replicas: kept", work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


def run(args, rng, url, replicas, receiver, signer, seed):
    load = Load(replicas, signer, seed, args.threads)
    started = time.monotonic()
    load.start()
    kills = []  # (monotonic time, replica name)
    slot = args.seconds / (args.kills + 1)
    try:
        for number in range(args.kills):
            # A random moment in this kill's slot, and never before the last restart took load.
            at = started + slot * number + rng.uniform(0.4, 1.0) * slot
            time.sleep(max(0.0, at - time.monotonic()))
            victim = replicas[rng.randrange(2)]
            with load.lock:
                acked = sum(len(v) for v in load.acked_at.values())
            victim.kill()
            kills.append((time.monotonic(), victim.name))
            print(f"kill {number + 1}: SIGKILL replica {victim.name} at {kills[-1][0] - started:.1f} s "
                  f"({acked} answers 2xx so far)")
            time.sleep(rng.uniform(0.1, 1.0))
            victim.start()
            print(f"         replica {victim.name} restarted, ready after {time.monotonic() - kills[-1][0]:.1f} s")
        # Load goes on for the rest of the phase, and at least 1.5 s after the last restart.
        time.sleep(max(started + args.seconds - time.monotonic(), 1.5))
    finally:
        load.finish()
    load_seconds = time.monotonic() - started
    print(f"load: {load.requests} requests in {load_seconds:.1f} s, {load.cut_off} cut off by a kill or a "
          f"replica down, {load.unanswered} never answered")

    # Both replicas are up (each restart waited for /readyz); let them deliver what is left,
    # the killed replicas' claimed rows after their lease.
    for replica in replicas:
        if replica.process.poll() is not None or not wait_ready(replica.port, 10):
            print(f"FAIL replica {replica.name} is not up and ready after the load "
                  f"(exit status {replica.process.poll()})")
            return True
    acknowledged = dict(load.acknowledged)
    deadline = time.monotonic() + 60 + LEASE_S
    outbox = None
    while time.monotonic() < deadline:
        copies, _ = receiver.snapshot()
        outbox = int(psql(url, "SELECT count(*) FROM outbox")[0])
        if outbox == 0 and set(acknowledged) <= set(copies):
            break
        time.sleep(0.5)
    time.sleep(0.5)  # anything still arriving would be a second copy
    drain_seconds = time.monotonic() - started - load_seconds
    copies, bodies = receiver.snapshot()
    rows = [line.split("|") for line in psql(url, "SELECT record_id, provider, dedupe_key FROM records")]
    outbox = int(psql(url, "SELECT count(*) FROM outbox")[0])
    dead = psql(url, "SELECT d.sink, r.record_id, d.error FROM dead_letters d JOIN records r ON r.seq = d.record_seq")
    pending = int(psql(url, "SELECT count(*) FROM pending")[0])

    stored_ids = collections.Counter(r[0] for r in rows)
    stored = set(stored_ids)
    acked = set(acknowledged)
    delivered = set(copies)
    redelivered = {rid: c for rid, c in copies.items() if len(c) > 1}
    missing_store = acked - stored
    unacknowledged = stored - acked
    never_delivered = stored - delivered
    unknown = delivered - stored

    checks = []

    def check(ok, name, detail=""):
        checks.append(ok)
        print(("ok   " if ok else "FAIL ") + name + ("" if ok or not detail else f": {detail}"))

    # The load reached both replicas, on every provider, and each restarted one took load.
    per = {(r.name, p): load.acked_by[(r.name, p)] for r in replicas for p in ("iad", "skadnetwork", "s2s")}
    check(all(per.values()), "iAd, SKAN and /v1/events answered 2xx by both replicas",
          ", ".join(f"{r}/{p}={n}" for (r, p), n in per.items()))
    idle = []
    for at, name in kills:
        if not any(t > at for t in load.acked_at[name]):
            idle.append(f"{name} after the kill at {at - started:.1f} s")
    check(len(kills) >= args.kills and not idle, f"{len(kills)} kills, each restarted replica took load",
          f"no 2xx from {idle}")
    check(not load.unexpected, "every answer was 2xx with record ids (a cut-off connection excused)",
          f"{len(load.unexpected)} others, e.g. {load.unexpected[:3]}")
    check(not load.first_duplicates, "no payload sent once was answered duplicate",
          f"{len(load.first_duplicates)}, e.g. {load.first_duplicates[:3]}")
    check(not missing_store and all(stored_ids[rid] == 1 for rid in acked),
          "every acknowledged record is stored exactly once",
          f"{len(missing_store)} missing from records, e.g. {sorted(missing_store)[:5]}")
    # Cross-replica dedupe, seen from the receiver: one record per payload element.
    identities = collections.defaultdict(set)
    for rid, record in bodies.items():
        raw = record.get("raw") if isinstance(record.get("raw"), dict) else {}
        identity = {"iad": record.get("app_user_id"), "skadnetwork": record.get("transaction_id"),
                    "s2s": raw.get("transaction_id") or raw.get("event_id")}.get(record.get("provider"))
        identities[(record.get("provider"), identity or record.get("dedupe_key"))].add(rid)
    keys = collections.defaultdict(set)
    for rid, _, key in rows:
        keys[key].add(rid)
    doubled = {k: v for k, v in identities.items() if len(v) > 1}
    doubled.update({k: v for k, v in keys.items() if len(v) > 1})
    check(not doubled, "no payload became two records", f"{len(doubled)}, e.g. {list(doubled.items())[:3]}")
    check(not (acked - delivered), "every acknowledged record was delivered",
          f"{len(acked - delivered)} never reached the receiver, e.g. {sorted(acked - delivered)[:5]}")
    check(not never_delivered and not unknown and not dead,
          "every stored record was delivered, none dead-lettered, none unknown",
          f"{len(never_delivered)} stored not delivered, {len(unknown)} delivered not stored, "
          f"{len(dead)} dead letters e.g. {dead[:3]}")
    check(outbox == 0 and pending == 0, "the outbox is empty at the end", f"outbox {outbox}, pending {pending}")
    check(receiver.bad_signatures == 0 and not receiver.bad_bodies, "every delivery was signed and well formed",
          f"{receiver.bad_signatures} bad signatures, {len(receiver.bad_bodies)} bad bodies {receiver.bad_bodies[:2]}")
    skan = [b for b in bodies.values() if b.get("provider") == "skadnetwork"]
    unverified = [b for b in skan if b.get("signature") != "verified"]
    check(skan and not unverified, "SKAN postbacks were delivered verified",
          f"{len(skan)} delivered, {len(unverified)} not verified, e.g. "
          f"{[(b.get('record_id'), b.get('signature')) for b in unverified[:3]]}")
    # A second copy is explained only by a kill of the replica that sent an earlier copy,
    # within that copy's lease (a request read after its sender died counts: 1 s slack),
    # and before the second copy.
    unexplained = {}
    for rid, c in redelivered.items():
        c = sorted(c)
        for i in range(1, len(c)):
            if not any(c[j][1] == name and at - LEASE_S <= c[j][0] <= at + 1.0 and at <= c[i][0]
                       for at, name in kills for j in range(i)):
                unexplained[rid] = c
                break
    check(not unexplained, "a record reached the receiver twice only after a kill of the replica that sent it",
          f"{len(unexplained)} unexplained, e.g. " + "; ".join(
              f"{rid}: " + ", ".join(f"{t - started:.2f}s by {r} key {k}" for t, r, k in c)
              for rid, c in list(unexplained.items())[:3]) + f"; kills at " +
          ", ".join(f"{at - started:.2f}s ({name})" for at, name in kills))
    bad_duplicates = [d for ok, d in load.duplicate_checks if not ok]
    check(load.duplicate_checks and not bad_duplicates,
          "duplicates sent to the other replica were answered 200 naming the original record",
          f"{len(bad_duplicates)} of {len(load.duplicate_checks)} wrong, e.g. {bad_duplicates[:2]}")
    bad_races = [d for ok, d in load.race_checks if not ok]
    check(not bad_races, "a payload sent to both replicas at once: one record, one accepted, one duplicate",
          f"{len(bad_races)} of {len(load.race_checks)} wrong, e.g. {bad_races[:2]}")

    gaps = sorted(sorted(c)[1][0] - sorted(c)[0][0] for c in redelivered.values())
    print(f"load {load_seconds:.1f} s, drain {drain_seconds:.1f} s; races checked {len(load.race_checks)}; "
          f"stored unacknowledged (answer lost in a kill) {len(unacknowledged)}; "
          f"redelivered after a kill {len(redelivered) - len(unexplained)}"
          + (f", second copy {gaps[0]:.1f}-{gaps[-1]:.1f} s after the first (lease {LEASE_S} s)" if gaps else ""))
    print(f"replicas: acknowledged={len(acked)} stored={len(stored)} delivered={len(delivered)} "
          f"redelivered={len(redelivered)} kills={len(kills)} duplicates_checked={len(load.duplicate_checks)}")
    failed = checks.count(False)
    print(f"{len(checks) - failed} passed, {failed} failed")
    return failed > 0


if __name__ == "__main__":
    sys.exit(main())
