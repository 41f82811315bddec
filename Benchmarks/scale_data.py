#!/usr/bin/env python3
"""Writes the scale benchmark's history: COUNT iAd installs (about 420 bytes each, random
UUID-like user ids, a few hundred keywords) to installs.jsonl, and purchases for
PURCHASE_SHARE of the users as S2S events to purchases.jsonl, each line an import
envelope with the time it arrived. Deterministic for one seed."""
import json
import random
import sys
import uuid

count = int(sys.argv[1])
purchase_share = float(sys.argv[2])
directory = sys.argv[3]
rng = random.Random(20261128)
keywords = [(87_000_000 + index, f"keyword {index}") for index in range(300)]


def uid():
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


with open(f"{directory}/installs.jsonl", "w") as installs, open(f"{directory}/purchases.jsonl", "w") as purchases:
    for index in range(count):
        user = uid()
        keyword_id, keyword = keywords[rng.randrange(len(keywords))]
        day = 1 + index * 365 // max(count, 1)
        month, mday = 1 + (day - 1) // 31 % 12, 1 + (day - 1) % 28
        when = f"2025-{month:02d}-{mday:02d}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:00Z"
        payload = {
            "app_id": "1234567890", "app_user_id": user, "Version3.1": {
                "iad-attribution": "true", "iad-org-id": "40669820", "iad-org-name": "Mindful Apps Inc.",
                "iad-campaign-id": str(542370539 + keyword_id % 7), "iad-campaign-name": "US Search",
                "iad-adgroup-id": str(542317095 + keyword_id % 13), "iad-adgroup-name": "Exact",
                "iad-keyword-id": str(keyword_id), "iad-keyword": keyword, "iad-keyword-matchtype": "Exact",
                "iad-country-or-region": "US", "iad-conversion-type": "Download",
                "iad-click-date": when, "iad-conversion-date": when}}
        installs.write(json.dumps({"received_at": when, "payload": payload}, separators=(",", ":")) + "\n")
        if rng.random() < purchase_share:
            event = {
                "type": "purchase", "app_id": "1234567890", "app_user_id": user, "revenue": 9.99,
                "currency": "USD", "transaction_id": str(2_000_000_000_000 + index), "timestamp": when,
                "ip": "203.0.113.7", "os_version": "18.1"}
            purchases.write(json.dumps({"received_at": when, "payload": event}, separators=(",", ":")) + "\n")
