#!/usr/bin/env python3
"""Throws malformed, truncated, oversized and type-confused bodies at every route of a
running gateway and checks each answer: never a 5xx, never a dropped connection, and every
4xx a JSON error ({"error": {"code", "message"}}). Run by scripts/fuzz, which starts the
gateway; a reviewer reruns it with another --seed or --count.
"""
import argparse
import http.client
import json
import random
import sys
import threading
import time

# Valid payloads per route, mutated below. Values follow the README's examples.
IDFV = "6D92078A-8246-4BA4-AE5B-76104861E7DC"
SEEDS = {
    "/v1/iad": {
        "app_id": "1234567890", "app_user_id": "user-1", "att_status": 3, "idfv": IDFV,
        "Version3.1": {"iad-attribution": "true", "iad-org-id": "40669820", "iad-campaign-id": "542370539",
                       "iad-adgroup-id": "542317095", "iad-keyword-id": "87675432", "iad-keyword": "meditation",
                       "iad-click-date": "2020-08-04T17:18:07Z", "iad-conversion-type": "Download"},
    },
    "/v1/adservices": {"token": "dG9rZW4tZm9yLWZ1enppbmc=", "app_id": "1234567890", "app_user_id": "user-1",
                       "att_status": 2},
    "/v1/events": {"type": "purchase", "name": "subscribe", "app_id": "1234567890", "bundle_id": "com.example.app",
                   "app_user_id": "user-1", "idfv": IDFV, "att_status": 2, "ip": "203.0.113.7", "os_version": "18.1",
                   "timestamp": 1763900000, "revenue": 9.99, "currency": "USD", "transaction_id": "2000000123",
                   "properties": {"plan": "monthly"}, "vendor_ids": {"appsflyer_id": "1700000000000-1234567"}},
    "/v1/skadnetwork/postbacks": {"version": "4.0", "ad-network-id": "example123.skadnetwork",
                                  "source-identifier": "5239", "app-id": 525463029, "transaction-id": "6aafb7a5-0170-41b5-bbe4-fe71dedf1e31",
                                  "redownload": False, "source-domain": "example.com", "fidelity-type": 1,
                                  "did-win": True, "coarse-conversion-value": "high", "postback-sequence-index": 0,
                                  "attribution-signature": "MEYCIQD5eq3AUlamORiGovqFiHWI4RZT/PrM3VEiXUrsC+M51wIhAPMANZA9c07raZJ64gVaXhB9+9yZj/X6DcNxONdccQij"},
    "/.well-known/skadnetwork/report-attribution/": {"version": "3.0", "ad-network-id": "example123.skadnetwork",
                                                    "transaction-id": "6aafb7a5-0170-41b5-bbe4-fe71dedf1e32",
                                                    "app-id": 525463029, "attribution-signature": "AAAA"},
    "/.well-known/appattribution/report-attribution/": {"jws-string": "a.b.c", "conversion-value": 3},
    "/functions/v1/create-user": {"asa_attribution_token": "dG9rZW4="},
    "/functions/v1/resolve-asa-attribution": {"user_id": 1, "asa_attribution_token": "dG9rZW4="},
    "/functions/v1/associate-user": {"user_id": 1, "transaction_id": "2000000999"},
    "/v1/s2s/appsflyer/callbacks": {"event_name": "install", "media_source": "Apple Search Ads", "campaign": "US",
                                    "af_c_id": "542370539", "install_time": "2023-11-01 04:05:07.925",
                                    "appsflyer_id": "1698811503838-6471005", "app_id": "id1234567890"},
}
GET_ROUTES = ["/v1/skadnetwork/conversion-value", "/v1/s2s/adjust/callbacks", "/healthz", "/readyz", "/openapi.yaml"]
CONFUSERS = [None, True, False, 0, -1, 2**63, -(2**63) - 1, 1e308, 1.5, "", " ", "x" * 5000, "\u0000", "\ud7ff",
             "💥" * 300, [], [1, 2], {}, {"a": {"b": {"c": []}}}, "1e999", "NaN", "true", "-0", "0x10"]


def mutate(rng, route):
    """One hostile body for `route`, as bytes."""
    base = SEEDS.get(route, {})
    kind = rng.randrange(10)
    text = json.dumps(base)
    if kind == 0:  # random bytes, often not UTF-8
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
    if kind == 1:  # truncated JSON
        return text[: rng.randrange(len(text))].encode()
    if kind == 2:  # a field replaced by another type
        body = json.loads(text)
        if body:
            body[rng.choice(list(body))] = rng.choice(CONFUSERS)
        return json.dumps(body).encode()
    if kind == 3:  # a nested field replaced, or a new unknown field
        body = json.loads(text)
        target = body
        for value in body.values():
            if isinstance(value, dict) and value:
                target = value
                break
        key = rng.choice(list(target) + ["unknown-" + str(rng.randrange(99))]) if target else "k"
        target[key] = rng.choice(CONFUSERS)
        return json.dumps(body).encode()
    if kind == 4:  # the wrong top-level type
        return json.dumps(rng.choice([[], [base] * rng.randrange(3), "text", 42, None, [[base]], [1, "a"]])).encode()
    if kind == 5:  # deep nesting; 31-32 levels inside a valid payload sit at the limit
        if base and rng.random() < 0.5:
            body = json.loads(text)
            depth = rng.choice([28, 29, 30, 31, 32])
            body["deep"] = json.loads("[" * depth + "]" * depth)
            return json.dumps(body).encode()
        depth = rng.choice([10, 100, 600, 5000])
        return ("[" * depth + "]" * depth).encode() if rng.random() < 0.5 else ('{"a":' * depth + "1" + "}" * depth).encode()
    if kind == 6:  # oversized
        return b'{"pad":"' + b"x" * rng.choice([70_000, 300_000]) + b'"}'
    if kind == 7:  # byte flips in a valid body
        data = bytearray(text.encode())
        for _ in range(rng.randrange(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data)
    if kind == 8:  # arrays at and over the batch limit, of mixed validity
        return json.dumps([base, {}, None][: rng.randrange(1, 4)] * rng.choice([1, 400, 1001])).encode()
    return json.dumps({k: v for k, v in base.items() if rng.random() < 0.5}).encode()  # fields missing


def fuzz_query(rng):
    parts = []
    for _ in range(rng.randrange(6)):
        key = rng.choice(["n", "conversion_value", "total_revenue_by_currency", "activity_kind", "installed_at",
                          "network_name", "secret", "idfv", "last_call_to_skadnetwork_timestamp", "%ff", "a[]"])
        value = rng.choice(["", "x", "64", "-1", "9" * 40, "%7B%22USD%22%3A1%7D", "%7B", "install", "click",
                            "%00", "%E2%82", "fuzz-secret-000000001", "1e999"])
        parts.append(f"{key}={value}")
    return "?" + "&".join(parts) if parts else ""


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.sent = 0
        self.by_status = {}
        self.failures = []

    def add(self, status, problem=None):
        with self.lock:
            self.sent += 1
            self.by_status[status] = self.by_status.get(status, 0) + 1
            if problem and len(self.failures) < 20:
                self.failures.append(problem)


def check(route, status, content_type, body):
    if status >= 500:
        return f"{status} from {route}: {body[:200]!r}"
    if status >= 400:
        if not content_type.startswith("application/json"):
            return f"{status} from {route} is not JSON ({content_type})"
        try:
            error = json.loads(body)["error"]
            if not isinstance(error.get("code"), str) or not isinstance(error.get("message"), str):
                raise ValueError
        except Exception:
            return f"{status} from {route} is not a JSON error: {body[:200]!r}"
    return None


def worker(host, port, count, seed, stats, headers):
    rng = random.Random(seed)
    connection = http.client.HTTPConnection(host, port, timeout=30)
    posts = list(SEEDS)
    for _ in range(count):
        if rng.random() < 0.1:
            route = rng.choice(GET_ROUTES)
            method, path, body = "GET", route + fuzz_query(rng), None
        else:
            route = rng.choice(posts)
            method, path, body = "POST", route + (fuzz_query(rng) if rng.random() < 0.2 else ""), mutate(rng, route)
        request_headers = dict(headers)
        request_headers["Content-Type"] = rng.choice(["application/json"] * 8 + ["text/plain", "application/x-www-form-urlencoded"])
        try:
            connection.request(method, path, body=body, headers=request_headers)
            response = connection.getresponse()
            data = response.read()
            problem = check(route, response.status, response.getheader("Content-Type") or "", data)
            stats.add(response.status, problem)
            if response.getheader("Connection", "").lower() == "close":
                connection.close()
                connection = http.client.HTTPConnection(host, port, timeout=30)
        except (ConnectionError, http.client.HTTPException, OSError) as error:
            # Hummingbird may close a connection after refusing an oversized body; anything else is a failure.
            oversized = body is not None and len(body) > 65536
            stats.add("closed", None if oversized else f"{method} {route}: connection error {error!r}")
            connection.close()
            connection = http.client.HTTPConnection(host, port, timeout=30)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=20261123)
    parser.add_argument("--secret", default="fuzz-secret-000000001")
    args = parser.parse_args()
    stats = Stats()
    per = [args.count // args.threads + (1 if i < args.count % args.threads else 0) for i in range(args.threads)]
    started = time.time()
    threads = [threading.Thread(target=worker, args=("127.0.0.1", args.port, per[i], args.seed + i, stats,
                                                     {"X-Gateway-Secret": args.secret}))
               for i in range(args.threads)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.time() - started
    statuses = ", ".join(f"{k}: {v}" for k, v in sorted(stats.by_status.items(), key=lambda kv: str(kv[0])))
    print(f"fuzz: {stats.sent} requests in {elapsed:.1f} s (seed {args.seed}); statuses {statuses}")
    if stats.sent != args.count:
        stats.failures.append(f"only {stats.sent} of {args.count} requests were sent (a worker died)")
    # What was accepted must also be deliverable: the outbox drains and the gateway is ready.
    def get(path):
        connection = http.client.HTTPConnection("127.0.0.1", args.port, timeout=10)
        connection.request("GET", path)
        response = connection.getresponse()
        text = response.read().decode()
        connection.close()
        return response.status, text

    def metric(text, prefix, condition=""):
        return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(prefix) and condition in line)

    deadline = time.time() + 60
    ready = False
    while time.time() < deadline and not ready:
        ready = get("/readyz")[0] == 200 and metric(get("/metrics")[1], "gateway_outbox_depth{") == 0
        if not ready:
            time.sleep(0.5)
    if not ready:
        stats.failures.append("the outbox did not drain or /readyz is not 200 after the run")
    dead = metric(get("/metrics")[1], "gateway_deliveries_total{", 'outcome="dead_letter"')
    if dead:
        stats.failures.append(f"{dead:.0f} records accepted by the fuzz were dead-lettered")
    for failure in stats.failures:
        print("FAIL", failure)
    sys.exit(1 if stats.failures else 0)


if __name__ == "__main__":
    main()
